import type { Metadata } from '@grpc/grpc-js';
import { Any } from './gen/google/protobuf/any.js';
import { Status } from './gen/google/rpc/status.js';
import { ErrorDetail } from './gen/tether/cursor/v1/cursor.js';

/** The trailer that carries a `google.rpc.Status` with the details of a failed call (the gRPC richer error model). */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin';
/** `Any.typeUrl` of an `ErrorDetail`. */
export const ERROR_DETAIL_TYPE_URL = 'type.googleapis.com/tether.cursor.v1.ErrorDetail';

/** A failed call as the server reports it: gRPC status code, message, and our detail (when it sent one). */
export interface CallFailure {
  readonly code: number;
  readonly message: string;
  readonly detail: ErrorDetail | undefined;
}

/** Encodes the `google.rpc.Status` for `STATUS_DETAILS_KEY` holding one `ErrorDetail`. */
export function encodeStatusDetails(code: number, message: string, detail: ErrorDetail): Buffer {
  return Buffer.from(Status.encode(statusOf(code, message, detail)).finish());
}

/** The `google.rpc.Status` message itself (what an `AppendBatchResult.error` holds). */
export function statusOf(code: number, message: string, detail: ErrorDetail): Status {
  const any: Any = { typeUrl: ERROR_DETAIL_TYPE_URL, value: Buffer.from(ErrorDetail.encode(detail).finish()) };
  return { code, message, details: [any] };
}

/** The first `ErrorDetail` among a status's details, if any. Never throws. */
export function errorDetailOf(status: Status): ErrorDetail | undefined {
  for (const any of status.details) {
    if (any.typeUrl !== ERROR_DETAIL_TYPE_URL) continue;
    try {
      return ErrorDetail.decode(any.value);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/**
 * Reads a failed call: from a grpc-js `ServiceError` (or anything with
 * `code`, `details`/`message` and `metadata`). Total: a missing or malformed
 * details trailer gives `detail: undefined`, never an exception.
 */
export function readCallFailure(err: unknown): CallFailure {
  const e = (typeof err === 'object' && err !== null ? err : {}) as { code?: unknown; details?: unknown; message?: unknown; metadata?: Metadata };
  const code = typeof e.code === 'number' ? e.code : 2; // UNKNOWN
  const message = typeof e.details === 'string' ? e.details : typeof e.message === 'string' ? e.message : String(err);
  let detail: ErrorDetail | undefined;
  const raw = typeof e.metadata?.get === 'function' ? e.metadata.get(STATUS_DETAILS_KEY)[0] : undefined;
  if (raw instanceof Uint8Array) {
    try {
      detail = errorDetailOf(Status.decode(raw));
    } catch {
      detail = undefined;
    }
  }
  return { code, message, detail };
}
