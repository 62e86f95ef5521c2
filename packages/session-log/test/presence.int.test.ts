/**
 * Writer liveness per process (presence) and claims of orphaned streams:
 * what the gateway's takeover rests on, against a real nats-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { isSessionLogError, newWriterId, SessionLog } from '@tether/session-log';
import { ALICE, bytes, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open();
});
afterAll(async () => {
  await fx.teardown();
});

describe('presence', () => {
  it('answers per stream while held; "no responders" (gone) at once after close, and for a writer nobody holds', async () => {
    const s = await log.createSession(ALICE);
    const writer = newWriterId();
    const presence = log.holdPresence(writer, (sessionId, stream) => sessionId === s.sessionId && stream === '0');
    await log.connection.flush();
    expect(await log.probeWriter(writer, 500)).toBe('writing');
    expect(await log.probeWriter(writer, 500, s.sessionId, '0')).toBe('writing');
    expect(await log.probeWriter(writer, 500, s.sessionId, 'abcdefgh')).toBe('not_writing');
    await presence.close();
    const started = performance.now();
    expect(await log.probeWriter(writer, 5_000, s.sessionId, '0')).toBe('gone');
    // "No responders" comes from the server, not from waiting out the timeout.
    expect(performance.now() - started).toBeLessThan(4_000);
    expect(await log.probeWriter(newWriterId(), 5_000)).toBe('gone');
  });

  it('is gone as soon as the holding connection closes, without close(): the server drops the interest', async () => {
    const other = await SessionLog.create({ servers: fx.server.url, ...sameLayout(log) });
    const writer = newWriterId();
    other.holdPresence(writer, () => true);
    await other.connection.flush();
    expect(await log.probeWriter(writer, 500)).toBe('writing');
    await other.close();
    expect(await log.probeWriter(writer, 5_000)).toBe('gone');
  });

  it('is silent, not gone, when the holder does not answer in time', async () => {
    const writer = newWriterId();
    const presence = log.holdPresence(writer, () => new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 1_000)));
    await log.connection.flush();
    expect(await log.probeWriter(writer, 200, 'AAAAAAAAAAAAAAAAAAAAAA', '0')).toBe('silent');
    await presence.close();
  });

  it('ignores a malformed question instead of answering "not writing"', async () => {
    const writer = newWriterId();
    const presence = log.holdPresence(writer, () => false);
    const nc = await connect({ servers: fx.server.url });
    try {
      await expect(nc.request(`${log.config.subjectPrefix}.writer.${writer}`, 'a b c', { timeout: 300 })).rejects.toThrow(/timeout/i);
    } finally {
      await nc.close();
      await presence.close();
    }
  });

  it('refuses a malformed writer id with invalid_argument', async () => {
    await expect(log.probeWriter('no spaces allowed', 500)).rejects.toSatisfy((err: unknown) => isSessionLogError(err, 'invalid_argument'));
    expect(() => log.holdPresence('short', () => true)).toThrow(/writer id is malformed/);
  });
});

describe('claims', () => {
  it('stamps every event with its writer; a claim after the head found orphaned lands and names the new writer', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const dead = newWriterId();
    await log.append(s.sessionId, stream, 'prime', bytes('{"requests":["1"]}'), { opensStream: s, writer: dead });
    await log.append(s.sessionId, stream, 'event', bytes('{"n":1}'), { writer: dead, existing: true, upstreamId: 'u-1' });
    const head = await log.head(s.sessionId, stream);
    expect(head?.writer).toBe(dead);
    const taker = newWriterId();
    const claim = await log.append(s.sessionId, stream, 'prime', new Uint8Array(), { claim: { afterSeq: head!.seq }, writer: taker, existing: true, upstreamId: 'u-1' });
    expect(claim.seq).toBe(head!.seq + 1);
    const now = await log.head(s.sessionId, stream);
    expect(now).toMatchObject({ seq: claim.seq, kind: 'prime', writer: taker, upstreamId: 'u-1' });
  });

  it('refuses a claim after a head the stream has moved past (the old writer lives): writer_conflict, nothing written', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const alive = newWriterId();
    await log.append(s.sessionId, stream, 'prime', bytes('{}'), { opensStream: s, writer: alive });
    const seen = (await log.head(s.sessionId, stream))!;
    await log.append(s.sessionId, stream, 'event', bytes('{"n":1}'), { writer: alive, existing: true });
    const claim = log.append(s.sessionId, stream, 'prime', new Uint8Array(), { claim: { afterSeq: seen.seq }, writer: newWriterId(), existing: true });
    await expect(claim).rejects.toSatisfy((err: unknown) => isSessionLogError(err, 'writer_conflict'));
    expect((await log.head(s.sessionId, stream))?.seq).toBe(2);
  });

  it('of two instances claiming one head at once, exactly one is recorded; the other gets writer_conflict', async () => {
    const other = await SessionLog.create({ servers: fx.server.url, ...sameLayout(log) });
    try {
      for (let round = 0; round < 20; round += 1) {
        const s = await log.createSession(ALICE);
        const stream = log.newStreamId();
        await log.append(s.sessionId, stream, 'prime', bytes('{}'), { opensStream: s, writer: newWriterId() });
        const head = (await log.head(s.sessionId, stream))!;
        const [a, b] = [newWriterId(), newWriterId()];
        // The same empty prime at the same seq (so the same msg id): only the writer tells them apart.
        const results = await Promise.allSettled([
          log.append(s.sessionId, stream, 'prime', new Uint8Array(), { claim: { afterSeq: head.seq }, writer: a, existing: true }),
          other.append(s.sessionId, stream, 'prime', new Uint8Array(), { claim: { afterSeq: head.seq }, writer: b, existing: true }),
        ]);
        const won = results.filter((r) => r.status === 'fulfilled');
        const lost = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
        expect(won).toHaveLength(1);
        expect(lost).toHaveLength(1);
        expect(isSessionLogError(lost[0]!.reason, 'writer_conflict')).toBe(true);
        const page = await log.readPage(s.sessionId, stream, 0, 10);
        expect(page.map((e) => e.seq)).toEqual([1, 2]);
        expect(page[1]!.writer).toBe(results[0]!.status === 'fulfilled' ? a : b);
      }
    } finally {
      await other.close();
    }
  });
});

function sameLayout(of: SessionLog) {
  const { streamName, subjectPrefix, sessionsBucket, leasesBucket, principalsBucket } = of.config;
  return { streamName, subjectPrefix, sessionsBucket, leasesBucket, principalsBucket };
}
