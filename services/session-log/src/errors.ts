import { Metadata, status } from '@grpc/grpc-js';
import { encodeStatusDetails, ErrorDetail, ResumeVerdict as ProtoVerdict, resumeVerdictFromSpelling, statusOf } from '@tether/cursor-proto';
import type { RpcStatus } from '@tether/cursor-proto';
import { encodeEventId } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { Refusal, SessionLogErrorFields } from '@tether/session-log';

/** Codes the service adds to the library's (`SessionLogErrorCode`); documented in cursor.proto. */
export const ServiceErrorCode = {
  /** No, or a wrong, bearer token / client certificate. */
  unauthenticated: 'unauthenticated',
  /** The caller already has `maxStreamsPerCaller` Resume/Follow/WatchControl/WatchAdmin streams open. */
  tooManyStreams: 'too_many_streams',
  /** A refused resume; the verdict says which. */
  resumeRefused: 'resume_refused',
  /** A batch entry not attempted because an earlier entry of its stream failed. */
  skipped: 'skipped',
  /** A request field is malformed or out of range (same spelling as the library's). */
  invalidArgument: 'invalid_argument',
  /** An event payload over the service's limit (same spelling as the library's). */
  payloadTooLarge: 'payload_too_large',
  /** A bug, or a log the service cannot use; the log line has the cause. */
  internal: 'internal',
  /** An operator API call to a service started without `--operator-token`. */
  operatorApiOff: 'operator_api_off',
} as const;
export type ServiceErrorCode = (typeof ServiceErrorCode)[keyof typeof ServiceErrorCode];

/** Codes of the task RPCs (CreateTask, GetTask, CompareAndSetTask, …); documented in cursor.proto. */
export const TaskErrorCode = {
  /** The task is unknown, gone, or another caller's: one answer for all. */
  taskNotFound: 'task_not_found',
  /** CompareAndSetTask: the task was written since `expected_seq` (ErrorDetail.seq: the seq stored now). */
  taskConflict: 'task_conflict',
} as const;
export type TaskErrorCode = (typeof TaskErrorCode)[keyof typeof TaskErrorCode];

/** An error the service raises itself, before or beside the library. */
export class CursorServiceError extends Error {
  override readonly name = 'CursorServiceError';
  readonly code: ServiceErrorCode | TaskErrorCode;
  readonly fields: SessionLogErrorFields;

  constructor(code: ServiceErrorCode | TaskErrorCode, message: string, fields: SessionLogErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.fields = fields;
  }
}

/**
 * Every `ErrorDetail.code`'s gRPC status: the ERRORS table at the top of
 * cursor.proto (`resume_refused` excepted: its status is by verdict, see
 * {@link GRPC_STATUS_OF_VERDICT}). A code not in it maps to INTERNAL.
 */
export const GRPC_STATUS_OF_CODE: Readonly<Record<string, status>> = {
  invalid_argument: status.INVALID_ARGUMENT,
  payload_too_large: status.RESOURCE_EXHAUSTED,
  too_many_streams: status.RESOURCE_EXHAUSTED,
  too_many_sessions: status.RESOURCE_EXHAUSTED,
  session_not_found: status.NOT_FOUND,
  session_closed: status.NOT_FOUND,
  stream_ended: status.FAILED_PRECONDITION,
  lease_held: status.FAILED_PRECONDITION,
  writer_conflict: status.ABORTED,
  lease_lost: status.ABORTED,
  skipped: status.ABORTED,
  stream_truncated: status.OUT_OF_RANGE,
  stream_diverged: status.DATA_LOSS,
  log_unavailable: status.UNAVAILABLE,
  unauthenticated: status.UNAUTHENTICATED,
  operator_api_off: status.PERMISSION_DENIED,
  task_not_found: status.NOT_FOUND,
  task_conflict: status.ABORTED,
  invalid_config: status.INTERNAL,
  incompatible_log: status.INTERNAL,
  unsupported_server: status.INTERNAL,
  internal: status.INTERNAL,
};

