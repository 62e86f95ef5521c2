import { status } from '@grpc/grpc-js';
import type { handleUnaryCall, ServerUnaryCall } from '@grpc/grpc-js';
import { context } from '@opentelemetry/api';
import { isSessionLogError } from '@tether/session-log';
import type { Logger } from 'pino';
import type { Authenticator } from './auth.js';
import { CursorServiceError, toGrpcStatus } from './errors.js';
import { auditedByCaller } from './audit.js';
import { assertDecoded } from './decode.js';
import { startCallSpan } from './tracing.js';

/** What a unary handler body gets besides its request. */
export interface UnaryContext {
  /** The authenticated caller (token name, `cert:<CN>` or `anonymous`). */
  readonly caller: string;
  /**
   * The trace context to store with appended events: the call's server
   * span (a child of its `traceparent` metadata), or that metadata as is
   * when telemetry is off.
   */
  readonly traceparent: string | undefined;
  /** True once the client cancelled or the deadline passed: stop doing work. */
  cancelled(): boolean;
  /** The caller records its own audit events (`tether-audit: self` metadata): the service records none for this call. */
  readonly auditedByCaller: boolean;
}

/**
 * Adapts an async body to grpc-js: a server span parented on the call's
 * `traceparent` (the body runs in its context), authentication, failures
 * mapped to statuses with details, and a log line for what is not an
 * expected domain error. After a deadline grpc-js has already answered
 * DEADLINE_EXCEEDED; a late result is dropped by grpc-js, and bodies that
 * loop check `cancelled()`.
 */
export function unary<Req, Res>(auth: Authenticator, logger: Logger, rpc: string, body: (req: Req, ctx: UnaryContext) => Promise<Res>): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback) => {
    const traced = startCallSpan(rpc, call.metadata);
    const fail = (err: unknown): void => {
      const failure = toGrpcStatus(err);
      callback(failure);
      traced.end(call.cancelled ? status.CANCELLED : failure.code);
    };
    context.with(traced.ctx, () => {
      let ctx: UnaryContext;
      try {
        ctx = {
          caller: auth.requireCaller(call.metadata, call.getAuthContext()),
          traceparent: traced.traceparent,
          cancelled: () => call.cancelled,
          auditedByCaller: auditedByCaller(call.metadata),
        };
      } catch (err) {
        fail(err);
        return;
      }
      traced.span.setAttribute('tether.caller', ctx.caller);
      try {
        assertDecoded(call.request, rpc);
      } catch (err) {
        fail(err);
        return;
      }
      body(call.request, ctx).then(
        (response) => {
          callback(null, response);
          traced.end(call.cancelled ? status.CANCELLED : status.OK);
        },
        (err: unknown) => {
          if (isSessionLogError(err, 'log_unavailable')) logger.warn({ rpc, code: err.code, reason: err.message }, 'log unavailable');
          else if (!isSessionLogError(err) && !(err instanceof CursorServiceError)) logger.error({ err, rpc }, 'call failed');
          fail(err);
        },
      );
    });
  };
}
