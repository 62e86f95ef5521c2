/**
 * The fault schedule: planned up front from the seed (kinds, times, targets),
 * so a run can be repeated, then executed against the stack. The first pass
 * fires every kind once, in a seeded order, early enough that even a short
 * run sees all of them; later faults are drawn at random with weights.
 * Faults on one component run one at a time (one gateway down at a time, one
 * NATS node down at a time); different components overlap freely.
 */
import type { NatsCluster } from '@tether/testing';
import type { ChaosStack, UpstreamName } from './stack.js';
import { sleep } from './util.js';
import type { Rng } from '../shared/random.js';

export const FaultKind = {
  gatewaySigkill: 'gateway_sigkill',
  gatewayDrain: 'gateway_sigterm_drain',
  natsNodeKill: 'nats_node_kill',
  upstreamRestart: 'upstream_restart',
  connectionCut: 'connection_cut_all',
  slowClient: 'slow_client',
} as const;
export type FaultKind = (typeof FaultKind)[keyof typeof FaultKind];

const ALL_KINDS: readonly FaultKind[] = Object.values(FaultKind);
/** Spacing of the first pass (every kind once) in a long run. */
const FIRST_PASS_STEP_MS = 8_000;
/** How often each kind is drawn after the first pass. */
const WEIGHTS: Readonly<Record<FaultKind, number>> = {
  gateway_sigkill: 3,
  gateway_sigterm_drain: 1,
  nats_node_kill: 1,
  upstream_restart: 1,
  connection_cut_all: 3,
  slow_client: 3,
};

export interface PlannedFault {
  readonly atMs: number;
  readonly kind: FaultKind;
  /** Picks the gateway slot, NATS node, upstream or client (modulo their count). */
  readonly target: number;
  /** How long the component stays down before its restart. */
  readonly downMs: number;
}

export interface FaultRecord {
  readonly kind: FaultKind;
  readonly plannedAtMs: number;
  startedAtMs: number;
  endedAtMs: number | undefined;
  readonly target: string;
  ok: boolean;
  detail: string;
}

/**
 * Plans faults over `[startMs, endMs]` of the run: every kind once, about
 * 8 s apart (closer in a short run: within the first 60% of the window),
 * then one every `meanGapMs` on average until the end.
 */
