import { context, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Context, Span } from '@opentelemetry/api';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { contextFromTraceparent } from '@tether/telemetry';
import type { GatewayContext } from '../context.js';
import { header } from './request.js';

/**
 * The server span of one HTTP request, parented on the caller's
 * `traceparent`. It ends when the response is finished or the client leaves,
 * so a long SSE answer is one span covering its whole life.
 */
export function startRequestSpan(ctx: GatewayContext, req: IncomingMessage, res: ServerResponse, route: string): { span: Span; ctx: Context } {
  const parent = contextFromTraceparent(header(req, 'traceparent'));
  const span = ctx.tracer.startSpan(
    'mcp.request',
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': req.method ?? '', 'url.path': route, 'tether.route': route, 'tether.instance': ctx.config.instanceId } },
    parent,
  );
  // A span nobody records (no SDK started) has nothing to end: no listener per request for it.
  if (!span.isRecording()) return { span, ctx: trace.setSpan(parent, span) };
  const end = (): void => {
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  };
  res.once('close', end);
  return { span, ctx: trace.setSpan(parent, span) };
}

/**
 * MCP carries trace context in `params._meta.traceparent` too; when the HTTP
 * header did not bring one, a child span continues the message's own trace.
 */
export function withMessageTrace<T>(ctx: GatewayContext, traceparent: string | undefined, name: string, fn: () => Promise<T>): Promise<T> {
  if (traceparent === undefined) return fn();
  const parent = contextFromTraceparent(traceparent, context.active());
  const span = ctx.tracer.startSpan(name, { kind: SpanKind.INTERNAL }, parent);
  return context.with(trace.setSpan(parent, span), fn).finally(() => span.end());
}
