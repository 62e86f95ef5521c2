import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  compareEventIds,
  decodeEventId,
  encodeEventId,
  MAX_EVENT_ID_LENGTH,
  STANDALONE_STREAM,
  type EventId,
} from '@tether/protocol';

const EPOCH = 'abcdefgh23';
const STREAM = 'qrstuv67';

const base32 = fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz234567');
const epochArb = fc.string({ unit: base32, minLength: 10, maxLength: 10 });
const streamArb = fc.oneof(fc.constant(STANDALONE_STREAM), fc.string({ unit: base32, minLength: 8, maxLength: 8 }));
// Bias towards the edges: 1, small numbers, and values around 2^53.
const counterArb = fc.oneof(
  fc.integer({ min: 1, max: 1000 }),
  fc.integer({ min: 1, max: Number.MAX_SAFE_INTEGER }),
  fc.integer({ min: Number.MAX_SAFE_INTEGER - 1000, max: Number.MAX_SAFE_INTEGER }),
);
const idArb: fc.Arbitrary<EventId> = fc.record({ epoch: epochArb, stream: streamArb, seq: counterArb, pos: counterArb });

function reasonOf(text: unknown): string {
  const r = decodeEventId(text);
  if (r.ok) throw new Error(`expected ${JSON.stringify(text)} to be rejected`);
  return r.reason;
}

describe('encodeEventId', () => {
  it('joins the four fields with dashes', () => {
    expect(encodeEventId({ epoch: EPOCH, stream: STREAM, seq: 12, pos: 3456 })).toBe(`${EPOCH}-${STREAM}-12-3456`);
    expect(encodeEventId({ epoch: EPOCH, stream: '0', seq: 1, pos: 1 })).toBe(`${EPOCH}-0-1-1`);
  });

  it('encodes the largest ids within MAX_EVENT_ID_LENGTH', () => {
    const max = Number.MAX_SAFE_INTEGER;
    const text = encodeEventId({ epoch: EPOCH, stream: STREAM, seq: max, pos: max });
    expect(text).toBe(`${EPOCH}-${STREAM}-9007199254740991-9007199254740991`);
    expect(text.length).toBeLessThanOrEqual(MAX_EVENT_ID_LENGTH);
  });

  it.each([
    ['an uppercase epoch', { epoch: 'ABCDEFGH23', stream: STREAM, seq: 1, pos: 1 }],
    ['a short epoch', { epoch: 'abc', stream: STREAM, seq: 1, pos: 1 }],
    ['a stream with a dash', { epoch: EPOCH, stream: 'ab-defgh', seq: 1, pos: 1 }],
    ['seq 0', { epoch: EPOCH, stream: STREAM, seq: 0, pos: 1 }],
    ['a negative pos', { epoch: EPOCH, stream: STREAM, seq: 1, pos: -1 }],
    ['a fractional seq', { epoch: EPOCH, stream: STREAM, seq: 1.5, pos: 1 }],
    ['an unsafe pos', { epoch: EPOCH, stream: STREAM, seq: 1, pos: 2 ** 53 }],
    ['a NaN seq', { epoch: EPOCH, stream: STREAM, seq: Number.NaN, pos: 1 }],
  ])('throws TypeError for %s', (_, id) => {
    expect(() => encodeEventId(id)).toThrow(TypeError);
  });
});

