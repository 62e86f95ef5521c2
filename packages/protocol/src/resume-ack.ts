import type { DecodeResult } from './event-id.js';
import { encodeSseEvent } from './sse-encode.js';
import type { SseMessage } from './sse-parse.js';
import { ResumeVerdict, isResumeVerdict } from './verdicts.js';

/**
 * The resume acknowledgment (DESIGN, gateway: "A served resume opens with an
 * acknowledgment frame"): the first frame of a resumed SSE stream, which
 * names the server's resume point.
 *
 * ```
 * id: <the cursor, verbatim>
 * event: resume
 * retry: <ms>
 * data: {"verdict":"resumed","stream":"<stream>","next_seq":<n>}
 * ```
 *
 * - `id` repeats the client's `Last-Event-ID`, so a client keeps its cursor
 *   even when the stream drops before any new event (the official SDK keeps
 *   the id of every event, whatever its type, and forgets a cursor it did
 *   not see on the current response: typescript-sdk#2499).
 * - `event: resume` keeps it out of the event stream proper: clients that
 *   handle only `message` events (the SDK, an `EventSource` `onmessage`)
 *   skip it, and a client applying "the first id after a resume exceeds the
 *   cursor" can tell it from a replay of the cursor's event.
 * - `data` is wire spelling and small: the verdict (`resumed`), the stream,
 *   and the seq of the next event the stream will carry. Never the session id
 *   nor a payload. Parsers ignore fields they do not know.
 */
export const RESUME_ACK_EVENT = 'resume';

/** Longest `data` that `parseResumeAck` reads; a Tether acknowledgment is about 60 characters. */
export const MAX_RESUME_ACK_LENGTH = 256;

/** Longest `stream` an acknowledgment may name (Tether's are `'0'` or 8 characters). */
const MAX_STREAM_LENGTH = 64;
const PRINTABLE_RE = /^[\x21-\x7e]+$/;

/** The data of a resume acknowledgment, in wire spelling. */
export interface ResumeAck {
  /** The verdict on the cursor: `resumed` (a refused resume is an HTTP status, never a stream). */
  readonly verdict: ResumeVerdict;
  /** The stream being resumed: the `<stream>` part of a Tether event id. */
  readonly stream: string;
  /** The seq (`Tether-Seq`) of the next event the stream carries: the cursor's seq + 1. */
  readonly next_seq: number;
}

/** What `encodeResumeAck` needs. */
export interface ResumeAckOptions {
  /** The client's `Last-Event-ID`, sent back verbatim as the frame's `id`. */
  readonly cursor: string;
  readonly stream: string;
  readonly nextSeq: number;
  /** A `retry:` hint for the same frame. */
  readonly retryMs?: number;
}

/**
 * Encodes the acknowledgment frame of a served resume (verdict `resumed`).
 *
 * Throws `TypeError` (a programming error, not bad input) when `cursor`
 * contains CR, LF or NUL, when `stream` is not 1 to 64 printable ASCII
 * characters, when `nextSeq` is not a safe integer >= 1, or when `retryMs`
 * is not a safe integer >= 0.
 */
export function encodeResumeAck(options: ResumeAckOptions): string {
  if (!isAckStream(options.stream)) throw new TypeError(`resume ack stream must be 1 to ${MAX_STREAM_LENGTH} printable ASCII characters, got ${JSON.stringify(options.stream)}`);
  if (!isSeq(options.nextSeq)) throw new TypeError(`resume ack nextSeq must be a safe integer >= 1, got ${String(options.nextSeq)}`);
  const ack: ResumeAck = { verdict: ResumeVerdict.resumed, stream: options.stream, next_seq: options.nextSeq };
  return encodeSseEvent({
    id: options.cursor,
    event: RESUME_ACK_EVENT,
    ...(options.retryMs === undefined ? {} : { retryMs: options.retryMs }),
    data: JSON.stringify(ack),
  });
}

/** True when `m` is an acknowledgment frame by its type (`event: resume`); its data still needs `parseResumeAck`. */
export function isResumeAck(m: Pick<SseMessage, 'event'>): boolean {
  return m.event === RESUME_ACK_EVENT;
}

/**
 * Reads the data of an acknowledgment frame. Total: never throws, and a
 * failure's `reason` names the field and the problem, e.g.
 * `resume ack next_seq must be a safe integer >= 1, got "6"`. Fields other
 * than `verdict`, `stream` and `next_seq` are ignored, so the format can grow.
 */
export function parseResumeAck(data: unknown): DecodeResult<ResumeAck> {
  if (typeof data !== 'string') return fail(`resume ack data must be a string, got ${typeof data}`);
  if (data === '') return fail('resume ack data is empty');
  // Checked before parsing, so a huge frame costs O(1).
  if (data.length > MAX_RESUME_ACK_LENGTH) return fail(`resume ack data is ${data.length} characters long, over the limit of ${MAX_RESUME_ACK_LENGTH}`);
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return fail('resume ack data is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return fail(`resume ack data must be a JSON object, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`);
  }
  const o = value as Record<string, unknown>;
  const { verdict, stream, next_seq: nextSeq } = o;
  if (!('verdict' in o)) return fail('resume ack has no verdict');
  if (!isResumeVerdict(verdict)) return fail(`resume ack verdict ${JSON.stringify(verdict)} is not a resume verdict`);
  if (!('stream' in o)) return fail('resume ack has no stream');
  if (!isAckStream(stream)) return fail(`resume ack stream must be 1 to ${MAX_STREAM_LENGTH} printable ASCII characters, got ${JSON.stringify(stream)}`);
  if (!('next_seq' in o)) return fail('resume ack has no next_seq');
  if (!isSeq(nextSeq)) return fail(`resume ack next_seq must be a safe integer >= 1, got ${JSON.stringify(nextSeq)}`);
  return { ok: true, value: { verdict, stream, next_seq: nextSeq } };
}

function isAckStream(s: unknown): s is string {
  return typeof s === 'string' && s.length <= MAX_STREAM_LENGTH && PRINTABLE_RE.test(s);
}

function isSeq(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 1;
}

function fail(reason: string): { readonly ok: false; readonly reason: string } {
  return { ok: false, reason };
}
