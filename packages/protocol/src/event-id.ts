import { EPOCH_LENGTH, STREAM_ID_LENGTH, isEpoch, isStreamId } from './ids.js';

/**
 * The SSE event id Tether sends: `<epoch>-<stream>-<seq>-<pos>` (DESIGN §5).
 *
 * - `epoch`: the incarnation of the session's log (10 chars, base32).
 * - `stream`: `'0'` for the GET stream, else an 8-char base32 token.
 * - `seq`: `Tether-Seq`, the per-stream counter, 1, 2, 3… with no holes.
 * - `pos`: the JetStream stream sequence of the event, for O(1) seek.
 */
export interface EventId {
  readonly epoch: string;
  readonly stream: string;
  readonly seq: number;
  readonly pos: number;
}

/** A decoder's answer: a value, or a human sentence saying what was wrong. */
export type DecodeResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

/**
 * Longest text `decodeEventId` looks at. A valid id is at most 53 characters
 * (10 + 1 + 8 + 1 + 16 + 1 + 16); the slack leaves room for a future format
 * while bounding the work an attacker can make us do with a huge header.
 */
export const MAX_EVENT_ID_LENGTH = 80;

const MAX_SAFE_DIGITS = String(Number.MAX_SAFE_INTEGER); // '9007199254740991', 16 digits
const DIGITS_RE = /^[0-9]+$/;

/**
 * Encodes an event id. Throws `TypeError` when a part is invalid: the caller
 * built the id itself, so a bad part is a programming error, not bad input.
 */
export function encodeEventId(id: EventId): string {
  if (!isEpoch(id.epoch)) throw new TypeError(`invalid event id: ${epochProblem(id.epoch)}`);
  if (!isStreamId(id.stream)) throw new TypeError(`invalid event id: ${streamProblem(id.stream)}`);
  if (!isCounter(id.seq)) throw new TypeError(`invalid event id: seq must be a safe integer >= 1, got ${String(id.seq)}`);
  if (!isCounter(id.pos)) throw new TypeError(`invalid event id: pos must be a safe integer >= 1, got ${String(id.pos)}`);
  return `${id.epoch}-${id.stream}-${id.seq}-${id.pos}`;
}

/**
 * Decodes an event id, typically a client's `Last-Event-ID`. Total: it never
 * throws, whatever it is given (DESIGN §5), and a failure's `reason` names the
 * field and the problem, e.g. `seq has a leading zero`.
 *
 * The grammar is strict on purpose: every id has exactly one spelling, so two
 * different strings can never name the same event.
 */
export function decodeEventId(text: unknown): DecodeResult<EventId> {
  if (typeof text !== 'string') return fail(`event id must be a string, got ${describeType(text)}`);
  if (text.length === 0) return fail('event id is empty');
  // Checked before any scan, so an enormous header costs O(1).
  if (text.length > MAX_EVENT_ID_LENGTH) {
    return fail(`event id is ${text.length} characters long, over the limit of ${MAX_EVENT_ID_LENGTH}`);
  }
  const bad = firstUnprintable(text);
  if (bad !== undefined) return fail(bad);

  const fields = text.split('-');
  if (fields.length !== 4) {
    return fail(`event id has ${fields.length} '-'-separated fields, expected 4 (epoch-stream-seq-pos)`);
  }
  const [epoch, stream, seqText, posText] = fields as [string, string, string, string];
  const epochBad = isEpoch(epoch) ? undefined : epochProblem(epoch);
  if (epochBad !== undefined) return fail(epochBad);
  const streamBad = isStreamId(stream) ? undefined : streamProblem(stream);
  if (streamBad !== undefined) return fail(streamBad);
  const seq = decodeCounter('seq', seqText);
  if (!seq.ok) return seq;
  const pos = decodeCounter('pos', posText);
  if (!pos.ok) return pos;
  return { ok: true, value: { epoch, stream, seq: seq.value, pos: pos.value } };
}

/**
 * Orders two ids by `(seq, pos)`. Returns -1, 0 or 1. Only meaningful for ids
 * of the same epoch and stream: ids of different streams are not ordered.
 */
export function compareEventIds(a: EventId, b: EventId): number {
  if (a.seq !== b.seq) return a.seq < b.seq ? -1 : 1;
  if (a.pos !== b.pos) return a.pos < b.pos ? -1 : 1;
  return 0;
}

function fail(reason: string): { readonly ok: false; readonly reason: string } {
  return { ok: false, reason };
}

function isCounter(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 1;
}

/**
 * Decimal, >= 1, no sign, no leading zero, <= Number.MAX_SAFE_INTEGER.
 * The overflow check compares digit strings: `Number('9007199254740993')`
 * rounds to 2^53, so a numeric check after parsing would let ids alias.
 */
function decodeCounter(name: 'seq' | 'pos', text: string): DecodeResult<number> {
  if (text.length === 0) return fail(`${name} is empty`);
  if (text[0] === '+') return fail(`${name} has a sign; it must be plain decimal digits`);
  if (!DIGITS_RE.test(text)) return fail(`${name} must be decimal digits, got '${text}'`);
  if (text === '0') return fail(`${name} is zero; it must be at least 1`);
  if (text[0] === '0') return fail(`${name} has a leading zero`);
  if (text.length > MAX_SAFE_DIGITS.length || (text.length === MAX_SAFE_DIGITS.length && text > MAX_SAFE_DIGITS)) {
    return fail(`${name} exceeds Number.MAX_SAFE_INTEGER (${MAX_SAFE_DIGITS})`);
  }
  return { ok: true, value: Number(text) };
}

// Event ids are printable ASCII (0x21-0x7e); anything else gets a reason that
// says which kind of character was found, since "invalid" alone would not
// tell an operator whether a proxy added a space or mangled the encoding.
function firstUnprintable(text: string): string | undefined {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x21 && c <= 0x7e) continue;
    if (c === 0x20 || (c >= 0x09 && c <= 0x0d)) return `event id contains whitespace at index ${i}`;
    if (c > 0x7e && c !== 0x7f) return `event id contains a non-ASCII character at index ${i}`;
    return `event id contains a control character at index ${i}`;
  }
  return undefined;
}

function epochProblem(s: string): string {
  if (typeof s !== 'string') return `epoch must be a string, got ${describeType(s)}`;
  if (s.length === 0) return 'epoch is empty';
  if (s.length !== EPOCH_LENGTH) return `epoch must be ${EPOCH_LENGTH} characters, got ${s.length}`;
  if (/[A-Z]/.test(s)) return 'epoch must be lowercase base32 (a-z, 2-7), found an uppercase letter';
  return 'epoch must be lowercase base32 (a-z, 2-7)';
}

function streamProblem(s: string): string {
  if (typeof s !== 'string') return `stream must be a string, got ${describeType(s)}`;
  if (s.length === 0) return 'stream is empty';
  if (s.length !== STREAM_ID_LENGTH) {
    return `stream must be '0' or ${STREAM_ID_LENGTH} characters of base32, got ${s.length} characters`;
  }
  if (/[A-Z]/.test(s)) return 'stream must be lowercase base32 (a-z, 2-7), found an uppercase letter';
  return 'stream must be lowercase base32 (a-z, 2-7)';
}

function describeType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  return typeof v;
}