describe('decodeEventId', () => {
  it('decodes a valid id', () => {
    expect(decodeEventId(`${EPOCH}-${STREAM}-7-42`)).toEqual({
      ok: true,
      value: { epoch: EPOCH, stream: STREAM, seq: 7, pos: 42 },
    });
    expect(decodeEventId(`${EPOCH}-0-1-9007199254740991`)).toEqual({
      ok: true,
      value: { epoch: EPOCH, stream: '0', seq: 1, pos: Number.MAX_SAFE_INTEGER },
    });
  });

  it.each([
    ['empty', '', /event id is empty/],
    ['one extra field', `${EPOCH}-${STREAM}-1-2-3`, /5 '-'-separated fields, expected 4/],
    ['a missing field', `${EPOCH}-${STREAM}-1`, /3 '-'-separated fields, expected 4/],
    ['a trailing dash', `${EPOCH}-${STREAM}-1-2-`, /5 '-'-separated fields/],
    ['a bare number', '12', /1 '-'-separated fields/],
    ['a plus sign on seq', `${EPOCH}-${STREAM}-+1-2`, /^seq has a sign/],
    ['a plus sign on pos', `${EPOCH}-${STREAM}-1-+2`, /^pos has a sign/],
    ['a minus sign on seq', `${EPOCH}-${STREAM}--1-2`, /5 '-'-separated fields/],
    ['a leading zero on seq', `${EPOCH}-${STREAM}-01-2`, /^seq has a leading zero$/],
    ['a leading zero on pos', `${EPOCH}-${STREAM}-1-002`, /^pos has a leading zero$/],
    ['seq zero', `${EPOCH}-${STREAM}-0-2`, /^seq is zero/],
    ['pos zero', `${EPOCH}-${STREAM}-1-0`, /^pos is zero/],
    ['seq 2^53 (overflow)', `${EPOCH}-${STREAM}-9007199254740992-2`, /^seq exceeds Number.MAX_SAFE_INTEGER/],
    ['pos 2^53+1 (rounds to 2^53)', `${EPOCH}-${STREAM}-1-9007199254740993`, /^pos exceeds/],
    ['a 17-digit pos', `${EPOCH}-${STREAM}-1-10000000000000000`, /^pos exceeds/],
    ['a hex seq', `${EPOCH}-${STREAM}-0x1-2`, /^seq must be decimal digits/],
    ['an exponent', `${EPOCH}-${STREAM}-1e3-2`, /^seq must be decimal digits/],
    ['a fractional pos', `${EPOCH}-${STREAM}-1-2.5`, /^pos must be decimal digits/],
    ['an empty seq and pos', `${EPOCH}-${STREAM}--`, /^seq is empty$/],
    ['an empty epoch', `-${STREAM}-1-2`, /^epoch is empty$/],
    ['an empty stream', `${EPOCH}--1-2`, /^stream is empty$/],
    ['an uppercase epoch', `ABCDEFGH23-${STREAM}-1-2`, /^epoch must be lowercase base32.*uppercase/],
    ['an uppercase stream', `${EPOCH}-QRSTUV67-1-2`, /^stream must be lowercase base32.*uppercase/],
    ['an epoch with non-base32 digits', `abcdefgh01-${STREAM}-1-2`, /^epoch must be lowercase base32/],
    ['a short epoch', `abcdefgh2-${STREAM}-1-2`, /^epoch must be 10 characters, got 9$/],
    ['a stream of 7 characters', `${EPOCH}-qrstuv6-1-2`, /^stream must be '0' or 8 characters/],
    ['stream 00', `${EPOCH}-00-1-2`, /^stream must be '0' or 8/],
    ['a leading space', ` ${EPOCH}-${STREAM}-1-2`, /whitespace at index 0/],
    ['a trailing newline', `${EPOCH}-${STREAM}-1-2\n`, /whitespace/],
    ['a space inside seq', `${EPOCH}-${STREAM}-1 2-3`, /whitespace/],
    ['a tab', `${EPOCH}-${STREAM}-1-\t2`, /whitespace/],
    ['non-ASCII', `${EPOCH}-${STREAM}-1-２`, /non-ASCII character/],
    ['an emoji', `${EPOCH}-${STREAM}-1-2😀`, /non-ASCII/],
    ['a NUL', `${EPOCH}-${STREAM}-1-2\0`, /control character/],
    ['DEL', `${EPOCH}-${STREAM}-1-2\x7f`, /control character/],
    ['over-long', `${EPOCH}-${STREAM}-1-${'1'.repeat(70)}`, /over the limit of 80/],
  ])('rejects %s', (_, text, reason) => {
    expect(reasonOf(text)).toMatch(reason);
  });

  it.each([
    ['undefined', undefined, /got undefined/],
    ['null', null, /got null/],
    ['a number', 12, /got number/],
    ['an object', { epoch: EPOCH }, /got object/],
    ['an array', [EPOCH], /got an array/],
    ['a String object', new String(`${EPOCH}-0-1-1`), /got object/],
  ])('rejects a non-string: %s', (_, input, reason) => {
    expect(reasonOf(input)).toMatch(/^event id must be a string/);
    expect(reasonOf(input)).toMatch(reason);
  });

  it('checks the length before scanning, so a huge header is cheap', () => {
    expect(reasonOf('x'.repeat(10_000_000))).toMatch(/10000000 characters long/);
  });

  it('accepts exactly MAX_EVENT_ID_LENGTH characters of structure and rejects one more', () => {
    // A valid id cannot reach 80 characters, so at the limit the length check
    // passes and a field check answers instead.
    const atLimit = `${EPOCH}-${STREAM}-1-${'1'.repeat(MAX_EVENT_ID_LENGTH - 22)}`;
    expect(atLimit.length).toBe(MAX_EVENT_ID_LENGTH);
    expect(reasonOf(atLimit)).toMatch(/^pos exceeds/);
    expect(reasonOf(`${atLimit}1`)).toMatch(/over the limit/);
  });
});