/** A refused resume's gRPC status, by verdict spelling: the RESUME table in cursor.proto. */
export const GRPC_STATUS_OF_VERDICT: Readonly<Record<Refusal['verdict'], status>> = {
  malformed: status.INVALID_ARGUMENT,
  unknown_session: status.NOT_FOUND,
  epoch_mismatch: status.FAILED_PRECONDITION,
  diverged: status.FAILED_PRECONDITION,
  abandoned: status.FAILED_PRECONDITION,
  ahead: status.OUT_OF_RANGE,
  truncated: status.OUT_OF_RANGE,
};

/** What grpc-js needs to end a call with a status and our details trailer. */
export interface GrpcFailure {
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;
}

/** Maps a SessionLogError or CursorServiceError to its status; anything else is `internal` (message withheld). */
export function toGrpcStatus(err: unknown): GrpcFailure {
  const s = toRpcStatus(err);
  return failure(s.code, s.message, s.detail);
}

/** The same mapping as a `google.rpc.Status` (for `AppendBatchResult.error`). */
export function toBatchError(err: unknown): RpcStatus {
  const s = toRpcStatus(err);
  return statusOf(s.code, s.message, s.detail);
}

/** A refused resume as a status: code `resume_refused`, the verdict, the cursor and positions. */
export function refusalStatus(refusal: Refusal): GrpcFailure {
  const log = refusal.log ?? {};
  const detail = ErrorDetail.fromPartial({
    code: ServiceErrorCode.resumeRefused,
    verdict: resumeVerdictFromSpelling(refusal.verdict) ?? ProtoVerdict.UNSPECIFIED,
    sessionId: refusal.sessionId,
    ...(refusal.cursor === undefined ? {} : { cursor: encodeEventId(refusal.cursor), stream: refusal.cursor.stream }),
    log: { lastSeq: log.lastSeq, lastPos: log.lastPos, nextSeq: log.nextSeq, nextPos: log.nextPos },
    facts: { reason: refusal.reason },
  });
  return failure(GRPC_STATUS_OF_VERDICT[refusal.verdict], `resume refused (${refusal.verdict}): ${refusal.reason}`, detail);
}

function toRpcStatus(err: unknown): { code: status; message: string; detail: ErrorDetail } {
  if (isSessionLogError(err) || err instanceof CursorServiceError) {
    return { code: GRPC_STATUS_OF_CODE[err.code] ?? status.INTERNAL, message: err.message, detail: detailOf(err.code, err.fields) };
  }
  return { code: status.INTERNAL, message: 'internal error', detail: ErrorDetail.fromPartial({ code: ServiceErrorCode.internal }) };
}

function detailOf(code: string, fields: SessionLogErrorFields): ErrorDetail {
  const facts: Record<string, string> = {};
  const extra = fields.detail ?? {};
  for (const [key, value] of Object.entries(extra)) if (key !== 'expiresAtMs') facts[key] = typeof value === 'string' ? value : JSON.stringify(value);
  const expires = extra['expiresAtMs'];
  return ErrorDetail.fromPartial({
    code,
    sessionId: fields.sessionId,
    stream: fields.stream,
    seq: fields.seq,
    pos: fields.pos,
    expectedSeq: fields.expectedSeq,
    expectedPrev: fields.expectedPrev,
    holder: fields.holder,
    holderExpiresAtMs: typeof expires === 'number' ? expires : undefined,
    facts,
  });
}

function failure(code: status, details: string, detail: ErrorDetail): GrpcFailure {
  const metadata = new Metadata();
  metadata.set('grpc-status-details-bin', encodeStatusDetails(code, details, detail));
  return { code, details, metadata };
}

/** Shorthand for the service's own invalid-argument errors. */
export function invalid(message: string, fields: SessionLogErrorFields = {}): CursorServiceError {
  return new CursorServiceError(ServiceErrorCode.invalidArgument, message, fields);
}
