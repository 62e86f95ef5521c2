import { status } from '@grpc/grpc-js';
import type { Metadata } from '@grpc/grpc-js';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Attributes, Context, Span } from '@opentelemetry/api';
import { contextFromTraceparent, traceparentOf } from '@tether/telemetry';

/** The fully qualified name of the cursor service (span names, health, reflection). */
export const CURSOR_SERVICE = 'tether.cursor.v1.CursorService';

const tracer = trace.getTracer('tether-session-log');

/**
 * Statuses that mean the server failed, per the OpenTelemetry conventions
 * for gRPC server spans. A refusal (NOT_FOUND, FAILED_PRECONDITION…) is a
 * correct answer, not a failed span.
 */
const SERVER_ERRORS: ReadonlySet<status> = new Set([status.UNKNOWN, status.DEADLINE_EXCEEDED, status.UNIMPLEMENTED, status.INTERNAL, status.UNAVAILABLE, status.DATA_LOSS]);

/** The server span of one call and the context its handler runs in. */
export interface CallSpan {
  readonly span: Span;
  /** The span's context: handlers run in it, so logs carry its trace id. */
  readonly ctx: Context;
  /**
   * The trace context to store with events appended by this call: the
   * span's own (so a stored event links back to the Append that wrote it),
   * else the caller's `traceparent` metadata when no SDK is running.
   */
  readonly traceparent: string | undefined;
  /** Records the final status and ends the span; later calls do nothing. */
  end(code: status, attributes?: Attributes): void;
}

/**
 * Starts the server span of a call to `method` (`Append`) of `service`,
 * parented on the `traceparent` in its metadata and on nothing else: a call
 * is never attributed to whatever context happened to be active in the
 * server.
 */
export function startCallSpan(method: string, metadata: Metadata, service: string = CURSOR_SERVICE): CallSpan {
  const value = metadata.get('traceparent')[0];
  const incoming = typeof value === 'string' && value !== '' ? value : undefined;
  const parent = contextFromTraceparent(incoming, ROOT_CONTEXT);
  const span = tracer.startSpan(
    `${service}/${method}`,
    { kind: SpanKind.SERVER, attributes: { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method } },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  let ended = false;
  return {
    span,
    ctx,
    traceparent: traceparentOf(ctx) ?? incoming,
    end(code, attributes) {
      if (ended) return;
      ended = true;
      if (attributes !== undefined) span.setAttributes(attributes);
      span.setAttribute('rpc.grpc.status_code', code);
      if (SERVER_ERRORS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR, message: status[code] });
      span.end();
    },
  };
}

/** A call refused before any handler ran (the auth interceptor): a span of its own, so refusals show in traces too. */
export function recordRefusedCall(path: string, metadata: Metadata, code: status): void {
  // grpc-js paths are `/package.Service/Method`.
  const [, service = 'unknown', method = 'unknown'] = path.split('/');
  startCallSpan(method, metadata, service).end(code);
}
