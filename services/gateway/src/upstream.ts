import type { IncomingMessage } from 'node:http';
import { HttpHeader } from '@tether/protocol';

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

/** One HTTP call to an upstream; network failures become `UpstreamError` naming the URL (never the body). */
export async function callUpstream(url: string, init: { method: string; headers: Record<string, string>; body?: Buffer; signal?: AbortSignal }): Promise<Response> {
  try {
    return await fetch(url, {
      method: init.method,
      headers: init.headers,
      ...(init.body === undefined ? {} : { body: init.body }),
      ...(init.signal === undefined ? {} : { signal: init.signal }),
    });
  } catch (err) {
    if (init.signal?.aborted === true) throw err;
    throw new UpstreamError(`upstream ${url} did not answer: ${(err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message}`, { cause: err });
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
