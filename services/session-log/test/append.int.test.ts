import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InterceptingCall, status } from '@grpc/grpc-js';
import type { Interceptor } from '@grpc/grpc-js';
import { EndReason, EventKind } from '@tether/cursor-proto';
import { appendRequest, bytes, failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

let fx: ServiceFixture;
let alice: ReturnType<typeof rpc>;
let second: string;
beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start(['--max-payload-bytes', '65536', '--max-batch-entries', '600']);
  // A second instance on the same log, for retries that land elsewhere.
  second = (await fx.start(['--max-payload-bytes', '65536'])).target;
  alice = rpc(fx.client());
});
afterAll(async () => {
  await fx.teardown();
});

/**
 * Lets the first Append through to the server, then turns its status into
 * UNAVAILABLE: grpc-js then discards the reply, so the write happened and
 * the client never heard of it (what a connection lost mid-reply looks like).
 */
function loseFirstAppendReply(): Interceptor {
  let lost = false;
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        const dropping = !lost && options.method_definition.path.endsWith('/Append');
        if (dropping) lost = true;
        next(metadata, {
          onReceiveStatus: (s, nextStatus) => nextStatus(dropping ? { ...s, code: status.UNAVAILABLE, details: 'reply lost (simulated)' } : s),
        });
      },
    });
}

