import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeAuditEvent, identityPrincipal, partitionOf, principalDigest, principalTag, SessionLog } from '@tether/session-log';
import type { AuditEvent } from '@tether/session-log';
import { listSessions, openInspectAccess, sessionTag } from '@tether/inspect';
import type { InspectAccess, SessionFilter } from '@tether/inspect';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { listFromEveryEvent, listFromLastEvents } from '../src/sessions.js';
import { scanSessions } from '../src/registry.js';

/**
 * listSessions without a verdict filter orders sessions by their registry
 * record and last audit event and reads only the listed sessions' events;
 * the full pass reads every event. Both must give the same rows for the
 * same log: here active and closed sessions of two routes, sessions whose
 * last audit event is later than their record's touch (and earlier),
 * equal times, sessions the registry forgot (expired, and closed by an
 * audited close) and one whose last audit message does not decode. On an
 * unpartitioned log and on one of 4 partitions (sessions in several of
 * them; the count read from the deployment).
 */
let nats: NatsServer;
/** Two principals as the gateways make them: an OAuth identity (its sessions outlive token refreshes) and a plain token's digest. */
const alice = identityPrincipal('https://issuer.test', 'alice');
const bob = principalDigest('bob-token');
const principalOf = (name: string): string => (['a', 'c', 'e', 'quiet', 'gone'].includes(name) ? alice : bob);

beforeAll(async () => {
  nats = await startNatsServer();
}, 30_000);
afterAll(async () => {
  await nats?.cleanup();
});

