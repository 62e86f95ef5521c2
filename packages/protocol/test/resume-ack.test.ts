import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MAX_RESUME_ACK_LENGTH, RESUME_ACK_EVENT, SseParser, encodeEventId, encodeResumeAck, isResumeAck, parseResumeAck } from '@tether/protocol';

const cursor = encodeEventId({ epoch: 'abcdefgh23', stream: 'qrstuvwx', seq: 5, pos: 77 });

describe('encodeResumeAck', () => {
  it('writes the cursor as id, event: resume, the retry hint, and the JSON data, in that order', () => {
    expect(encodeResumeAck({ cursor, stream: 'qrstuvwx', nextSeq: 6, retryMs: 1000 })).toBe(
      `id: ${cursor}\nevent: resume\nretry: 1000\ndata: {"verdict":"resumed","stream":"qrstuvwx","next_seq":6}\n\n`,
    );
    expect(encodeResumeAck({ cursor, stream: '0', nextSeq: 2 })).toBe(`id: ${cursor}\nevent: resume\ndata: {"verdict":"resumed","stream":"0","next_seq":2}\n\n`);
  });

  it('parses back to one message that keeps the cursor as the last event id', () => {
    const [m, ...rest] = new SseParser().push(encodeResumeAck({ cursor, stream: 'qrstuvwx', nextSeq: 6, retryMs: 500 }));
    expect(rest).toEqual([]);
    expect(m).toMatchObject({ id: cursor, lastEventId: cursor, event: RESUME_ACK_EVENT, retryMs: 500, hasData: true });
    expect(isResumeAck(m!)).toBe(true);
    expect(parseResumeAck(m!.data)).toEqual({ ok: true, value: { verdict: 'resumed', stream: 'qrstuvwx', next_seq: 6 } });
  });

  it('refuses what would make a bad frame: a cursor with a line break, a bad stream, a bad next seq', () => {
    expect(() => encodeResumeAck({ cursor: 'a\nevent: x', stream: '0', nextSeq: 2 })).toThrow(/CR, LF or NUL/);
    expect(() => encodeResumeAck({ cursor, stream: '', nextSeq: 2 })).toThrow(/stream/);
    expect(() => encodeResumeAck({ cursor, stream: 'a b', nextSeq: 2 })).toThrow(/stream/);
    expect(() => encodeResumeAck({ cursor, stream: '0', nextSeq: 0 })).toThrow(/nextSeq/);
    expect(() => encodeResumeAck({ cursor, stream: '0', nextSeq: 1.5 })).toThrow(/nextSeq/);
  });
});

describe('isResumeAck', () => {
  it('goes by the event type alone', () => {
    expect(isResumeAck({ event: 'resume' })).toBe(true);
    expect(isResumeAck({ event: undefined })).toBe(false);
    expect(isResumeAck({ event: 'message' })).toBe(false);
    expect(isResumeAck({ event: 'Resume' })).toBe(false);
  });
});

describe('parseResumeAck', () => {
  it('ignores fields it does not know', () => {
    expect(parseResumeAck('{"next_seq":3,"stream":"0","verdict":"resumed","epoch":"x","more":{"a":1}}')).toEqual({
      ok: true,
      value: { verdict: 'resumed', stream: '0', next_seq: 3 },
    });
  });

  it('reads any resume verdict, so a caller can see a contradiction', () => {
    expect(parseResumeAck('{"verdict":"truncated","stream":"0","next_seq":3}')).toMatchObject({ ok: true, value: { verdict: 'truncated' } });
  });

  it.each([
    [undefined, 'resume ack data must be a string, got undefined'],
    ['', 'resume ack data is empty'],
    ['{"verdict":"resumed"', 'resume ack data is not JSON'],
    ['[1]', 'resume ack data must be a JSON object, got an array'],
    ['null', 'resume ack data must be a JSON object, got null'],
    ['6', 'resume ack data must be a JSON object, got number'],
    ['{"stream":"0","next_seq":3}', 'resume ack has no verdict'],
    ['{"verdict":"ok","stream":"0","next_seq":3}', 'resume ack verdict "ok" is not a resume verdict'],
    ['{"verdict":"resumed","next_seq":3}', 'resume ack has no stream'],
    ['{"verdict":"resumed","stream":7,"next_seq":3}', 'resume ack stream must be 1 to 64 printable ASCII characters, got 7'],
    ['{"verdict":"resumed","stream":"0"}', 'resume ack has no next_seq'],
    ['{"verdict":"resumed","stream":"0","next_seq":"3"}', 'resume ack next_seq must be a safe integer >= 1, got "3"'],
    ['{"verdict":"resumed","stream":"0","next_seq":0}', 'resume ack next_seq must be a safe integer >= 1, got 0'],
    ['{"verdict":"resumed","stream":"0","next_seq":9007199254740992}', 'resume ack next_seq must be a safe integer >= 1, got 9007199254740992'],
  ])('refuses %j: %s', (data, reason) => {
    expect(parseResumeAck(data)).toEqual({ ok: false, reason });
  });

  it('bounds the work: data over the limit is refused before it is parsed', () => {
    const big = `{"verdict":"resumed","stream":"0","next_seq":3,"pad":"${'x'.repeat(MAX_RESUME_ACK_LENGTH)}"}`;
    expect(parseResumeAck(big)).toEqual({ ok: false, reason: `resume ack data is ${big.length} characters long, over the limit of ${MAX_RESUME_ACK_LENGTH}` });
  });

  it('round-trips every valid acknowledgment, and never throws on anything', () => {
    const stream = fc.stringMatching(/^[\x21-\x7e]{1,64}$/);
    fc.assert(
      fc.property(stream, fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }), (s, n) => {
        const [m] = new SseParser().push(encodeResumeAck({ cursor, stream: s, nextSeq: n }));
        expect(parseResumeAck(m!.data)).toEqual({ ok: true, value: { verdict: 'resumed', stream: s, next_seq: n } });
      }),
    );
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.anything()), (x) => {
        const r = parseResumeAck(x);
        expect(typeof r.ok).toBe('boolean');
      }),
    );
  });
});
