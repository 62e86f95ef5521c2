import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import { encodeSseComment, encodeSseEvent, SseLimitError, SseParser, type SseMessage, type SseOutgoing } from '@tether/protocol';

interface Outcome {
  messages: SseMessage[];
  lastEventId: string;
  retryMs: number | undefined;
  error?: string;
}

/** Feeds the chunks to a fresh parser; on a limit error, keeps what was delivered. */
function run(chunks: Array<Uint8Array | string>, options: ConstructorParameters<typeof SseParser>[0] = {}): Outcome {
  const p = new SseParser(options);
  const messages: SseMessage[] = [];
  try {
    for (const c of chunks) messages.push(...p.push(c));
    messages.push(...p.end());
  } catch (err) {
    if (!(err instanceof SseLimitError)) throw err;
    messages.push(...err.messages);
    return { messages, lastEventId: p.lastEventId, retryMs: p.retryMs, error: err.code };
  }
  return { messages, lastEventId: p.lastEventId, retryMs: p.retryMs };
}

/**
 * An independent, deliberately naive reading of the WHATWG algorithm over the
 * whole input at once (plus this package's rule: report any block with an
 * effective field). The incremental parser must agree with it.
 */
function reference(input: Uint8Array): Outcome {
  const text = new TextDecoder().decode(input); // UTF-8 decode: replacement, one BOM stripped
  const lines = text.split(/\r\n|\r|\n/);
  lines.pop(); // the unterminated tail (or '') is discarded at end of file
  const messages: SseMessage[] = [];
  let idBuffer = '';
  let lastEventId = '';
  let retryMs: number | undefined;
  let block = { data: '', hasData: false, event: undefined as string | undefined, id: undefined as string | undefined, retry: undefined as number | undefined };
  for (const line of lines) {
    if (line === '') {
      lastEventId = idBuffer;
      if (block.hasData || block.event !== undefined || block.id !== undefined || block.retry !== undefined) {
        messages.push({ id: block.id, lastEventId, event: block.event, data: block.data.replace(/\n$/, ''), hasData: block.hasData, retryMs: block.retry });
      }
      block = { data: '', hasData: false, event: undefined, id: undefined, retry: undefined };
      continue;
    }
    if (line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const name = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (name === 'event') block.event = value;
    else if (name === 'data') (block.data += `${value}\n`), (block.hasData = true);
    else if (name === 'id' && !value.includes('\0')) (idBuffer = value), (block.id = value);
    else if (name === 'retry' && /^\d+$/.test(value) && Number.isSafeInteger(Number(value))) retryMs = block.retry = Number(value);
  }
  return { messages, lastEventId, retryMs };
}

function concat(parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, at), (at += p.length);
  return out;
}

function splitAt<T extends Uint8Array | string>(whole: T, cuts: number[]): T[] {
  const points = [...new Set(cuts.map((c) => c % (whole.length + 1)))].sort((a, b) => a - b);
  const out: T[] = [];
  let from = 0;
  for (const p of [...points, whole.length]) out.push(whole.slice(from, p) as T), (from = p);
  return out;
}

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

// Streams built from the pieces that matter to the grammar, plus multibyte
// text and raw bytes that are not valid UTF-8.
const piece = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('data', 'id', 'event', 'retry', ':', ': ', ' ', '\r', '\n', '\r\n', '\n\n', '\0', '\uFEFF', '7', '42', 'x', 'é', '😀', 'data: ', 'id: ', 'retry: ') },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 6 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 4 }) },
);
const chaoticArb = fc.array(piece, { maxLength: 60 }).map((pieces) => pieces.map((p) => (typeof p === 'string' ? utf8(p) : p)));
// Streams made of well-formed lines, so that blocks, ids and limits are hit often.
const lineArb = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(fc.constantFrom('data', 'data', 'id', 'event', 'retry', 'foo', ''), fc.constantFrom(': ', ': ', ':', ''), fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'binary', maxLength: 6 }), fc.constantFrom('', '12', '\0'))).map((p) => p.join('')) },
  { weight: 2, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }).map((c) => `:${c}`) },
);
const structuredArb = fc
  .array(fc.tuple(lineArb, fc.constantFrom('\n', '\r', '\r\n')), { maxLength: 30, size: 'medium' })
  .map((lines) => [utf8(lines.map(([l, t]) => l.replace(/[\r\n]/g, '') + t).join(''))]);
