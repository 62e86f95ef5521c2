import { SseLimitError } from './errors.js';

/**
 * An incremental `text/event-stream` parser following the WHATWG HTML
 * "event stream interpretation" rules (§9.2.6), with one deliberate
 * difference: a block is reported when it contains any effective field, not
 * only when its data buffer is non-empty, because a proxy must see id-only
 * priming events and retry-only hints. `hasData` is exactly WHATWG's dispatch
 * condition, for callers that want browser semantics.
 */

/** One event block, reported at the blank line that ends it. */
export interface SseMessage {
  /** The `id` field of this block; `undefined` if none (an id containing NUL is ignored, per spec). */
  id: string | undefined;
  /** The spec's last event ID buffer after this block: what a reconnecting client would send. */
  lastEventId: string;
  /** The `event` field of this block (the last one wins); `undefined` if none. */
  event: string | undefined;
  /** The data lines joined with `\n`; `''` when there were none. */
  data: string;
  /** Whether any `data` field appeared; WHATWG dispatches a `MessageEvent` only when true. */
  hasData: boolean;
  /** A valid `retry` field of this block, in ms; `undefined` if none. */
  retryMs: number | undefined;
}

/** Bounds on memory, both in UTF-8 bytes of decoded text. */
export interface SseParserOptions {
  /** Longest line accepted, terminator excluded. Default 1 MiB. Exceeding throws `sse_line_too_long`. */
  maxLineBytes?: number;
  /** Largest block accepted (its non-comment lines, one byte per terminator). Default 4 MiB. Exceeding throws `sse_event_too_large`. */
  maxBlockBytes?: number;
}

export const DEFAULT_MAX_LINE_BYTES = 1024 * 1024;
export const DEFAULT_MAX_BLOCK_BYTES = 4 * 1024 * 1024;

const LINE_BREAK_RE = /[\r\n]/g;
const DIGITS_RE = /^[0-9]+$/;
const CR = 0x0d;
const LF = 0x0a;

/**
 * Feed it chunks with `push()` (bytes or already-decoded text), and call
 * `end()` when the stream ends. Any split of the same byte stream yields the
 * same messages: UTF-8 sequences and CRLF pairs may straddle chunks.
 *
 * Once a limit error is thrown, every later call rethrows it. After `end()`
 * the parser can read a new response (a reconnect): like `EventSource`, it
 * keeps `lastEventId` and `retryMs` and starts the next stream fresh.
 */
export class SseParser {
  readonly #maxLineBytes: number;
  readonly #maxBlockBytes: number;
  // ignoreBOM: true keeps a BOM in the output, so the BOM rule below applies
  // the same way to byte and string chunks.
  #decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  #decoderUsed = false;
  #atStreamStart = true;
  #skipLeadingLF = false;
  #line = '';
  #lineBytes = 0;
  #failure: SseLimitError | undefined;

  // The block being read.
  #data = '';
  #hasData = false;
  #event: string | undefined;
  #id: string | undefined;
  #retry: number | undefined;
  #blockBytes = 0;

  // The spec's "last event ID buffer", and the "last event ID string" that
  // dispatch copies it to. They differ only inside an unterminated block.
  #idBuffer = '';
  #lastEventId = '';
  #retryMs: number | undefined;

  constructor(options: SseParserOptions = {}) {
    this.#maxLineBytes = positiveLimit('maxLineBytes', options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
    this.#maxBlockBytes = positiveLimit('maxBlockBytes', options.maxBlockBytes ?? DEFAULT_MAX_BLOCK_BYTES);
  }

  /** The last event ID string as of the last blank line: send it as `Last-Event-ID` on reconnect. */
  get lastEventId(): string {
    return this.#lastEventId;
  }

  /** The latest valid `retry` value seen, in ms (set as soon as the field is read, per spec). */
  get retryMs(): number | undefined {
    return this.#retryMs;
  }

