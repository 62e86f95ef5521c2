/**
 * The Redis peers of `npm run bench:log` and `npm run bench:sdk`, through
 * the same adapters and cursor-loss probe the benches use, on private
 * redis-servers (random loopback ports, temp dirs, killed by PID): so that a
 * change to an adapter, to node-redis or to redis-server cannot silently
 * change what the benches report. Needs `redis-server` (Debian package
 * `redis-server`); without it this file is skipped, saying so.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { notification } from '../sdk/stores.js';
import type { BenchEventStore } from '../sdk/stores.js';
import { probeCursorLoss } from './cursor-loss.js';
import type { CursorLossRow } from './cursor-loss.js';
import { newRedisStore, RedisBacking, RedisLayout } from './redis-peers.js';
import { findRedisServer, RedisPersistence, startRedisServer } from './redis-server.js';
import { RedisStreamsEventStore } from './redis-streams-store.js';
import { redisSubject } from './subjects.js';

const bin = findRedisServer();
if (bin === undefined) {
  console.warn('SKIPPED test/bench/peers/redis-stores.int.test.ts: redis-server not found (REDIS_SERVER_BIN, /usr/bin/redis-server, PATH); apt-get install redis-server');
}

describe.skipIf(bin === undefined)('Redis peer stores (needs redis-server)', () => {
  let none: RedisBacking;
  let aof: RedisBacking;

  beforeAll(async () => {
    none = await RedisBacking.open(await startRedisServer(RedisPersistence.none, bin));
    aof = await RedisBacking.open(await startRedisServer(RedisPersistence.aofAlways, bin));
  });
  afterAll(async () => {
    await none?.close();
    await aof?.close();
  });

  const store = async (s: BenchEventStore, stream: string, n: number): Promise<string[]> => {
    const ids: string[] = [];
    for (let k = 0; k < n; k += 1) ids.push(await s.storeEvent(stream, notification(stream, k)));
    return ids;
  };
  const replay = async (s: BenchEventStore, cursor: string): Promise<{ returned: string; ids: string[]; progress: unknown[] }> => {
    const ids: string[] = [];
    const progress: unknown[] = [];
    const returned = await s.replayEventsAfter(cursor, {
      send: async (id, message) => {
        ids.push(id);
        progress.push((message as { params?: { progress?: unknown } }).params?.progress);
      },
    });
    return { returned, ids, progress };
  };

  it('starts private servers in the persistence asked for, on loopback ports of their own', async () => {
    expect(none.server.port).not.toBe(aof.server.port);
    expect(none.server.port).not.toBe(6379);
    expect(await none.client.configGet('appendonly')).toMatchObject({ appendonly: 'no' });
    expect(await aof.client.configGet('appendfsync')).toMatchObject({ appendfsync: 'always' });
    expect(await aof.client.configGet('appendonly')).toMatchObject({ appendonly: 'yes' });
  });

  for (const layout of [RedisLayout.streams, RedisLayout.contextforge]) {
    it(`${layout}: appends, then replays exactly what follows a cursor, in order, naming the stream`, async () => {
      const s = newRedisStore(layout, none.client);
      const stream = randomUUID();
      const ids = await store(s, stream, 30);
      await store(s, randomUUID(), 5); // another stream of the session: never replayed with this one
      expect(new Set(ids).size).toBe(30);
      const got = await replay(s, ids[19] as string);
      expect(got.ids).toEqual(ids.slice(20));
      expect(got.progress).toEqual([20, 21, 22, 23, 24, 25, 26, 27, 28, 29]);
      expect(got.returned).toBe(stream);
      expect((await replay(s, ids[29] as string)).ids).toEqual([]);
    });

    it(`${layout}: a ring of 10 keeps the newest 10 events of a stream`, async () => {
      const s = newRedisStore(layout, none.client, 10);
      const stream = randomUUID();
      const ids = await store(s, stream, 25);
      const key = layout === RedisLayout.streams ? `${s.prefix}:stream:${stream}` : `${s.prefix}:${stream}:events`;
      expect(layout === RedisLayout.streams ? await none.client.xLen(key) : await none.client.zCard(key)).toBe(10);
      // The newest kept event's predecessor is still a valid cursor.
      expect((await replay(s, ids[15] as string)).ids).toEqual(ids.slice(16));
    });
  }

  it('redis-streams: the stream id is read from the event id, with no lookup', async () => {
    const s = new RedisStreamsEventStore({ client: none.client, keyPrefix: `bench:${randomUUID()}`, maxLen: 10, ttlSeconds: 60 });
    const [id] = await store(s, '_GET_stream', 1);
    expect(id).toMatch(/^_GET_stream_\d+-\d+$/);
    expect(await s.getStreamIdForEventId(id as string)).toBe('_GET_stream');
    expect(await s.getStreamIdForEventId('nounderscore')).toBeUndefined();
  });

  // What the benches print as each peer's cursor-loss verdict. A change here
  // is a change of what the tables say: look at it, don't just update it.
  const verdicts = (rows: readonly CursorLossRow[]) => Object.fromEntries(rows.map((r) => [r.case, { kind: r.outcome.kind, sent: r.outcome.sent, missing: r.outcome.missing, foreign: r.outcome.foreign }]));

  it('redis-streams: a trimmed cursor silently skips the dropped events; a restart without persistence and an unknown cursor silently send nothing', async () => {
    expect(verdicts(await probeCursorLoss(redisSubject(RedisLayout.streams, none)))).toEqual({
      trimmed: { kind: 'silent', sent: 10, missing: 12, foreign: 0 },
      restart: { kind: 'silent', sent: 0, missing: 10, foreign: 0 },
      unknown: { kind: 'silent', sent: 0, missing: 0, foreign: 0 },
    });
  });

  it('redis-streams on AOF fsync always: the cursor survives a SIGKILL of redis-server', async () => {
    expect(verdicts(await probeCursorLoss(redisSubject(RedisLayout.streams, aof)))).toEqual({
      trimmed: { kind: 'silent', sent: 10, missing: 12, foreign: 0 },
      restart: { kind: 'held', sent: 10, missing: 0, foreign: 0 },
      unknown: { kind: 'silent', sent: 0, missing: 0, foreign: 0 },
    });
  });

  it('contextforge: trimmed, restarted and unknown cursors all silently send nothing (success, returned "")', async () => {
    const rows = await probeCursorLoss(redisSubject(RedisLayout.contextforge, none));
    expect(verdicts(rows)).toEqual({
      trimmed: { kind: 'silent', sent: 0, missing: 22, foreign: 0 },
      restart: { kind: 'silent', sent: 0, missing: 10, foreign: 0 },
      unknown: { kind: 'silent', sent: 0, missing: 0, foreign: 0 },
    });
    for (const r of rows) expect(r.outcome.detail).toContain('returned ""');
  });

  it('contextforge on AOF fsync always: the cursor survives a SIGKILL of redis-server', async () => {
    expect(verdicts(await probeCursorLoss(redisSubject(RedisLayout.contextforge, aof))).restart).toEqual({ kind: 'held', sent: 10, missing: 0, foreign: 0 });
  });
});