const streamArb = fc
  .tuple(fc.boolean(), fc.oneof(chaoticArb, structuredArb))
  .map(([bom, parts]) => concat([...(bom ? [utf8('\uFEFF')] : []), ...parts]));
const cutsArb = fc.array(fc.nat(), { maxLength: 12 });

describe('SseParser properties', () => {
  it('agrees with a naive whole-input reading of the spec', () => {
    fc.assert(
      fc.property(streamArb, (input) => {
        expect(run([input])).toEqual(reference(input));
      }),
      { numRuns: 3000 },
    );
  });

  it('any split of the bytes (inside characters, between CR and LF) parses like the whole', () => {
    fc.assert(
      fc.property(streamArb, cutsArb, (input, cuts) => {
        expect(run(splitAt(input, cuts))).toEqual(run([input]));
      }),
      { numRuns: 3000 },
    );
  });

  it('one-byte chunks parse like the whole', () => {
    fc.assert(
      fc.property(streamArb, (input) => {
        expect(run(Array.from(input, (b) => new Uint8Array([b])))).toEqual(run([input]));
      }),
      { numRuns: 500 },
    );
  });

  it('any split of a string (even inside a surrogate pair) parses like the whole', () => {
    const textArb = fc.array(fc.oneof(fc.constantFrom('data: ', 'id:', '\r', '\n', '😀', ':'), fc.string({ unit: 'binary', maxLength: 5 })), { maxLength: 40 }).map((a) => a.join(''));
    fc.assert(
      fc.property(textArb, cutsArb, (text, cuts) => {
        expect(run(splitAt(text, cuts))).toEqual(run([text]));
      }),
      { numRuns: 2000 },
    );
  });

  it('limits hit the same way, with the same messages delivered, for any split', () => {
    const options = { maxLineBytes: 16, maxBlockBytes: 24 };
    fc.assert(
      fc.property(streamArb, cutsArb, (input, cuts) => {
        expect(run(splitAt(input, cuts), options)).toEqual(run([input], options));
      }),
      { numRuns: 3000 },
    );
  });
});

// Event fields the encoder accepts: id and event without CR, LF or NUL.
const lineText = fc.string({ unit: 'binary', maxLength: 20 }).map((s) => s.replace(/[\r\n\0]/g, '_'));
const dataText = fc.array(fc.oneof(fc.string({ unit: 'binary', maxLength: 10 }), fc.constantFrom('\n', '\r', '\r\n', ' ', ':')), { maxLength: 8 }).map((a) => a.join(''));
const outgoingArb: fc.Arbitrary<SseOutgoing> = fc
  .record(
    { id: lineText, event: lineText, data: dataText, retryMs: fc.nat() },
    { requiredKeys: [] },
  )
  .filter((e) => Object.keys(e).length > 0);

describe('encodeSseEvent then SseParser', () => {
  it('round-trips arbitrary events, with heartbeats between them and any split', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(outgoingArb, fc.option(lineText)), { maxLength: 10 }), fc.boolean(), cutsArb, (events, bom, cuts) => {
        let text = bom ? '\uFEFF' : '';
        for (const [e, heartbeat] of events) text += encodeSseEvent(e) + (heartbeat === null ? '' : encodeSseComment(heartbeat));
        const got = run(splitAt(utf8(text), cuts));
        expect(got.error).toBeUndefined();
        let lastEventId = '';
        const expected = events.map(([e]): SseMessage => {
          if (e.id !== undefined) lastEventId = e.id;
          return {
            id: e.id,
            lastEventId,
            event: e.event,
            // The format cannot tell CRLF, CR and LF apart: they come back as LF.
            data: (e.data ?? '').replace(/\r\n|\r/g, '\n'),
            hasData: e.data !== undefined,
            retryMs: e.retryMs,
          };
        });
        expect(got.messages).toEqual(expected);
        expect(got.lastEventId).toBe(lastEventId);
      }),
      { numRuns: 2000 },
    );
  });
});
