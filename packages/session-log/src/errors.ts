/**
 * Local errors of the session log. Callers match on `code`; the edges
 * (gateway HTTP, gRPC service) map codes to their wire statuses.
 */
export const SessionLogErrorCode = {
  /** A configuration value is out of range or malformed. */
  invalidConfig: 'invalid_config',
  /** An existing stream or bucket disagrees with the configuration. Never changed silently. */
  incompatibleLog: 'incompatible_log',
  /** The nats-server is older than the log supports (2.11). */
  unsupportedServer: 'unsupported_server',
  /** A caller passed a malformed session id, stream id, kind or payload. */
  invalidArgument: 'invalid_argument',
  /** The session is not in the registry (or belongs to another principal: same code on purpose). */
  sessionNotFound: 'session_not_found',
  /** The session was closed; no more appends or reads. */
  sessionClosed: 'session_closed',
  /** The principal already has the most open sessions it may have (`maxSessionsPerPrincipal`). */
  tooManySessions: 'too_many_sessions',
  /** The payload is larger than the log accepts. */
  payloadTooLarge: 'payload_too_large',
  /** Another writer appended to this stream: the tripwire fired. Stop writing. */
  writerConflict: 'writer_conflict',
  /** The stream already has its `end` marker; nothing can follow it. */
  streamEnded: 'stream_ended',
  /** Another owner holds an unexpired lease. */
  leaseHeld: 'lease_held',
  /** The lease is no longer ours (expired and taken, or released). */
  leaseLost: 'lease_lost',
  /** A live read found a hole the log cannot fill (retention evicted it). */
  streamTruncated: 'stream_truncated',
  /** A live read found a message that breaks the prev-chain: a fork or a lost tail. */
  streamDiverged: 'stream_diverged',
  /** JetStream did not answer in time or refused for a reason of its own. */
  logUnavailable: 'log_unavailable',
} as const;
export type SessionLogErrorCode = (typeof SessionLogErrorCode)[keyof typeof SessionLogErrorCode];

/** Structured facts that travel with an error (never payloads). */
export interface SessionLogErrorFields {
  readonly sessionId?: string;
  readonly stream?: string;
  readonly seq?: number;
  readonly pos?: number;
  readonly expectedSeq?: number;
  readonly expectedPrev?: number;
  readonly key?: string;
  readonly holder?: string;
  readonly detail?: Readonly<Record<string, unknown>>;
}

export class SessionLogError extends Error {
  override readonly name = 'SessionLogError';
  readonly code: SessionLogErrorCode;
  readonly fields: SessionLogErrorFields;

  constructor(code: SessionLogErrorCode, message: string, fields: SessionLogErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.fields = fields;
  }
}

export function isSessionLogError(err: unknown, code?: SessionLogErrorCode): err is SessionLogError {
  return err instanceof SessionLogError && (code === undefined || err.code === code);
}

/** JetStream API error codes we react to (nats-server `errors.json`). */
export const JsErrCode = {
  /** `wrong last sequence`: the expected-last-subject-sequence tripwire. */
  streamWrongLastSequence: 10071,
  /** `wrong last sequence` without a sequence (2.11+ on replicated streams): an append to this subject is being proposed right now. */
  streamSubjectInProcess: 10164,
  /** `duplicate message id is in process` (2.11+ on replicated streams): an append with this msg id is being proposed right now. */
  streamDuplicateInProcess: 10158,
  streamNotFound: 10059,
  consumerNotFound: 10014,
  noMessageFound: 10037,
} as const;

/**
 * Nobody received a publish (NATS answered 503): nothing was stored. Seen on
 * 2.15 for a few hundred ms right after an R3 stream is created, before the
 * connected node knows where its subjects go. nats.js reports it as
 * `JetStreamNotEnabled` with the no-responders error as its cause.
 */
export function isNoResponders(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth += 1) {
    if (e.name === 'NoResponders' || /no responders/i.test(e.message)) return true;
  }
  return false;
}

/** The numeric JetStream API error code of `err`, if it carries one. */
export function jsErrorCode(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'number' ? code : undefined;
}

/** A KV compare-and-set that lost: the key changed since it was read (`update`), or exists (`create`). */
export function isCasFailure(err: unknown): boolean {
  return /wrong last sequence|key exists/i.test(String(err));
}
