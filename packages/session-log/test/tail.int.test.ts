import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFollowStats } from '@tether/session-log';
import type { LogEvent, SessionLog } from '@tether/session-log';
import { ALICE, bytes, sleep, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open({ liveBufferMax: 128, readBatch: 32 });
});
afterAll(async () => {
  await fx.teardown();
});

/** Deterministic PRNG so a failure can be replayed (seed printed on failure). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('replay then live, without a seam', () => {
  it('readers resuming at random cursors during appends each see exactly the contiguous suffix', async () => {
    const seed = Number(process.env.TETHER_SEED ?? Date.now() % 1_000_000);
    const random = rng(seed);
    const session = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const total = 3_000;
    const ids: string[] = [];
    const readers: Promise<{ cursorIndex: number; got: string[] }>[] = [];
    const producer = (async () => {
      for (let i = 1; i <= total; i += 1) {
        const kind = i === total ? 'end' : 'event';
        ids.push((await log.append(session.sessionId, stream, kind, bytes(`{"i":${i}}`))).id);
        if (i % 300 === 150) {
          // Start a reader at a random cursor already written, at a random moment.
          const cursorIndex = Math.floor(random() * ids.length);
          readers.push(
            (async () => {
              const result = await log.resume(session.sessionId, ids[cursorIndex]!, ALICE);
              if (result.verdict !== 'resumed') throw new Error(`seed ${seed}: verdict ${result.verdict}`);
              const got: string[] = [];
              for await (const event of result.events()) {
                got.push(event.id);
                // Some readers are slow for a while, so they cross the seam late.
                if (random() < 0.01) await sleep(5);
              }
              return { cursorIndex, got };
            })(),
          );
        }
      }
    })();
    await producer;
    const results = await Promise.all(readers);
    expect(results).toHaveLength(10);
    for (const { cursorIndex, got } of results) {
      expect(got, `seed ${seed}, cursor index ${cursorIndex}`).toEqual(ids.slice(cursorIndex + 1));
    }
  });

  it('a reader at 1/20 of the producer rate loses nothing and holds a bounded buffer (10,000 events)', async () => {
    const session = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const total = 10_000;
    const ids: string[] = [];
    let producing = true;
    const started = Date.now();
    const producer = (async () => {
      // Two in flight keeps the writer's queue busy; order is still call order.
      for (let i = 1; i <= total; i += 2) {
        const batch = [log.append(session.sessionId, stream, 'event', bytes(String(i)))];
        const kind = i + 1 === total ? 'end' : 'event';
        batch.push(log.append(session.sessionId, stream, kind, bytes(String(i + 1))));
        for (const r of await Promise.all(batch)) ids.push(r.id);
      }
      producing = false;
    })();
    // Wait for the first event so the reader has a cursor, then read slowly.
    while (ids.length === 0) await sleep(5);
    const stats = createFollowStats();
    const first = ids[0]!;
    const result = await log.resume(session.sessionId, first, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const got: LogEvent[] = [];
    for await (const event of result.events({ stats })) {
      got.push(event);
      if (producing) {
        // Producer rate so far, divided by 20, as the reader's pace.
        const producerRate = ids.length / Math.max(1, Date.now() - started);
        await sleep(Math.max(1, 20 / producerRate));
      }
    }
    await producer;
    expect(got.map((e) => e.id)).toEqual(ids.slice(1));
    expect(stats.liveHighWater).toBeLessThanOrEqual(128);
    // It fell behind while the producer ran, and caught up from the log.
    expect(stats.liveOverflows).toBeGreaterThan(0);
    expect(stats.fromLog).toBeGreaterThan(stats.fromLive);
    process.stdout.write(`slow reader: ${JSON.stringify(stats)}\n`);
  });

  it('aborting a reader that waits for live events ends it promptly', async () => {
    const session = await log.createSession(ALICE);
    const first = await log.append(session.sessionId, '0', 'event', bytes('x'));
    const result = await log.resume(session.sessionId, first.id, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const controller = new AbortController();
    const iterator = result.events({ signal: controller.signal });
    const next = iterator.next();
    await sleep(50);
    controller.abort();
    expect(await next).toEqual({ done: true, value: undefined });
  });

  it('closing the session ends its live readers with session_closed', async () => {
    const session = await log.createSession(ALICE);
    const first = await log.append(session.sessionId, '0', 'event', bytes('x'));
    const result = await log.resume(session.sessionId, first.id, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const next = result.events().next();
    await sleep(50);
    await log.closeSession(session.sessionId);
    await expect(next).rejects.toMatchObject({ code: 'session_closed' });
  });

  it('a reader that falls behind retention ends with stream_truncated, never a silent skip', async () => {
    const small = await fx.open({ maxMsgsPerStream: 20, readBatch: 4, liveBufferMax: 8 });
    const session = await small.createSession(ALICE);
    const first = await small.append(session.sessionId, '0', 'event', bytes('0'));
    const result = await small.resume(session.sessionId, first.id, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const iterator = result.events();
    const seen: number[] = [];
    let failure: unknown;
    const reader = (async () => {
      try {
        for (;;) {
          const step = await iterator.next();
          if (step.done === true) return;
          seen.push(step.value.seq);
          await sleep(20);
        }
      } catch (err) {
        failure = err;
      }
    })();
    for (let i = 1; i <= 200; i += 1) await small.append(session.sessionId, '0', 'event', bytes(String(i)));
    await small.append(session.sessionId, '0', 'end', new Uint8Array());
    await reader;
    expect(failure).toMatchObject({ code: 'stream_truncated' });
    // Everything it did deliver was contiguous.
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 2));
  });
});

describe('a reader opened ahead of the events (openReader)', () => {
  it('sees a new stream from its first event live, without asking the log', async () => {
    const session = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const reader = log.openReader(session, stream);
    const written: string[] = [];
    for (let i = 1; i <= 20; i += 1) written.push((await log.append(session.sessionId, stream, i === 20 ? 'end' : 'event', bytes(`{"i":${i}}`))).id);
    const stats = createFollowStats();
    const got: string[] = [];
    for await (const event of reader.follow({ seq: 0, pos: 0 }, { stats })) got.push(event.id);
    expect(got).toEqual(written);
    expect(stats).toMatchObject({ fromLive: 20, fromLog: 0, logPasses: 0 });
  });

  it('continues from a head read after it opened (a fresh GET)', async () => {
    const session = await log.createSession(ALICE);
    const stream = log.newStreamId();
    for (let i = 1; i <= 5; i += 1) await log.append(session.sessionId, stream, 'event', bytes(`{"old":${i}}`));
    const reader = log.openReader(session, stream);
    const head = await log.head(session.sessionId, stream);
    const later: string[] = [];
    const reading = (async () => {
      const got: string[] = [];
      for await (const event of reader.follow({ seq: head!.seq, pos: head!.pos })) got.push(event.id);
      return got;
    })();
    for (let i = 1; i <= 5; i += 1) later.push((await log.append(session.sessionId, stream, i === 5 ? 'end' : 'event', bytes(`{"new":${i}}`))).id);
    expect(await reading).toEqual(later);
  });

  it('asks the log when its cursor was already behind (misused, or interest reached the server late): nothing is skipped', async () => {
    const session = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const reader = log.openReader(session, stream);
    // Stored while nobody followed yet, and nothing comes live afterwards:
    // only the reader's grace check can find these.
    reader.close();
    const written: string[] = [];
    for (let i = 1; i <= 3; i += 1) written.push((await log.append(session.sessionId, stream, i === 3 ? 'end' : 'event', bytes(`{"i":${i}}`))).id);
    const late = log.openReader(session, stream);
    const stats = createFollowStats();
    const got: string[] = [];
    for await (const event of late.follow({ seq: 0, pos: 0 }, { stats })) got.push(event.id);
    expect(got).toEqual(written);
    expect(stats).toMatchObject({ fromLog: 3, logPasses: 1 });
  });

  it('ends at once when aborted before anything arrives, and a reader never followed can be closed', async () => {
    const session = await log.createSession(ALICE);
    const abort = new AbortController();
    const reader = log.openReader(session, log.newStreamId());
    const pending = reader.follow({ seq: 0, pos: 0 }, { signal: abort.signal }).next();
    abort.abort();
    await expect(pending).resolves.toMatchObject({ done: true });
    log.openReader(session, log.newStreamId()).close();
  });
});

describe('control subscriptions (one per connection, shared by every session)', () => {
  /** Subscriptions nats-server holds on `subject`, on the log's own connection. */
  async function subscriptionsOn(subject: string): Promise<number> {
    await log.connection.flush();
    const res = await fetch(`http://127.0.0.1:${fx.server.monitorPort}/connz?subs=detail`);
    const connz = (await res.json()) as { connections: { cid: number; subscriptions_list_detail?: { subject: string }[] }[] };
    const mine = connz.connections.filter((c) => c.cid === log.connection.info?.client_id);
    return mine.flatMap((c) => c.subscriptions_list_detail ?? []).filter((sub) => sub.subject === subject).length;
  }
  const prefix = (): string => log.config.subjectPrefix;

  it('readers and watchers of two sessions share one wildcard subscription; `closed` reaches the readers of its session only', async () => {
    const [a, b] = [await log.createSession(ALICE), await log.createSession(ALICE)];
    const follow = (reader: ReturnType<typeof log.openReader>, abort?: AbortController) =>
      (async () => {
        try {
          for await (const _ of reader.follow({ seq: 0, pos: 0 }, abort === undefined ? {} : { signal: abort.signal })) void _;
          return abort?.signal.aborted === true ? 'aborted' : 'ended';
        } catch (err) {
          return (err as { code?: string }).code;
        }
      })();
    const ofA = [follow(log.openReader(a, '0')), follow(log.openReader(a, log.newStreamId()))];
    const abortB = new AbortController();
    const ofB = follow(log.openReader(b, '0'), abortB);
    const heardA: unknown[] = [];
    const heardB: unknown[] = [];
    const unlistenA = log.listenControl(a.sessionId, (m) => heardA.push(m));
    const unlistenB = log.listenControl(b.sessionId, (m) => heardB.push(m));
    expect(await subscriptionsOn(`${prefix()}.ctl.*`)).toBe(1);
    expect(await subscriptionsOn(`${prefix()}.ctl.${a.sessionId}`)).toBe(0);

    log.publishControl({ type: 'closed', sessionId: a.sessionId, from: 'test' });
    expect(await Promise.all(ofA)).toEqual(['session_closed', 'session_closed']);
    expect(heardA).toEqual([{ type: 'closed', sessionId: a.sessionId, from: 'test' }]);
    expect(heardB).toEqual([]);
    // B's reader is still following: only A was closed.
    abortB.abort();
    expect(await ofB).toBe('aborted');
    unlistenA();
    unlistenB();
    expect(await subscriptionsOn(`${prefix()}.ctl.*`)).toBe(1);
  });

  it('the session is the one the subject names: a payload naming another session reaches the subject session\'s listeners only', async () => {
    const [a, b] = [await log.createSession(ALICE), await log.createSession(ALICE)];
    const heardA: unknown[] = [];
    const heardB: unknown[] = [];
    const unlistenA = log.listenControl(a.sessionId, (m) => heardA.push(m));
    const unlistenB = log.listenControl(b.sessionId, (m) => heardB.push(m));
    // Published raw on A's subject, claiming to be B's.
    log.connection.publish(`${prefix()}.ctl.${a.sessionId}`, JSON.stringify({ type: 'closed', sessionId: b.sessionId, from: 'liar' }));
    log.connection.publish(`${prefix()}.ctl.${a.sessionId}`, 'not json');
    await log.connection.flush();
    await expect.poll(() => heardA.length).toBe(1);
    expect(heardA).toEqual([{ type: 'closed', sessionId: a.sessionId, from: 'liar' }]);
    expect(heardB).toEqual([]);
    unlistenA();
    unlistenB();
  });
});
