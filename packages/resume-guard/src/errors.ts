/**
 * Local errors of `@tether/resume-guard`. Match on `err.code`, never on the
 * message. These never travel on the wire as such; when the guard fails a
 * pending MCP request it wraps the same facts in a JSON-RPC error
 * (`RESUME_VIOLATION_RPC_CODE`, see `wire.ts`).
 */

/** What went wrong with a resumed (or live) stream. Closed set. */
export const ResumeViolationCode = {
  /** The server answered the resume from an earlier point: ids at or below the cursor, same events again. */
  replayFromZero: 'replay_from_zero',
  /** Events after the cursor are missing: first id > cursor + 1, or ids jump inside the stream. */
  gap: 'gap',
  /** Another log answered: an id the client already holds names a different event, or the epoch, stream or id format changed. */
  fork: 'fork',
  /** An event without an id on a stream that had ids, or id-less SSE after JSON answers on the same session. */
  silentFallback: 'silent_fallback',
  /** The server refused the resume explicitly (`Tether-Resume` verdict, a 400/404/410 to a `Last-Event-ID`, or a resume acknowledgment whose verdict is not `resumed`). */
  explicitRefusal: 'explicit_refusal',
  /**
   * The server's resume acknowledgment (`event: resume`) cannot be trusted:
   * no id, data that is not `{"verdict","stream","next_seq"}`, a second one,
   * or a `next_seq` the first event does not carry.
   */
  malformedAck: 'malformed_ack',
} as const;
export type ResumeViolationCode = (typeof ResumeViolationCode)[keyof typeof ResumeViolationCode];

/** Where in the stream the violation was seen. */
export type ViolationPosition = 'first' | 'within';

/** Facts about a violation. Ids are the wire strings. */
export interface ResumeViolationFields {
  /** `Mcp-Session-Id` of the request, if any. */
  readonly sessionId?: string | undefined;
  /** The cursor the client sent (`Last-Event-ID`); undefined on a fresh stream. */
  readonly lastEventId?: string | undefined;
  /** The id of the offending event; undefined when it had none (fallback) or for a refusal. */
  readonly eventId?: string | undefined;
  /** The id that should have come, when the id format lets us say (Tether and numeric ids). */
  readonly expectedEventId?: string | undefined;
  /** The id delivered just before the offending one on this stream. */
  readonly previousEventId?: string | undefined;
  /** `first`: the first event after the cursor; `within`: later in the stream (e.g. a buffer/log seam). */
  readonly position?: ViolationPosition | undefined;
  /** `Tether-Resume` or the refusal body's `error.data.verdict`, when the server sent one. */
  readonly verdict?: string | undefined;
  /** HTTP status of the answer. */
  readonly status?: number | undefined;
  /** The request URL. */
  readonly url?: string | undefined;
}

/** Codes of the guard's own failures (not the server's). */
export const ResumeGuardErrorCode = {
  /** Opening a replacement session failed: the initialize POST or its `initialized` notification was refused. */
  reinitializeFailed: 'reinitialize_failed',
  /**
   * A resume named a stream of a session the guard has since replaced (the
   * server refused or lost it): its pending requests are failed locally and
   * the cursor never reaches the server, where it would name another log.
   */
  sessionReplaced: 'session_replaced',
} as const;
export type ResumeGuardErrorCode = (typeof ResumeGuardErrorCode)[keyof typeof ResumeGuardErrorCode];

/** Base error of this package: a stable string `code`, structured fields, `cause` kept. */
export class ResumeGuardError extends Error {
  override readonly name: string = 'ResumeGuardError';
  readonly code: ResumeGuardErrorCode | ResumeViolationCode;

  constructor(code: ResumeGuardErrorCode | ResumeViolationCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

/**
 * A resumed (or live) stream broke resumption integrity, or the server
 * refused the resume. Raised before the offending event reaches the client:
 * nothing from it is delivered.
 */
export class ResumeViolationError extends ResumeGuardError {
  override readonly name: string = 'ResumeViolationError';
  declare readonly code: ResumeViolationCode;
  readonly sessionId: string | undefined;
  readonly lastEventId: string | undefined;
  readonly eventId: string | undefined;
  readonly expectedEventId: string | undefined;
  readonly previousEventId: string | undefined;
  readonly position: ViolationPosition | undefined;
  readonly verdict: string | undefined;
  readonly status: number | undefined;
  readonly url: string | undefined;

  constructor(code: ResumeViolationCode, message: string, fields: ResumeViolationFields = {}, options?: { cause?: unknown }) {
    super(code, message, options);
    this.sessionId = fields.sessionId;
    this.lastEventId = fields.lastEventId;
    this.eventId = fields.eventId;
    this.expectedEventId = fields.expectedEventId;
    this.previousEventId = fields.previousEventId;
    this.position = fields.position;
    this.verdict = fields.verdict;
    this.status = fields.status;
    this.url = fields.url;
  }

  /** The fields as a plain object (for logs, JSON-RPC `error.data`, reports). */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { code: this.code, message: this.message };
    for (const k of FIELD_NAMES) if (this[k] !== undefined) out[k] = this[k];
    return out;
  }
}

const FIELD_NAMES = [
  'sessionId',
  'lastEventId',
  'eventId',
  'expectedEventId',
  'previousEventId',
  'position',
  'verdict',
  'status',
  'url',
] as const;

/** True when `err` is a `ResumeViolationError`, optionally of one `code`. */
export function isResumeViolation(err: unknown, code?: ResumeViolationCode): err is ResumeViolationError {
  return err instanceof ResumeViolationError && (code === undefined || err.code === code);
}
