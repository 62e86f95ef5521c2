import type { SseMessage } from './sse-parse.js';

/**
 * Local error codes of `@tether/protocol`. Match on `err.code`, never on the
 * message text. These are local errors: they never travel on the wire, and
 * they are kept apart from the resume verdicts (`verdicts.ts`), which do.
 */
export const ProtocolErrorCode = {
  sseLineTooLong: 'sse_line_too_long',
  sseEventTooLarge: 'sse_event_too_large',
} as const;
export type ProtocolErrorCode = (typeof ProtocolErrorCode)[keyof typeof ProtocolErrorCode];

/** Base error of this package: a stable string `code`, and `cause` kept. */
export class ProtocolError extends Error {
  override readonly name: string = 'ProtocolError';
  readonly code: ProtocolErrorCode;

  constructor(code: ProtocolErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * Thrown by `SseParser` when a line or an event block outgrows the parser's
 * configured bound. The stream cannot be parsed any further (the parser
 * rethrows it on every later call), so a caller should abort the upstream.
 *
 * Codes:
 * - `sse_line_too_long`: one line exceeded `maxLineBytes`.
 * - `sse_event_too_large`: one block (the lines up to a blank line, comments
 *   excluded) exceeded `maxBlockBytes`.
 */
export class SseLimitError extends ProtocolError {
  override readonly name: string = 'SseLimitError';
  declare readonly code: 'sse_line_too_long' | 'sse_event_too_large';
  /** The configured limit that was exceeded, in UTF-8 bytes. */
  readonly limitBytes: number;
  /**
   * Messages completed earlier in the same `push()` call, before the limit was
   * hit. They are valid and would otherwise be lost with the throw; a proxy
   * that records events should record these before it gives up on the stream.
   */
  readonly messages: readonly SseMessage[];

  constructor(
    code: 'sse_line_too_long' | 'sse_event_too_large',
    limitBytes: number,
    messages: readonly SseMessage[] = [],
  ) {
    const what = code === 'sse_line_too_long' ? 'an SSE line' : 'an SSE event block';
    super(code, `${what} exceeded the limit of ${limitBytes} bytes`);
    this.limitBytes = limitBytes;
    this.messages = messages;
  }
}

/** True when `err` is an `SseLimitError` (either code). */
export function isSseLimitError(err: unknown): err is SseLimitError {
  return err instanceof SseLimitError;
}