export function planFaults(rng: Rng, startMs: number, endMs: number, meanGapMs: number): PlannedFault[] {
  const plan: PlannedFault[] = [];
  const firstPassEnd = startMs + Math.min((endMs - startMs) * 0.6, ALL_KINDS.length * FIRST_PASS_STEP_MS);
  const kinds = [...ALL_KINDS];
  for (let i = kinds.length - 1; i > 0; i -= 1) {
    const j = rng.int(0, i);
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  const step = (firstPassEnd - startMs) / kinds.length;
  for (const [i, kind] of kinds.entries()) {
    plan.push({ atMs: Math.round(startMs + step * i + rng.next() * step * 0.5), kind, target: rng.int(0, 1_000), downMs: downTime(rng, kind) });
  }
  let t = firstPassEnd;
  const total = ALL_KINDS.reduce((sum, k) => sum + WEIGHTS[k], 0);
  for (;;) {
    t += -Math.log(1 - rng.next()) * meanGapMs;
    if (t >= endMs) break;
    let draw = rng.next() * total;
    let kind: FaultKind = ALL_KINDS[0]!;
    for (const k of ALL_KINDS) {
      draw -= WEIGHTS[k];
      if (draw < 0) {
        kind = k;
        break;
      }
    }
    plan.push({ atMs: Math.round(t), kind, target: rng.int(0, 1_000), downMs: downTime(rng, kind) });
  }
  return plan;
}

function downTime(rng: Rng, kind: FaultKind): number {
  switch (kind) {
    case 'gateway_sigkill':
      return rng.int(300, 2_000);
    case 'nats_node_kill':
      return rng.int(1_000, 4_000);
    case 'upstream_restart':
      return rng.int(100, 1_000);
    default:
      return 0;
  }
}

export interface FaultTargets {
  readonly stack: ChaosStack;
  /** Client names, for `slow_client`. */
  readonly clients: readonly string[];
  /** Streams a client must read slowly. */
  readonly slowStreams: Map<string, number>;
  /** Progress lines (the CLI prints them). */
  readonly say: (line: string) => void;
}

/** Runs the plan from `t0` until it is done or `signal` aborts; every restart is finished before it resolves. */
export async function runFaults(plan: readonly PlannedFault[], targets: FaultTargets, t0: number, signal: AbortSignal): Promise<FaultRecord[]> {
  const records: FaultRecord[] = [];
  const locks = new Map<string, Promise<void>>();
  const running: Promise<void>[] = [];
  const exclusive = (lock: string, fn: () => Promise<void>): Promise<void> => {
    const before = locks.get(lock) ?? Promise.resolve();
    const next = before.then(fn, fn);
    locks.set(lock, next.catch(() => undefined));
    return next;
  };
  for (const fault of plan) {
    await sleep(t0 + fault.atMs - Date.now(), signal);
    if (signal.aborted) break;
    const record: FaultRecord = { kind: fault.kind, plannedAtMs: fault.atMs, startedAtMs: 0, endedAtMs: undefined, target: '', ok: false, detail: '' };
    records.push(record);
    const lock = fault.kind === 'gateway_sigkill' || fault.kind === 'gateway_sigterm_drain' ? 'gateway' : fault.kind === 'nats_node_kill' ? 'nats' : fault.kind === 'upstream_restart' ? `upstream-${fault.target % 2}` : `free-${records.length}`;
    running.push(
      exclusive(lock, async () => {
        record.startedAtMs = Date.now() - t0;
        try {
          await execute(fault, record, targets);
          record.ok = true;
        } catch (err) {
          record.detail = `${record.detail} failed: ${(err as Error).message}`.trim();
        } finally {
          record.endedAtMs = Date.now() - t0;
          targets.say(`fault ${record.kind} ${record.target} at ${(record.startedAtMs / 1000).toFixed(1)}s: ${record.ok ? 'ok' : 'FAILED'} ${record.detail}`);
        }
      }),
    );
  }
  await Promise.all(running);
  return records;
}

async function execute(fault: PlannedFault, record: FaultRecord, { stack, clients, slowStreams }: FaultTargets): Promise<void> {
  switch (fault.kind) {
    case 'gateway_sigkill': {
      const slot = fault.target % stack.gateways.length;
      (record as { target: string }).target = `gw${slot + 1}`;
      await stack.killGateway(slot);
      await sleep(fault.downMs);
      await stack.startGateway(slot);
      record.detail = `down ${fault.downMs}ms`;
      return;
    }
    case 'gateway_sigterm_drain': {
      const slot = fault.target % stack.gateways.length;
      (record as { target: string }).target = `gw${slot + 1}`;
      const exit = await stack.drainGateway(slot);
      record.detail = `drained in ${exit.ms}ms (exit ${exit.code ?? exit.signal})`;
      await stack.startGateway(slot);
      return;
    }
    case 'nats_node_kill': {
      // Two kills in three take the log stream's leader (an election stalls appends
      // and resumes for seconds); the third a node at random.
      const leader = fault.target % 3 === 0 ? undefined : await streamLeaderIndex(stack.cluster, stack.streamName);
      const index = leader ?? fault.target % stack.cluster.servers.length;
      const node = stack.cluster.servers[index]!;
      const role = await roleOf(stack.cluster, index, stack.streamName);
      (record as { target: string }).target = `nats${index + 1}`;
      await node.kill();
      await sleep(fault.downMs);
      const began = Date.now();
      await node.restart();
      record.detail = `${role}, down ${fault.downMs}ms, caught up in ${Date.now() - began}ms`;
      return;
    }
    case 'upstream_restart': {
      const name: UpstreamName = fault.target % 2 === 0 ? 'store' : 'plain';
      (record as { target: string }).target = `upstream-${name}`;
      await stack.restartUpstream(name, fault.downMs);
      record.detail = `down ${fault.downMs}ms`;
      return;
    }
    case 'connection_cut_all': {
      (record as { target: string }).target = 'balancer';
      record.detail = `${stack.proxy.cutAll()} requests cut`;
      return;
    }
    case 'slow_client': {
      const client = clients[fault.target % clients.length]!;
      (record as { target: string }).target = client;
      slowStreams.set(client, (slowStreams.get(client) ?? 0) + 2);
      record.detail = 'next 2 calls at 1/20 of the producer rate';
      return;
    }
  }
}

/** Which JetStream roles a node holds right now (meta leader, leader of the log stream or a bucket), from its monitor port. */
async function roleOf(cluster: NatsCluster, index: number, streamName: string): Promise<string> {
  const node = cluster.servers[index]!;
  try {
    const varz = (await (await fetch(`http://127.0.0.1:${node.monitorPort}/varz`, { signal: AbortSignal.timeout(2_000) })).json()) as { server_name?: string };
    const res = await fetch(`http://127.0.0.1:${node.monitorPort}/jsz?streams=true`, { signal: AbortSignal.timeout(2_000) });
    const jsz = (await res.json()) as {
      meta_cluster?: { leader?: string };
      account_details?: Array<{ stream_detail?: Array<{ name?: string; cluster?: { leader?: string } }> }>;
    };
    const me = varz.server_name;
    const roles: string[] = [];
    if (me !== undefined && jsz.meta_cluster?.leader === me) roles.push('meta leader');
    for (const account of jsz.account_details ?? []) {
      for (const s of account.stream_detail ?? []) {
        if (me === undefined || s.cluster?.leader !== me) continue;
        roles.push(s.name === streamName ? 'log stream leader' : `${s.name ?? '?'} leader`);
      }
    }
    return roles.length === 0 ? 'follower' : roles.join(' + ');
  } catch {
    return 'role unknown';
  }
}

/** Index of the node leading the log stream, from any node's monitor port. */
async function streamLeaderIndex(cluster: NatsCluster, streamName: string): Promise<number | undefined> {
  for (const node of cluster.servers) {
    try {
      const res = await fetch(`http://127.0.0.1:${node.monitorPort}/jsz?streams=true`, { signal: AbortSignal.timeout(2_000) });
      const jsz = (await res.json()) as { account_details?: Array<{ stream_detail?: Array<{ name?: string; cluster?: { leader?: string } }> }> };
      for (const account of jsz.account_details ?? []) {
        for (const s of account.stream_detail ?? []) {
          if (s.name !== streamName || s.cluster?.leader === undefined) continue;
          const index = await indexOfServer(cluster, s.cluster.leader);
          if (index !== undefined) return index;
        }
      }
    } catch {
      // Try the next node.
    }
  }
  return undefined;
}

async function indexOfServer(cluster: NatsCluster, serverName: string): Promise<number | undefined> {
  for (const [i, node] of cluster.servers.entries()) {
    try {
      const res = await fetch(`http://127.0.0.1:${node.monitorPort}/varz`, { signal: AbortSignal.timeout(2_000) });
      if (((await res.json()) as { server_name?: string }).server_name === serverName) return i;
    } catch {
      // A node that does not answer is not the leader we are looking for.
    }
  }
  return undefined;
}
