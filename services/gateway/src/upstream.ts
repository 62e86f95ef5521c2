import type { IncomingMessage } from 'node:http';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Counter } from '@opentelemetry/api';
import { HttpHeader } from '@tether/protocol';

const tracer = trace.getTracer('tether-gateway');

/** Request headers passed to the upstream. Everything else (Host, Origin, cookies, our session id) stays here. */
const FORWARDED = ['accept', 'content-type', 'authorization', HttpHeader.protocolVersion, 'traceparent', 'tracestate', 'baggage', 'user-agent'];

export function forwardHeaders(req: IncomingMessage, upstreamSessionId: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of FORWARDED) {
    const value = req.headers[name];
    if (typeof value === 'string') out[name] = value;
  }
  if (upstreamSessionId !== undefined && upstreamSessionId !== '') out[HttpHeader.sessionId] = upstreamSessionId;
  return out;
}

export class UpstreamError extends Error {
  override readonly name = 'UpstreamError';
  readonly code = 'upstream_unreachable';
}

/**
 * One HTTP call to an upstream, in a client span whose `traceparent` goes
 * with the request. Network failures become `UpstreamError` naming the URL
 * (never the body) and count in `errors` when given.
 */
export async function callUpstream(
  url: string,
  init: { method: string; headers: Record<string, string>; body?: Buffer; signal?: AbortSignal; errors?: Counter },
): Promise<Response> {
  const span = tracer.startSpan('mcp.upstream', { kind: SpanKind.CLIENT, attributes: { 'http.request.method': init.method, 'server.address': new URL(url).host } });
  const headers = { ...init.headers };
  propagation.inject(trace.setSpan(context.active(), span), headers);
  try {
    const res = await fetch(url, {
      method: init.method,
      headers,
      ...(init.body === undefined ? {} : { body: init.body }),
      ...(init.signal === undefined ? {} : { signal: init.signal }),
    });
    span.setAttribute('http.response.status_code', res.status);
    if (res.status >= 500) init.errors?.add(1, { reason: `status_${res.status}` });
    return res;
  } catch (err) {
    span.setStatus({ code: SpanStatusCode.ERROR });
    if (init.signal?.aborted === true) throw err;
    init.errors?.add(1, { reason: 'unreachable' });
    throw new UpstreamError(`upstream ${url} did not answer: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`, { cause: err });
  } finally {
    // The span covers the wait for the answer's headers; the body is the pump's.
    span.end();
  }
}

export function isEventStream(res: Response): boolean {
  return (res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream');
}

/** Round robin over a route's replicas, for new sessions only: a session stays with its upstream. */
export class UpstreamPicker {
  #next = 0;
  constructor(private readonly upstreams: readonly string[]) {}
  pick(): string {
    const url = this.upstreams[this.#next % this.upstreams.length]!;
    this.#next += 1;
    return url;
  }
}
