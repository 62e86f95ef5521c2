import type { handleUnaryCall, ServerUnaryCall } from '@grpc/grpc-js';
import { isSessionLogError } from '@tether/session-log';
import type { Logger } from 'pino';
import type { Authenticator } from './auth.js';
import { CursorServiceError, toGrpcStatus } from './errors.js';

/** What a unary handler body gets besides its request. */
export interface UnaryContext {
  /** The authenticated caller (token name, `cert:<CN>` or `anonymous`). */
  readonly caller: string;
  /** The call's `traceparent` metadata, if any. */
  readonly traceparent: string | undefined;
  /** True once the client cancelled or the deadline passed: stop doing work. */
  cancelled(): boolean;
}

/**
 * Adapts an async body to grpc-js: authenticates, maps failures to statuses
 * with details, and logs what is not an expected domain error. After a
 * deadline grpc-js has already answered DEADLINE_EXCEEDED; a late result is
 * dropped by grpc-js, and bodies that loop check `cancelled()`.
 */
export function unary<Req, Res>(auth: Authenticator, logger: Logger, rpc: string, body: (req: Req, ctx: UnaryContext) => Promise<Res>): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback) => {
    let ctx: UnaryContext;
    try {
      const tp = call.metadata.get('traceparent')[0];
      ctx = {
        caller: auth.requireCaller(call.metadata, call.getAuthContext()),
        traceparent: typeof tp === 'string' ? tp : undefined,
        cancelled: () => call.cancelled,
      };
    } catch (err) {
      callback(toGrpcStatus(err));
      return;
    }
    body(call.request, ctx).then(
      (response) => callback(null, response),
      (err: unknown) => {
        if (isSessionLogError(err, 'log_unavailable')) logger.warn({ rpc, code: err.code, reason: err.message }, 'log unavailable');
        else if (!isSessionLogError(err) && !(err instanceof CursorServiceError)) logger.error({ err, rpc }, 'call failed');
        callback(toGrpcStatus(err));
      },
    );
  };
}