describe('event id properties', () => {
  it('decode(encode(id)) equals id', () => {
    fc.assert(
      fc.property(idArb, (id) => {
        expect(decodeEventId(encodeEventId(id))).toEqual({ ok: true, value: id });
      }),
      { numRuns: 2000 },
    );
  });

  it('encode(decode(text)) equals text for every accepted text: one spelling per id', () => {
    fc.assert(
      fc.property(idArb, (id) => {
        const text = encodeEventId(id);
        const r = decodeEventId(text);
        expect(r.ok && encodeEventId(r.value)).toBe(text);
      }),
    );
  });

  it('compareEventIds follows (seq, pos) order, and decoding preserves it', () => {
    const tuple = (a: EventId, b: EventId): number =>
      a.seq !== b.seq ? Math.sign(a.seq - b.seq) : Math.sign(a.pos - b.pos);
    fc.assert(
      fc.property(idArb, idArb, (a, b) => {
        const expected = tuple(a, b);
        expect(compareEventIds(a, b)).toBe(expected);
        expect(compareEventIds(b, a)).toBe(-expected || 0);
        const da = decodeEventId(encodeEventId(a));
        const db = decodeEventId(encodeEventId(b));
        if (!da.ok || !db.ok) throw new Error('round trip failed');
        expect(compareEventIds(da.value, db.value)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
  });

  it('sorting by compareEventIds sorts by (seq, pos)', () => {
    fc.assert(
      fc.property(fc.array(idArb, { maxLength: 30 }), (ids) => {
        const sorted = [...ids].sort(compareEventIds);
        for (let i = 1; i < sorted.length; i++) {
          const [p, q] = [sorted[i - 1]!, sorted[i]!];
          expect(p.seq < q.seq || (p.seq === q.seq && p.pos <= q.pos)).toBe(true);
        }
      }),
    );
  });

  it('decodeEventId never throws for any string', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 120 }), (s) => {
        const r = decodeEventId(s);
        expect(typeof r.ok).toBe('boolean');
        if (!r.ok) expect(r.reason.length).toBeGreaterThan(0);
      }),
      { numRuns: 2000 },
    );
  });

  it('decodeEventId never throws for anything', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        expect(decodeEventId(v).ok).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('decodeEventId never throws for near-valid strings, and accepts only canonical spellings', () => {
    const piece = fc.constantFrom('-', '0', '1', '9', '+', ' ', EPOCH, STREAM, 'A', 'z', '9007199254740991', '9007199254740992');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
        const text = parts.join('');
        const r = decodeEventId(text);
        if (r.ok) expect(encodeEventId(r.value)).toBe(text);
      }),
      { numRuns: 3000 },
    );
  });
});