  /** Parses a chunk and returns the blocks it completed, in order. Throws `SseLimitError`. */
  push(chunk: Uint8Array | string): SseMessage[] {
    if (this.#failure !== undefined) throw this.#failure;
    let text: string;
    if (typeof chunk === 'string') {
      // Flush bytes left by an earlier byte chunk first (a truncated sequence
      // becomes U+FFFD), so mixing the two kinds keeps the stream's order.
      text = this.#decoderUsed ? this.#decoder.decode() + chunk : chunk;
      this.#decoderUsed = false;
    } else {
      text = this.#decoder.decode(chunk, { stream: true });
      this.#decoderUsed = true;
    }
    const out: SseMessage[] = [];
    this.#feed(text, out);
    return out;
  }

  /**
   * Ends the stream. Spec: "Once the end of the file is reached, any pending
   * data must be discarded. (If the file ends in the middle of an event,
   * before the final empty line, the incomplete event is not dispatched.)"
   * So this always returns `[]`; it exists so a caller can treat the end
   * like any other chunk, and it resets the parser for the next response.
   */
  end(): SseMessage[] {
    if (this.#failure !== undefined) throw this.#failure;
    this.#decoder = new TextDecoder('utf-8', { ignoreBOM: true });
    this.#decoderUsed = false;
    this.#atStreamStart = true;
    this.#skipLeadingLF = false;
    this.#line = '';
    this.#lineBytes = 0;
    this.#resetBlock();
    // The discarded block's id never reached dispatch, so it must not leak
    // into the next stream's first event.
    this.#idBuffer = this.#lastEventId;
    return [];
  }

  #feed(text: string, out: SseMessage[]): void {
    const n = text.length;
    let start = 0;
    if (n === 0) return;
    if (this.#atStreamStart) {
      // Spec: the stream is decoded with "UTF-8 decode", which strips one
      // leading BOM. A later U+FEFF is ordinary text.
      this.#atStreamStart = false;
      if (text.charCodeAt(0) === 0xfeff) start = 1;
    }
    if (this.#skipLeadingLF && start < n) {
      // Spec: lines end in "a U+000D CARRIAGE RETURN U+000A LINE FEED (CRLF)
      // character pair, a single U+000A LINE FEED (LF) character not preceded
      // by a U+000D CARRIAGE RETURN (CR) character, or a single U+000D CARRIAGE
      // RETURN (CR) character not followed by a U+000A LINE FEED (LF)
      // character". The previous chunk ended in CR and the line was processed
      // then; an LF here is the second half of that CRLF, not a blank line.
      this.#skipLeadingLF = false;
      if (text.charCodeAt(start) === LF) start += 1;
    }
    LINE_BREAK_RE.lastIndex = start;
    while (start < n) {
      const match = LINE_BREAK_RE.exec(text);
      if (match === null) {
        // No terminator: keep the rest, bounded, until the next chunk.
        const bytes = this.#lineBytes + utf8Length(text, start, n);
        if (bytes > this.#maxLineBytes) this.#fail('sse_line_too_long', this.#maxLineBytes, out);
        this.#line += text.slice(start);
        this.#lineBytes = bytes;
        return;
      }
      const end = match.index;
      const bytes = this.#lineBytes + utf8Length(text, start, end);
      if (bytes > this.#maxLineBytes) this.#fail('sse_line_too_long', this.#maxLineBytes, out);
      const line = this.#line === '' ? text.slice(start, end) : this.#line + text.slice(start, end);
      this.#line = '';
      this.#lineBytes = 0;
      // Advance past the terminator before processing, so a throw leaves no
      // half-consumed CRLF behind (the parser is dead after a throw anyway).
      if (text.charCodeAt(end) === CR) {
        if (end + 1 === n) {
          this.#skipLeadingLF = true;
          start = n;
        } else {
          start = text.charCodeAt(end + 1) === LF ? end + 2 : end + 1;
        }
      } else {
        start = end + 1;
      }
      LINE_BREAK_RE.lastIndex = start;
      this.#processLine(line, bytes, out);
    }
  }

  #processLine(line: string, bytes: number, out: SseMessage[]): void {
    // Spec: "If the line is empty (a blank line): Dispatch the event".
    if (line === '') {
      this.#dispatch(out);
      return;
    }
    // Spec: "If the line starts with a U+003A COLON character (:): Ignore the line."
    if (line.charCodeAt(0) === 0x3a) return;
    this.#blockBytes += bytes + 1;
    if (this.#blockBytes > this.#maxBlockBytes) this.#fail('sse_event_too_large', this.#maxBlockBytes, out);
    // Spec: "If the line contains a U+003A COLON character (:): Collect the
    // characters on the line before the first U+003A COLON character (:), and
    // let field be that string. Collect the characters on the line after the
    // first U+003A COLON character (:), and let value be that string. If value
    // starts with a U+0020 SPACE character, remove it from value."
    // "Otherwise, the string is not empty but does not contain a U+003A COLON
    // character (:): Process the field using [...] the whole line as the field
    // name, and the empty string as the field value."
    const colon = line.indexOf(':');
    const name = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 0x20) value = value.slice(1);
    switch (name) {
      case 'event':
        // "Set the event type buffer to field value."
        this.#event = value;
        break;
      case 'data':
        // "Append the field value to the data buffer, then append a single
        // U+000A LINE FEED (LF) character to the data buffer."
        this.#data += value + '\n';
        this.#hasData = true;
        break;
      case 'id':
        // "If the field value does not contain U+0000 NULL, then set the last
        // event ID buffer to the field value. Otherwise, ignore the field."
        if (!value.includes('\0')) {
          this.#idBuffer = value;
          this.#id = value;
        }
        break;
      case 'retry':
        // "If the field value consists of only ASCII digits, then interpret the
        // field value as an integer in base ten, and set the event stream's
        // reconnection time to that integer. Otherwise, ignore the field."
        // An empty value has no integer to interpret, and a value past 2^53
        // cannot be held exactly; both are ignored.
        if (DIGITS_RE.test(value)) {
          const ms = Number(value);
          if (Number.isSafeInteger(ms)) {
            this.#retryMs = ms;
            this.#retry = ms;
          }
        }
        break;
      default:
      // "Otherwise: The field is ignored."
    }
  }

  #dispatch(out: SseMessage[]): void {
    // Spec step 1: "Set the last event ID string of the event source to the
    // value of the last event ID buffer. The buffer does not get reset".
    this.#lastEventId = this.#idBuffer;
    if (this.#hasData || this.#event !== undefined || this.#id !== undefined || this.#retry !== undefined) {
      out.push({
        id: this.#id,
        lastEventId: this.#lastEventId,
        event: this.#event,
        // Step 3: "If the data buffer's last character is a U+000A LINE FEED
        // (LF) character, then remove the last character from the data buffer."
        data: this.#hasData ? this.#data.slice(0, -1) : '',
        hasData: this.#hasData,
        retryMs: this.#retry,
      });
    }
    // Step 7: "Set the data buffer and the event type buffer to the empty string."
    this.#resetBlock();
  }

  #resetBlock(): void {
    this.#data = '';
    this.#hasData = false;
    this.#event = undefined;
    this.#id = undefined;
    this.#retry = undefined;
    this.#blockBytes = 0;
  }

  #fail(code: 'sse_line_too_long' | 'sse_event_too_large', limitBytes: number, out: SseMessage[]): never {
    const err = new SseLimitError(code, limitBytes, out.slice());
    this.#failure = err;
    // Drop what was buffered: the point of the limit is to bound memory.
    this.#line = '';
    this.#resetBlock();
    throw err;
  }
}

// Bytes this text takes in UTF-8. Each UTF-16 surrogate counts 2, so a pair
// counts 4 even when a string chunk splits it, keeping limits split-independent.
function utf8Length(text: string, from: number, to: number): number {
  let bytes = to - from;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) bytes += c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 1 : 2;
  }
  return bytes;
}

function positiveLimit(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`SseParser ${name} must be a safe integer >= 1, got ${String(value)}`);
  }
  return value;
}
