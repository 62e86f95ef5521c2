/**
 * SSE frame encoder. The output parses back, under the WHATWG "event stream
 * interpretation" rules (and `SseParser`), to exactly the fields given, with
 * one documented exception: line breaks inside `data` come back as `\n`,
 * since the format itself cannot tell CRLF, CR and LF apart.
 */

/** One outgoing SSE event. At least one field must be present. */
export interface SseOutgoing {
  /** The `id:` field. Must not contain CR, LF or NUL. May be empty (resets a client's last event id). */
  id?: string;
  /** The `event:` field (event type). Must not contain CR, LF or NUL. */
  event?: string;
  /** The payload. Any text; each line becomes its own `data:` line. */
  data?: string;
  /** The `retry:` hint in milliseconds: a safe integer >= 0. */
  retryMs?: number;
}

// The three line terminators of the SSE grammar: CRLF, a lone CR, a lone LF.
const LINE_BREAK_RE = /\r\n|\r|\n/;
const UNSAFE_IN_LINE_RE = /[\r\n\0]/;

/**
 * Encodes one event as a complete frame ending with a blank line.
 *
 * Throws `TypeError` (a programming error, not bad input) when `id` or
 * `event` contains CR, LF or NUL, when `retryMs` is not a safe integer >= 0,
 * or when no field is present: an empty frame would dispatch nothing.
 */
export function encodeSseEvent(e: SseOutgoing): string {
  let out = '';
  if (e.id !== undefined) {
    // A CR or LF would end the field early and let the rest be read as other
    // fields (injection); a NUL makes the spec's parser ignore the whole id.
    assertSingleLine('id', e.id);
    out += field('id', e.id);
  }
  if (e.event !== undefined) {
    assertSingleLine('event', e.event);
    out += field('event', e.event);
  }
  if (e.retryMs !== undefined) {
    if (!Number.isSafeInteger(e.retryMs) || e.retryMs < 0) {
      throw new TypeError(`SSE retryMs must be a safe integer >= 0, got ${String(e.retryMs)}`);
    }
    out += field('retry', String(e.retryMs));
  }
  if (e.data !== undefined) {
    // Spec: every `data` field appends its value plus LF to the data buffer,
    // and dispatch removes the final LF. So one `data:` line per line of the
    // payload reproduces the payload, and empty data is a single `data:`.
    for (const line of e.data.split(LINE_BREAK_RE)) out += field('data', line);
  }
  if (out === '') throw new TypeError('an SSE event needs at least one of id, event, data or retryMs');
  return out + '\n';
}

/**
 * Encodes a comment, e.g. a heartbeat (DESIGN §8): `: text\n\n`. Each line of
 * `text` becomes its own comment line, so no text can inject a field. The
 * trailing blank line dispatches nothing, because comments are not fields;
 * only send comments between complete frames.
 */
export function encodeSseComment(text: string): string {
  let out = '';
  for (const line of text.split(LINE_BREAK_RE)) out += line === '' ? ':\n' : `: ${line}\n`;
  return out + '\n';
}

// Spec: "If value starts with a U+0020 SPACE character, remove it from value."
// Always writing one space after the colon means a value that itself starts
// with a space survives: the parser strips ours, not the value's.
function field(name: string, value: string): string {
  return value === '' ? `${name}:\n` : `${name}: ${value}\n`;
}

function assertSingleLine(name: 'id' | 'event', value: string): void {
  if (typeof value !== 'string') throw new TypeError(`SSE ${name} must be a string, got ${typeof value}`);
  if (UNSAFE_IN_LINE_RE.test(value)) throw new TypeError(`SSE ${name} must not contain CR, LF or NUL`);
}