describe.each([1, 4])('listSessions on a log of %i partition(s)', (partitions) => {
  let log: SessionLog;
  let access: InspectAccess;
  const namespace = `lst${process.pid}p${partitions}`;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    log = await SessionLog.create({ servers: nats.url, namespace, partitions });
    access = await openInspectAccess({ servers: nats.url, namespace });
    expect(access.partitions).toHaveLength(partitions);
    const base = Date.now();
    const audit = async (name: string, events: Partial<AuditEvent>[]): Promise<void> => {
      for (const e of events) await access.js.publish(access.subjects.audit(ids[name]!), encodeAuditEvent({ v: 1, atMs: base, instance: 'gw-t', kind: 'post', ...e }));
    };
    for (const [name, route] of [['a', '/mcp'], ['b', '/mcp'], ['c', '/other'], ['d', '/mcp'], ['e', '/other'], ['tie1', '/mcp'], ['tie2', '/mcp'], ['garbled', '/mcp'], ['quiet', '/mcp'], ['gone', '/mcp'], ['gone-closed', '/other']] as const) {
      ids[name] = (await log.createSession(principalOf(name), { route })).sessionId;
    }
    await audit('a', [{ kind: 'initialize', atMs: base - 5_000 }, { kind: 'resume', verdict: 'resumed', atMs: base + 60_000 }]);
    await audit('b', [{ kind: 'initialize', atMs: base - 9_000 }, { kind: 'resume', verdict: 'truncated', atMs: base - 8_000 }]);
    await audit('c', [{ kind: 'initialize', atMs: base + 30_000 }, { kind: 'post', atMs: base + 40_000 }]);
    await audit('d', [{ kind: 'initialize', atMs: base + 10_000 }, { kind: 'close', atMs: base + 20_000 }]);
    await log.closeSession(ids['d']!, 'test');
    await audit('e', [{ kind: 'initialize', atMs: base - 100_000 }]);
    await audit('tie1', [{ kind: 'post', atMs: base + 50_000 }]);
    await audit('tie2', [{ kind: 'post', atMs: base + 50_000 }]);
    await audit('garbled', [{ kind: 'post', atMs: base + 45_000 }, { kind: 'resume', verdict: 'resumed', atMs: base + 70_000 }]);
    await access.js.publish(access.subjects.audit(ids['garbled']!), 'not an audit event');
    // `quiet` has a record and no audit events; `gone` and `gone-closed` only audit events.
    await audit('gone', [{ kind: 'initialize', atMs: base + 80_000 }, { kind: 'resume', verdict: 'epoch_mismatch', atMs: base + 90_000 }]);
    await audit('gone-closed', [{ kind: 'initialize', atMs: base - 50_000 }, { kind: 'close', atMs: base - 40_000 }]);
    for (const name of ['gone', 'gone-closed']) await access.partitionOf(ids[name]!).sessions.purge(ids[name]!);
  }, 60_000);
  afterAll(async () => {
    await access?.close();
    await log?.close();
  });

  it('lists from the registry and the listed sessions\' events exactly as the full pass does', async () => {
    const known = await scanSessions(access);
    expect(known.find((s) => s.sessionId === ids['gone'])?.record).toBeUndefined();
    const filters: SessionFilter[] = [{}, { limit: 1 }, { limit: 3 }, { limit: 6 }, { limit: 10_000 }, { state: 'active' }, { state: 'active', limit: 2 }, { state: 'nonsense' }, { route: '/other' }, { route: '/mcp', limit: 4 }, { route: '/none' }, { state: 'closed' }, { state: 'expired' }, { verdict: 'resumed' }, { principal: principalTag(alice) }, { principal: principalTag(bob), limit: 2 }, { principal: principalTag(alice).slice(0, 2), state: 'active' }, { principal: alice }, { principal: principalTag(bob), route: '/other' }, { principal: principalTag(alice), verdict: 'resumed' }, { principal: principalTag(bob), state: 'closed' }];
    for (const filter of filters) {
      const full = await listFromEveryEvent(access, filter, known);
      expect({ filter, rows: await listSessions(access, filter) }).toEqual({ filter, rows: full });
      if (filter.verdict !== undefined || filter.state === 'closed' || filter.state === 'expired') continue;
      // The listed sessions' events read one session at a time, and in one pass.
      expect({ filter, rows: await listFromLastEvents(access, filter, known, 0) }).toEqual({ filter, rows: full });
      expect({ filter, rows: await listFromLastEvents(access, filter, known, Infinity) }).toEqual({ filter, rows: full });
    }
    const all = await listSessions(access, {});
    const tag = (name: string): string => sessionTag(ids[name]!);
    expect(all).toHaveLength(11);
    // Listed from every partition: 11 random ids on 4 partitions land in one with probability 4^-10.
    if (partitions > 1) expect(new Set(Object.values(ids).map((id) => partitionOf(id, partitions))).size).toBeGreaterThan(1);
    // The forgotten sessions are there, in their place by their last audit event.
    expect(all[0]).toMatchObject({ tag: tag('gone'), state: 'expired', verdicts: { epoch_mismatch: 1 } });
    expect(all.find((r) => r.tag === tag('gone-closed'))).toMatchObject({ state: 'closed', route: undefined });
    expect(all.find((r) => r.tag === tag('garbled'))).toMatchObject({ verdicts: { resumed: 1 } });
    expect(all.slice(1, 3).map((r) => r.tag)).toEqual([tag('garbled'), tag('a')]);
    // Two sessions last active in the same millisecond: next to each other, in scan order (on a
    // partitioned log the partition's order, which the random ids decide), the same on both paths above.
    expect(all.slice(3, 5).map((r) => r.tag).sort()).toEqual([tag('tie1'), tag('tie2')].sort());
    expect((await listSessions(access, { limit: 2 })).map((r) => r.tag)).toEqual([tag('gone'), tag('garbled')]);
    // Each row names its principal by its tag, never by the digest; forgotten sessions have none.
    for (const row of all) {
      const name = Object.keys(ids).find((n) => tag(n) === row.tag)!;
      expect({ name, principal: row.principal }).toEqual({ name, principal: ['gone', 'gone-closed'].includes(name) ? '' : principalTag(principalOf(name)) });
    }
    expect(principalTag(alice)).toHaveLength(12);
    for (const digest of [alice, bob]) expect(JSON.stringify(all)).not.toContain(digest);
    const alices = (await listSessions(access, { principal: principalTag(alice) })).map((r) => r.tag);
    expect(alices.sort()).toEqual(['a', 'c', 'e', 'quiet'].map(tag).sort());
    // A whole digest finds the same sessions as its tag: only a tag's length is compared.
    expect((await listSessions(access, { principal: alice })).map((r) => r.tag).sort()).toEqual(alices);
    expect((await listSessions(access, { principal: `${principalTag(alice)}x` })).map((r) => r.tag).sort()).toEqual(alices);
  });
});
