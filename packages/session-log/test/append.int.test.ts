import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headers } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { decodeEventId, LogHeader } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ALICE, bytes, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open({ maxPayloadBytes: 64 * 1024 });
});
afterAll(async () => {
  await fx.teardown();
});

describe('append', () => {
  it('numbers each stream contiguously and chains every event to the previous position', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const results = [];
    for (let i = 1; i <= 5; i += 1) {
      results.push(await log.append(s.sessionId, stream, 'event', bytes(`{"i":${i}}`), { upstreamId: `up-${i}` }));
      // A second stream interleaves, so positions are not consecutive.
      await log.append(s.sessionId, '0', 'event', bytes('{}'));
    }
    expect(results.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
    const jsm = await jetstreamManager(log.connection);
    let prev = 0;
    for (const r of results) {
      const id = decodeEventId(r.id);
      expect(id.ok && id.value).toEqual({ epoch: s.epoch, stream, seq: r.seq, pos: r.pos });
      const stored = await jsm.streams.getMessage(log.config.streamName, { seq: r.pos });
      expect(stored!.header.get(LogHeader.prev)).toBe(String(prev));
      expect(stored!.header.get(LogHeader.seq)).toBe(String(r.seq));
      expect(stored!.header.get(LogHeader.epoch)).toBe(s.epoch);
      expect(stored!.header.get(LogHeader.upstreamId)).toBe(`up-${r.seq}`);
      expect(stored!.header.get('Nats-Msg-Id')).toBe(`${s.sessionId}.${stream}.${r.seq}`);
      prev = r.pos;
    }
  });

  it('a writer taking over a stream continues its chain from the log', async () => {
    const s = await log.createSession(ALICE);
    const first = await log.openWriter(s.sessionId, '0');
    await first.append('event', bytes('a'));
    const second = await first.append('event', bytes('b'));
    const takeover = await log.openWriter(s.sessionId, '0');
    expect(takeover.last).toEqual({ seq: second.seq, pos: second.pos });
    const third = await takeover.append('event', bytes('c'));
    expect(third.seq).toBe(3);
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => [e.seq, e.prev, text(e.payload)])).toEqual([
      [1, 0, 'a'],
      [2, page[0]!.pos, 'b'],
      [3, second.pos, 'c'],
    ]);
  });

  it('a writer told the stream has events never starts it over when the log answers it has none', async () => {
    // The log can answer "no message" for a stream that has events on any
    // server: the stream's limits removed them (max_age, or max_bytes with
    // discard old, while the session lived on). A stream leader that answered
    // before it applied them did the same on 2.9.10 after leader kills
    // (finding 5). The writer cannot tell why, and starting at seq 1 again
    // would fork the stream; here a stream that really holds nothing gives
    // that answer.
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    await expect(log.append(s.sessionId, stream, 'event', bytes('x'), { existing: true })).rejects.toMatchObject({ code: 'log_unavailable' });
    expect(await log.readPage(s.sessionId, stream, 0, 10)).toEqual([]);
    // Without the claim, a new stream starts at seq 1; with it, an existing one continues.
    await log.append(s.sessionId, stream, 'prime', bytes(''));
    const other = await fx.open({ streamName: log.config.streamName, subjectPrefix: log.config.subjectPrefix, sessionsBucket: log.config.sessionsBucket, leasesBucket: log.config.leasesBucket });
    await expect(other.append(s.sessionId, stream, 'event', bytes('y'), { existing: true })).resolves.toMatchObject({ seq: 2 });
  });

  it('opensStream: a new stream starts at seq 1 without reading the log; told so of a stream with events, an append fails explicitly', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const first = await log.append(s.sessionId, stream, 'prime', bytes('{"requests":[]}'), { opensStream: s });
    const second = await log.append(s.sessionId, stream, 'event', bytes('x'));
    expect([first.seq, second.seq]).toEqual([1, 2]);
    // Another instance wrongly told the stream is new: its seq 1 is taken by other bytes.
    const other = await fx.open({ streamName: log.config.streamName, subjectPrefix: log.config.subjectPrefix, sessionsBucket: log.config.sessionsBucket, leasesBucket: log.config.leasesBucket });
    await expect(other.append(s.sessionId, stream, 'prime', bytes('{"requests":["1"]}'), { opensStream: s })).rejects.toMatchObject({ code: 'writer_conflict' });
    expect((await log.readPage(s.sessionId, stream, 0, 10)).map((e) => e.id)).toEqual([first.id, second.id]);
    await expect(log.append(s.sessionId, 'not a stream', 'prime', bytes(''), { opensStream: s })).rejects.toMatchObject({ code: 'invalid_argument' });
  });

  it('the tripwire stops a stale writer: it gets writer_conflict and nothing is written', async () => {
    const s = await log.createSession(ALICE);
    const stale = await log.openWriter(s.sessionId, '0');
    const fresh = await log.openWriter(s.sessionId, '0');
    await fresh.append('event', bytes('fresh-1'));
    await fresh.append('event', bytes('fresh-2'));
    const err = await stale.append('event', bytes('stale')).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'writer_conflict')).toBe(true);
    expect(stale.broken).toBe(true);
    // It stays stopped: a writer never guesses where the stream is now.
    await expect(stale.append('event', bytes('again'))).rejects.toMatchObject({ code: 'writer_conflict' });
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => text(e.payload))).toEqual(['fresh-1', 'fresh-2']);
  });

  it('a retried append after a lost reply is idempotent: same id, stored once', async () => {
    const s = await log.createSession(ALICE);
    const writer = await log.openWriter(s.sessionId, '0');
    await writer.append('event', bytes('one'));
    // Simulate the lost reply: the first attempt of seq 2 reached the server,
    // the ack never reached the writer. Store exactly what it would have sent.
    const nc = await fx.raw();
    const h = headers();
    h.set(LogHeader.epoch, s.epoch);
    h.set(LogHeader.seq, '2');
    h.set(LogHeader.prev, String(writer.last.pos));
    h.set(LogHeader.kind, 'event');
    const landed = await jetstream(nc).publish(`${log.config.subjectPrefix}.log.${s.sessionId}.0`, bytes('two'), {
      headers: h,
      msgID: `${s.sessionId}.0.2`,
    });
    const retried = await writer.append('event', bytes('two'));
    expect(retried.pos).toBe(landed.seq);
    expect(retried.seq).toBe(2);
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => text(e.payload))).toEqual(['one', 'two']);
  });

  it('a duplicate ack for bytes that are not ours is a writer_conflict, not a silent success', async () => {
    const s = await log.createSession(ALICE);
    const writer = await log.openWriter(s.sessionId, '0');
    const nc = await fx.raw();
    const h = headers();
    h.set(LogHeader.epoch, s.epoch);
    h.set(LogHeader.seq, '1');
    h.set(LogHeader.prev, '0');
    h.set(LogHeader.kind, 'event');
    await jetstream(nc).publish(`${log.config.subjectPrefix}.log.${s.sessionId}.0`, bytes('rival'), { headers: h, msgID: `${s.sessionId}.0.1` });
    await expect(writer.append('event', bytes('mine'))).rejects.toMatchObject({ code: 'writer_conflict' });
  });

  it('settles an in-doubt append: landed only if seq, prev, kind and bytes all match the last event', async () => {
    const s = await log.createSession(ALICE);
    const a = await log.append(s.sessionId, '0', 'event', bytes('same'));
    const b = await log.append(s.sessionId, '0', 'event', bytes('same'));
    const writer = await log.openWriter(s.sessionId, '0');
    // The doubtful append was seq 2 after pos a: it landed as b.
    expect(await writer.settle({ seq: 2, prev: a.pos, kind: 'event', payload: bytes('same'), writer: '' })).toEqual(b);
    // Identical bytes one seq later did not land (two equal events stay two).
    expect(await writer.settle({ seq: 3, prev: b.pos, kind: 'event', payload: bytes('same'), writer: '' })).toBeUndefined();
    expect(await writer.settle({ seq: 2, prev: a.pos, kind: 'event', payload: bytes('other'), writer: '' })).toBeUndefined();
    expect(await writer.settle({ seq: 2, prev: a.pos + 1, kind: 'event', payload: bytes('same'), writer: '' })).toBeUndefined();
  });

  it('refuses oversized payloads, bad stream ids and appends after the end marker, writing nothing', async () => {
    const s = await log.createSession(ALICE);
    const big = await log.append(s.sessionId, '0', 'event', new Uint8Array(64 * 1024 + 1)).catch((e: unknown) => e);
    expect(isSessionLogError(big, 'payload_too_large')).toBe(true);
    expect((big as Error).message).toContain('65537 bytes');
    for (const bad of ['', 'ABCDEFGH', 'a.b', '>', 'abcdefghi']) {
      const err = await log.append(s.sessionId, bad, 'event', bytes('{}')).catch((e: unknown) => e);
      expect(isSessionLogError(err, 'invalid_argument')).toBe(true);
    }
    const stream = log.newStreamId();
    await log.append(s.sessionId, stream, 'event', bytes('last'));
    await log.append(s.sessionId, stream, 'end', new Uint8Array());
    const after = await log.append(s.sessionId, stream, 'event', bytes('late')).catch((e: unknown) => e);
    expect(isSessionLogError(after, 'stream_ended')).toBe(true);
    expect(await log.readPage(s.sessionId, '0', 0, 10)).toEqual([]);
    expect((await log.readPage(s.sessionId, stream, 0, 10)).map((e) => e.kind)).toEqual(['event', 'end']);
  });

  it('appends to one stream from concurrent callers keep call order', async () => {
    const s = await log.createSession(ALICE);
    const n = 200;
    const results = await Promise.all(Array.from({ length: n }, (_, i) => log.append(s.sessionId, '0', 'event', bytes(String(i)))));
    expect(results.map((r) => r.seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    const page = await log.readPage(s.sessionId, '0', 0, n);
    expect(page.map((e) => text(e.payload))).toEqual(Array.from({ length: n }, (_, i) => String(i)));
  });

  it('refuses a caller-supplied cursor that names no event of the stream, instead of reporting a broken log', async () => {
    const a = await log.createSession(ALICE);
    const b = await log.createSession(ALICE);
    const ours = await log.append(a.sessionId, '0', 'event', bytes('a1'));
    const theirs = await log.append(b.sessionId, '0', 'event', bytes('b1'));
    const foreign = { seq: 1, pos: theirs.pos };
    await expect(log.readPage(a.sessionId, '0', foreign.seq, 5, foreign.pos)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(log.follow(a.sessionId, '0', foreign).next()).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(log.follow(a.sessionId, '0', { seq: 7, pos: ours.pos }).next()).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(log.follow(a.sessionId, '0', { seq: 1, pos: 0 }).next()).rejects.toMatchObject({ code: 'invalid_argument' });
    // A cursor that does name our event still works.
    expect(await log.readPage(a.sessionId, '0', 1, 5, ours.pos)).toEqual([]);
  });

  it('reads pages after a seq, with or without the position hint', async () => {
    const s = await log.createSession(ALICE);
    const ids = [];
    for (let i = 1; i <= 12; i += 1) ids.push(await log.append(s.sessionId, '0', 'event', bytes(String(i))));
    const scanned = await log.readPage(s.sessionId, '0', 4, 3);
    expect(scanned.map((e) => e.seq)).toEqual([5, 6, 7]);
    const hinted = await log.readPage(s.sessionId, '0', 10, 5, ids[9]!.pos);
    expect(hinted.map((e) => e.seq)).toEqual([11, 12]);
    expect(await log.readPage(s.sessionId, '0', 12, 5)).toEqual([]);
    await expect(log.readPage(s.sessionId, '0', -1, 5)).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});