describe('Append', () => {
  it('numbers a stream 1, 2, 3… and returns ids the log serves back (Head, Read)', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    const results = [];
    for (let i = 1; i <= 5; i += 1) results.push(await alice.append({ sessionId: id, stream: 'abcdefgh', payload: bytes(`{"i":${i}}`), upstreamId: `up-${i}` }));
    expect(results.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(results.every((r) => r.id === `${session!.epoch}-abcdefgh-${r.seq}-${r.pos}` && !r.duplicate)).toBe(true);
    const head = await alice.head(id, 'abcdefgh');
    expect(head.event).toMatchObject({ id: results[4]!.id, seq: 5, prev: results[3]!.pos, kind: EventKind.EVENT, upstreamId: 'up-5' });
    expect(head.event!.payload.toString()).toBe('{"i":5}');
    expect((await alice.head(id, '0')).event).toBeUndefined();
    const page = await alice.read(id, 'abcdefgh', 2, 2);
    expect(page.events.map((e) => e.seq)).toEqual([3, 4]);
    const hinted = await alice.read(id, 'abcdefgh', 4, 10, results[3]!.pos);
    expect(hinted.events.map((e) => e.payload.toString())).toEqual(['{"i":5}']);
  });

  it('an idempotent Append retried after a lost reply returns the same event, on the same or another instance', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    await alice.append({ sessionId: id, stream: '0', payload: bytes('one'), expectedSeq: 1 });
    const lossy = rpc(fx.client({ channelOptions: { interceptors: [loseFirstAppendReply()] } }));
    const lost = await failure(lossy.append({ sessionId: id, stream: '0', payload: bytes('two'), expectedSeq: 2 }));
    expect(lost.code).toBe(status.UNAVAILABLE);
    // The write happened although the client never heard: the retry says so.
    const retried = await lossy.append({ sessionId: id, stream: '0', payload: bytes('two'), expectedSeq: 2 });
    expect(retried).toMatchObject({ seq: 2, duplicate: true });
    const elsewhere = await rpc(fx.client({ target: second })).append({ sessionId: id, stream: '0', payload: bytes('two'), expectedSeq: 2 });
    expect(elsewhere).toEqual(retried);
    const page = await alice.read(id, '0', 0, 10);
    expect(page.events.map((e) => e.payload.toString())).toEqual(['one', 'two']);
    expect(page.events[1]!.id).toBe(retried.id);
  });

  it('expected_seq refuses a gap and other content at a taken seq, writing nothing', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    await alice.append({ sessionId: id, stream: '0', payload: bytes('a'), expectedSeq: 1 });
    const gap = await failure(alice.append({ sessionId: id, stream: '0', payload: bytes('c'), expectedSeq: 3 }));
    expect([gap.code, gap.detail?.code, gap.detail?.seq, gap.detail?.expectedSeq]).toEqual([status.ABORTED, 'writer_conflict', 1, 3]);
    const taken = await failure(alice.append({ sessionId: id, stream: '0', payload: bytes('not-a'), expectedSeq: 1 }));
    expect([taken.code, taken.detail?.code]).toEqual([status.ABORTED, 'writer_conflict']);
    // Two writers on two instances racing for seq 2: exactly one wins.
    const other = rpc(fx.client({ target: second }));
    const race = await Promise.allSettled([
      alice.append({ sessionId: id, stream: '0', payload: bytes('mine'), expectedSeq: 2 }),
      other.append({ sessionId: id, stream: '0', payload: bytes('theirs'), expectedSeq: 2 }),
    ]);
    expect(race.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    const page = await alice.read(id, '0', 0, 10);
    expect(page.events).toHaveLength(2);
  });

  it('refuses oversized payloads, bad kinds and ids, and appends after the end marker', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    const big = await failure(alice.append({ sessionId: id, stream: '0', payload: Buffer.alloc(65537) }));
    expect([big.code, big.detail?.code, big.detail?.facts]).toEqual([status.RESOURCE_EXHAUSTED, 'payload_too_large', { bytes: '65537', maxBytes: '65536' }]);
    expect((await failure(alice.append({ sessionId: id, stream: '0', kind: EventKind.UNSPECIFIED }))).code).toBe(status.INVALID_ARGUMENT);
    for (const stream of ['', 'ABCDEFGH', 'a.b', '>']) {
      expect((await failure(alice.append({ sessionId: id, stream }))).detail?.code).toBe('invalid_argument');
    }
    await alice.append({ sessionId: id, stream: 'zzzzzzzz', kind: EventKind.END, endReason: EndReason.DEADLINE });
    const after = await failure(alice.append({ sessionId: id, stream: 'zzzzzzzz', payload: bytes('late') }));
    expect([after.code, after.detail?.code]).toEqual([status.FAILED_PRECONDITION, 'stream_ended']);
    expect((await alice.head(id, 'zzzzzzzz')).event).toMatchObject({ kind: EventKind.END, endReason: EndReason.DEADLINE });
    expect((await alice.head(id, '0')).event).toBeUndefined();
  });

  it('AppendBatch: streams in request order, concurrently across streams; a failure skips the rest of its stream', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    const entries = [];
    for (let i = 0; i < 300; i += 1) entries.push(appendRequest({ sessionId: id, stream: i % 2 === 0 ? 'aaaaaaaa' : 'bbbbbbbb', payload: bytes(String(i)) }));
    const { results } = await alice.batch(entries);
    expect(results.every((r) => r.appended !== undefined)).toBe(true);
    expect(results.filter((_, i) => i % 2 === 0).map((r) => r.appended!.seq)).toEqual(Array.from({ length: 150 }, (_, i) => i + 1));
    const page = await alice.read(id, 'bbbbbbbb', 0, 1000);
    expect(page.events.map((e) => e.payload.toString())).toEqual(Array.from({ length: 150 }, (_, i) => String(2 * i + 1)));

    const mixed = await alice.batch([
      appendRequest({ sessionId: id, stream: 'cccccccc', payload: bytes('ok') }),
      appendRequest({ sessionId: id, stream: 'cccccccc', payload: Buffer.alloc(70_000) }),
      appendRequest({ sessionId: id, stream: 'cccccccc', payload: bytes('never') }),
      appendRequest({ sessionId: id, stream: 'dddddddd', payload: bytes('independent') }),
    ]);
    expect(mixed.results.map((r) => r.appended?.seq ?? r.error?.code)).toEqual([1, status.RESOURCE_EXHAUSTED, status.ABORTED, 1]);
    const tooMany = await failure(alice.batch(Array.from({ length: 601 }, () => appendRequest({ sessionId: id, stream: '0' }))));
    expect(tooMany.code).toBe(status.INVALID_ARGUMENT);
  });

  it('only the session owner appends: a token for another caller gets NOT_FOUND for every entry', async () => {
    const { session } = await alice.open();
    const bob = rpc(fx.client({ token: TOKENS.bob }));
    const { results } = await bob.batch([appendRequest({ sessionId: session!.sessionId, stream: '0', payload: bytes('x') })]);
    expect(results[0]!.error?.code).toBe(status.NOT_FOUND);
  });
});
