import { describe, expect, it } from 'vitest';
import { DEFAULT_KINDS, DEFAULT_SELECTION, firstPassPending, parseFaultSelection, partitionedRoles, planFaults } from './faults.js';
import type { FaultRecord } from './faults.js';
import { NET_KINDS } from './net/net-faults.js';
import { createRng } from '../shared/random.js';

// The fault schedule's selection: `--faults` parsing, and every selected
// kind in the first pass, seeded and bounded.

describe('chaos faults: --faults', () => {
  it('default is the six kinds of before, all adds the new ones, a weight overrides', () => {
    expect(parseFaultSelection('default')).toEqual(DEFAULT_SELECTION);
    expect(parseFaultSelection('all').map((s) => s.kind)).toEqual([...DEFAULT_KINDS, 'nats_power_loss', 'gateway_nats_cut', 'nats_node_stop']);
    expect(parseFaultSelection('default,gateway_nats_cut=5,nats_node_stop')).toEqual([...DEFAULT_SELECTION, { kind: 'gateway_nats_cut', weight: 5 }, { kind: 'nats_node_stop', weight: 1 }]);
  });

  it('refuses unknown kinds, bad weights, an empty list and kinds the target lacks', () => {
    expect(() => parseFaultSelection('nats_reboot')).toThrow(/unknown fault kind "nats_reboot"/);
    expect(() => parseFaultSelection('nats_node_stop=-1')).toThrow(/weight of nats_node_stop/);
    expect(() => parseFaultSelection(' , ')).toThrow(/no fault kind/);
    expect(() => parseFaultSelection('upstream_restart', new Set(['upstream_restart']))).toThrow(/not available/);
    expect(parseFaultSelection('default', new Set(['upstream_restart'])).map((s) => s.kind)).not.toContain('upstream_restart');
  });
});

describe('chaos faults: the network kinds (--net hosts)', () => {
  it('need --net hosts: all leaves them out without it, takes them with it, naming one without it is refused', () => {
    expect(parseFaultSelection('all').map((s) => s.kind)).not.toContain('net_latency');
    expect(parseFaultSelection('all', new Set(), true).map((s) => s.kind)).toEqual([...parseFaultSelection('all').map((s) => s.kind), ...NET_KINDS]);
    expect(() => parseFaultSelection('nats_node_isolated')).toThrow(/needs --net hosts/);
    expect(parseFaultSelection('default,route_reset=2', new Set(), true).at(-1)).toEqual({ kind: 'route_reset', weight: 2 });
  });

  it('are planned within their bounds, every one in the first pass', () => {
    const plan = planFaults(createRng(5), 1_000, 60_000, 2_000, parseFaultSelection(NET_KINDS.join(','), new Set(), true));
    expect(new Set(plan.slice(0, NET_KINDS.length).map((f) => f.kind))).toEqual(new Set(NET_KINDS));
    for (const f of plan) {
      expect(f.downMs).toBeGreaterThanOrEqual(500);
      expect(f.downMs).toBeLessThanOrEqual(15_000);
    }
  });
});

describe('chaos faults: the plan', () => {
  it('fires every selected kind once in the first pass, then draws only kinds with a weight, within the window', () => {
    const selection = parseFaultSelection('nats_power_loss,gateway_nats_cut=2,nats_node_stop=0');
    const plan = planFaults(createRng(3), 1_000, 60_000, 2_000, selection);
    expect(plan.slice(0, 3).map((f) => f.kind).sort()).toEqual(['gateway_nats_cut', 'nats_node_stop', 'nats_power_loss']);
    expect(plan.slice(3).some((f) => f.kind === 'nats_node_stop')).toBe(false);
    expect(plan.length).toBeGreaterThan(10);
    for (const f of plan) {
      expect(f.atMs).toBeGreaterThanOrEqual(1_000);
      expect(f.atMs).toBeLessThan(60_000);
      const [lo, hi] = f.kind === 'nats_power_loss' ? [500, 3_000] : f.kind === 'gateway_nats_cut' ? [1_000, 8_000] : [1_000, 6_000];
      expect(f.downMs).toBeGreaterThanOrEqual(lo!);
      expect(f.downMs).toBeLessThanOrEqual(hi!);
    }
    // Seeded: the same seed plans the same faults.
    expect(planFaults(createRng(3), 1_000, 60_000, 2_000, selection)).toEqual(plan);
  });
});

describe('chaos faults: the first pass is waited for', () => {
  it('names the first-pass kinds whose fault has not ended, whatever the later faults did', () => {
    const selection = parseFaultSelection('nats_power_loss,gateway_nats_cut,nats_node_stop,gateway_sigkill');
    const plan = planFaults(createRng(7), 1_500, 13_000, 4_000, selection);
    const first = plan.filter((f) => f.firstPass === true);
    expect(first.map((f) => f.kind).sort()).toEqual(selection.map((s) => s.kind).sort());
    expect(plan.slice(0, first.length)).toEqual(first);
    const record = (kind: FaultRecord['kind'], ended: boolean): FaultRecord => ({ kind, plannedAtMs: 0, startedAtMs: 1, endedAtMs: ended ? 2 : undefined, target: '', ok: ended, detail: '' });
    // Nothing started yet: every kind is pending.
    expect(firstPassPending(plan, []).sort()).toEqual(selection.map((s) => s.kind).sort());
    // The first two ended, the third runs (a slow power loss, say), the fourth waits behind its lock.
    const live = [record(first[0]!.kind, true), record(first[1]!.kind, true), record(first[2]!.kind, false)];
    expect(firstPassPending(plan, live)).toEqual([first[2]!.kind, first[3]!.kind]);
    // A failed fault ended too: it is not waited for again (its failure is in the report).
    expect(firstPassPending(plan, first.map((f) => record(f.kind, true)))).toEqual([]);
  });
});

describe("chaos faults: a node's roles on a partitioned log", () => {
  it('names the log partitions it leads, and groups the per-partition buckets', () => {
    const streams = ['TETHER_LOG-0_ns', 'TETHER_LOG-1_ns', 'TETHER_LOG-2_ns', 'TETHER_LOG-3_ns'];
    const led = ['KV_tether_sessions-2_ns', 'TETHER_LOG-3_ns', 'TETHER_TASKS_ns', 'TETHER_LOG-1_ns', 'KV_tether_leases-0_ns', 'KV_tether_sessions-0_ns'];
    expect(partitionedRoles(led, streams)).toEqual([
      'log stream leader of partitions 1, 3 of 4 (TETHER_LOG-1_ns, TETHER_LOG-3_ns)',
      'KV_tether_sessions-*_ns leader (partitions 0, 2)',
      'KV_tether_leases-*_ns leader (partitions 0)',
      'TETHER_TASKS_ns leader',
    ]);
    expect(partitionedRoles([], streams)).toEqual([]);
  });
});
