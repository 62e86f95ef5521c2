import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headers } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import { LogHeader } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ALICE, bytes, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

// The writer publishes on its own reply subscription with a header block it
// encodes itself (not `js.publish` and `MsgHdrsImpl.set`): what it stores
// must be what nats.js stored, and its answers must mean what they meant.

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open();
});
afterAll(async () => {
  await fx.teardown();
});

const TRACEPARENT = '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01';

describe('what an append stores', () => {
  it('the same headers, values and order nats.js headers() and js.publish built', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const first = await log.append(s.sessionId, stream, 'prime', new Uint8Array(), { opensStream: s, writer: 'w1' });
    const second = await log.append(s.sessionId, stream, 'event', bytes('{"a":1}'), { upstreamId: ' up\r\n7 ', traceparent: TRACEPARENT, writer: 'w1', existing: true });
    const third = await log.append(s.sessionId, stream, 'end', new Uint8Array(), { endReason: 'abandoned', traceparent: TRACEPARENT, writer: 'w1', existing: true });
    const expected = (seq: number, prev: number, kind: string, extra: [string, string][]): [string, string[]][] => {
      const h = headers();
      h.set(LogHeader.epoch, s.epoch);
      h.set(LogHeader.seq, String(seq));
      h.set(LogHeader.prev, String(prev));
      h.set(LogHeader.kind, kind);
      for (const [k, v] of extra) h.set(k, v);
      h.set('Nats-Msg-Id', `${s.sessionId}.${stream}.${seq}`);
      h.set('Nats-Expected-Last-Subject-Sequence', String(prev));
      return [...(h as unknown as Iterable<[string, string[]]>)];
    };
    const jsm = await jetstreamManager(log.connection);
    const stored = async (pos: number): Promise<[string, string[]][]> => {
      const m = await jsm.streams.getMessage(log.config.streamName, { seq: pos });
      // What the server added on storing is not ours to compare.
      return [...(m!.header as unknown as Iterable<[string, string[]]>)].filter(([k]) => !k.startsWith('Nats-') || k === 'Nats-Msg-Id' || k === 'Nats-Expected-Last-Subject-Sequence');
    };
    expect(await stored(first.pos)).toEqual(expected(1, 0, 'prime', [[LogHeader.writer, 'w1']]));
    expect(await stored(second.pos)).toEqual(
      expected(2, first.pos, 'event', [
        [LogHeader.upstreamId, 'up  7'],
        [LogHeader.traceparent, TRACEPARENT],
        [LogHeader.writer, 'w1'],
      ]),
    );
    expect(await stored(third.pos)).toEqual(
      expected(3, second.pos, 'end', [
        [LogHeader.endReason, 'abandoned'],
        [LogHeader.traceparent, TRACEPARENT],
        [LogHeader.writer, 'w1'],
      ]),
    );
  });

  it('a writer id with CR or LF is refused before anything is sent', async () => {
    const s = await log.createSession(ALICE);
    const err = await log.append(s.sessionId, log.newStreamId(), 'prime', new Uint8Array(), { opensStream: s, writer: 'w\r\n1' }).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'invalid_argument')).toBe(true);
  });
});

describe('what an append is answered', () => {
  it('many streams in flight at once on one connection: every append acknowledged at its own position', async () => {
    const s = await log.createSession(ALICE);
    const streams = Array.from({ length: 32 }, () => log.newStreamId());
    const results = await Promise.all(
      streams.map(async (stream) => {
        const out = [];
        out.push(await log.append(s.sessionId, stream, 'prime', new Uint8Array(), { opensStream: s }));
        for (let i = 0; i < 5; i += 1) out.push(await log.append(s.sessionId, stream, 'event', bytes(`{"${stream}":${i}}`), { existing: true }));
        return out;
      }),
    );
    const positions = results.flat().map((r) => r.pos);
    expect(new Set(positions).size).toBe(positions.length);
    for (const r of results) expect(r.map((x) => x.seq)).toEqual([1, 2, 3, 4, 5, 6]);
    const page = await log.readPage(s.sessionId, streams[7]!, 0, 10);
    expect(page.map((e) => new TextDecoder().decode(e.payload))).toEqual(['', ...Array.from({ length: 5 }, (_, i) => `{"${streams[7]!}":${i}}`)]);
  });

  it('a refusal by JetStream (the tripwire) is writer_conflict, as it was with js.publish', async () => {
    const s = await log.createSession(ALICE);
    const stream = log.newStreamId();
    const a = await log.openWriter(s.sessionId, stream);
    const b = await log.openWriter(s.sessionId, stream);
    await a.append('event', bytes('first'));
    const err = await b.append('event', bytes('rival')).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'writer_conflict')).toBe(true);
  });

  it('no stream to store it (no responders): log_unavailable, after the busy retries', async () => {
    const other = await fx.open();
    const s = await other.createSession(ALICE);
    const jsm = await jetstreamManager(other.connection);
    await jsm.streams.delete(other.config.streamName);
    const started = Date.now();
    const err = await other.append(s.sessionId, other.newStreamId(), 'prime', new Uint8Array(), { opensStream: s }).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'log_unavailable')).toBe(true);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
