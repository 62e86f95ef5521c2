import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { isSessionLogError, logLayout, partitionOf, resolveConfig, SessionLog } from '@tether/session-log';
import { ALICE, bytes, drainResume, isolatedNames, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
beforeAll(async () => {
  fx = await startLogFixture();
});
afterAll(async () => {
  await fx.teardown();
});

describe('partitionOf', () => {
  it('is FNV-1a 32 modulo the count, as nats-server computes partition(n, …)', () => {
    // Reference values of FNV-1a 32 (the test vectors of the FNV authors), so a
    // change of hash, which would move every session of every deployment, fails here.
    expect(partitionOf('a', 2 ** 31)).toBe(0xe40c292c % 2 ** 31);
    expect(partitionOf('foobar', 1_000_003)).toBe(0xbf9cf968 % 1_000_003);
    expect(partitionOf('anything', 1)).toBe(0);
  });

  it('spreads random session ids over the partitions', () => {
    const counts = new Array<number>(16).fill(0);
    const log = { newId: () => crypto.randomUUID().replaceAll('-', '') };
    for (let i = 0; i < 16_000; i += 1) counts[partitionOf(log.newId(), 16)]! += 1;
    for (const n of counts) expect(n).toBeGreaterThan(800);
  });
});

describe('layout names', () => {
  it('one partition keeps every name; more put the index before the namespace', () => {
    expect(logLayout(resolveConfig({})).partitions.map((p) => p.streamName)).toEqual(['TETHER_LOG']);
    const four = logLayout(resolveConfig({ partitions: 4, namespace: 'staging' })).partitions;
    expect(four.map((p) => p.streamName)).toEqual(['TETHER_LOG-0_staging', 'TETHER_LOG-1_staging', 'TETHER_LOG-2_staging', 'TETHER_LOG-3_staging']);
    expect(four[3]).toMatchObject({ sessionsBucket: 'tether_sessions-3_staging', leasesBucket: 'tether_leases-3_staging' });
    // A namespace that itself ends in -3 never meets partition 3 of another.
    expect(logLayout(resolveConfig({ namespace: 'staging-3' })).partitions[0]?.streamName).toBe('TETHER_LOG_staging-3');
    expect(logLayout(resolveConfig({ partitions: 2, streamName: 'MY_LOG' })).partitions.map((p) => p.streamName)).toEqual(['MY_LOG-0', 'MY_LOG-1']);
  });

  it('refuses a count out of range and bad placement tags, naming them', () => {
    for (const partitions of [0, -1, 1.5, 257]) expect(() => resolveConfig({ partitions })).toThrow(/partitions=/);
    expect(() => resolveConfig({ placementTags: ['has space'] })).toThrow(/placementTags/);
  });
});

describe('a log on 4 partitions', () => {
  it('keeps each session wholly in its partition: events, audit events, registry entry, leases', async () => {
    const names = isolatedNames();
    const log = await fx.open({ ...names, partitions: 4 });
    const nc = await fx.raw();
    const jsm = await jetstreamManager(nc);
    const streams = log.layout.partitions.map((p) => p.streamName);
    expect(streams).toEqual([0, 1, 2, 3].map((k) => `${names.streamName}-${k}`));
    const seen = new Set<number>();
    for (let i = 0; i < 12; i += 1) {
      const session = await log.createSession(ALICE);
      const partition = log.partitionOf(session.sessionId);
      seen.add(partition.index);
      const stream = log.newStreamId();
      const first = await log.append(session.sessionId, stream, 'event', bytes(`one ${i}`));
      await log.append(session.sessionId, stream, 'event', bytes(`two ${i}`));
      await log.append(session.sessionId, stream, 'end', new Uint8Array());
      log.recordAudit(session.sessionId, { kind: 'resume', instance: 'test', at: Date.now() } as never);
      const lease = await log.leases.acquire(session.sessionId, stream, 'owner', 10_000);
      // The events are in this partition's stream and no other.
      for (const other of streams) {
        const held = (await jsm.streams.info(other, { subjects_filter: `${names.subjectPrefix}.log.>` })).state.subjects ?? {};
        const mine = Object.keys(held).filter((subject) => subject.includes(session.sessionId));
        expect(mine.length, `${other} for partition ${partition.index}`).toBe(other === partition.streamName ? 1 : 0);
      }
      const kvEntry = await jsm.streams.getMessage(`KV_${partition.sessionsBucket}`, { last_by_subj: `$KV.${partition.sessionsBucket}.${session.sessionId}` });
      expect(kvEntry).not.toBeNull();
      const leaseEntry = await jsm.streams.getMessage(`KV_${partition.leasesBucket}`, { last_by_subj: `$KV.${partition.leasesBucket}.${session.sessionId}.${stream}` });
      expect(leaseEntry).not.toBeNull();
      await log.leases.release(lease);
      const events = await drainResume(await log.resume(session.sessionId, first.id, ALICE));
      expect(events.map((e) => text(e.payload))).toEqual([`two ${i}`, '']);
    }
    // 12 sessions over 4 partitions: more than one is used (odds of one: 4 × 4^-12).
    expect(seen.size).toBeGreaterThan(1);
    // Audit events land in their session's partition too (fire and forget: counted once all are stored).
    const audited = async (): Promise<Map<string, number>> => {
      const where = new Map<string, number>();
      for (const name of streams) {
        const subjects = (await jsm.streams.info(name, { subjects_filter: `${names.subjectPrefix}.audit.>` })).state.subjects ?? {};
        for (const [subject, n] of Object.entries(subjects)) where.set(`${name} ${subject}`, n);
      }
      return where;
    };
    let where = await audited();
    for (let i = 0; i < 50 && where.size < 12; i += 1) where = await new Promise((r) => setTimeout(r, 20)).then(audited);
    expect(where.size).toBe(12);
    for (const key of where.keys()) {
      const [stream, subject] = key.split(' ') as [string, string];
      const sessionId = subject.split('.').at(-1)!;
      expect(stream).toBe(log.partitionOf(sessionId).streamName);
    }
  });

  it('serves a session from another process with the same count, and closes it in its partition', async () => {
    const names = isolatedNames();
    const a = await fx.open({ ...names, partitions: 4 });
    const b = await fx.open({ ...names, partitions: 4 });
    const session = await a.createSession(ALICE);
    const stream = a.newStreamId();
    const first = await a.append(session.sessionId, stream, 'event', bytes('x'));
    await a.append(session.sessionId, stream, 'event', bytes('y'));
    const reader = await b.resume(session.sessionId, first.id, ALICE);
    if (reader.verdict !== 'resumed') throw new Error(reader.reason);
    const it = reader.events();
    expect(text((await it.next()).value!.payload)).toBe('y');
    await it.return(undefined);
    expect(await b.closeSession(session.sessionId)).toBe(true);
    expect((await a.resume(session.sessionId, first.id, ALICE)).verdict).toBe('unknown_session');
  });

  it('refuses another partition count for an existing log, naming both and the way to change it', async () => {
    const names = isolatedNames();
    await fx.open({ ...names, partitions: 4 });
    for (const partitions of [1, 8]) {
      const err = await SessionLog.create({ servers: fx.server.url, ...names, partitions }).then(
        (log) => (void log.close(), undefined),
        (caught: unknown) => caught,
      );
      expect(isSessionLogError(err, 'incompatible_log'), `partitions ${partitions}`).toBe(true);
      expect((err as Error).message).toContain('has 4 partition(s)');
      expect((err as Error).message).toContain(`--log-partitions ${partitions}`);
      expect((err as Error).message).toContain('--namespace');
    }
    const single = isolatedNames();
    await fx.open(single);
    const err = await SessionLog.create({ servers: fx.server.url, ...single, partitions: 4 }).catch((caught: unknown) => caught);
    expect(isSessionLogError(err, 'incompatible_log')).toBe(true);
    expect((err as Error).message).toContain('has 1 partition(s)');
    // The refused processes created nothing.
    const jsm = await jetstreamManager(await fx.raw());
    await expect(jsm.streams.info(`${single.streamName}-0`)).rejects.toThrow(/not found/);
  });
});
