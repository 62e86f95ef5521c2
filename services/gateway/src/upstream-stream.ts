import { request as httpRequest } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { context, propagation, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import type { Counter } from '@opentelemetry/api';
import type { CallerCredentials } from './auth/presented-credentials.js';
import { upstreamLabel, UpstreamError } from './upstream.js';

const tracer = trace.getTracer('tether-gateway');

/** An upstream GET answer whose body is read for as long as the stream lasts. */
export interface UpstreamStream {
  readonly status: number;
  /** The answer is `text/event-stream`. */
  readonly eventStream: boolean;
  /** The body as it arrives; ends when the upstream ends it, throws when the connection breaks or `signal` aborts. */
  readonly body: AsyncIterable<Uint8Array>;
  /** Stops reading and closes the connection (for answers that will not be read). */
  close(): void;
}

/**
 * A GET to an upstream held open for its SSE body: the session's listener
 * (stream `0`) and nested resumes. On `node:http` rather than `fetch`: one
 * of these stays open per session for the session's whole life, and
 * undici's Request, Response, Headers and WHATWG body stream per call were
 * about half of an idle stream's memory (docs/benchmarks.md). Nor on
 * `callUpstream`'s undici pool: an open GET held through undici's `request()`
 * costs the same heap as this one (10.0 vs 9.7 KiB measured, socket
 * included), and every stream held there would be a busy client that each
 * short call's pool scans past. So these stay on `node:http`'s global agent
 * (keep-alive since Node 19), apart from the short calls. Same span and
 * error contract as `callUpstream`: a network failure is an `UpstreamError`
 * naming the URL, counted in `errors` when given.
 */
export function openUpstreamStream(url: string, headers: Record<string, string>, signal: AbortSignal, errors?: Counter): Promise<UpstreamStream> {
  const target = new URL(url);
  const span = tracer.startSpan('mcp.upstream', { kind: SpanKind.CLIENT, attributes: { 'http.request.method': 'GET', 'server.address': target.host } });
  const sent = { ...headers };
  propagation.inject(trace.setSpan(context.active(), span), sent);
  const request = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<UpstreamStream>((resolve, reject) => {
    let answered = false;
    const req = request(target, { method: 'GET', headers: sent, signal }, (res: IncomingMessage) => {
      answered = true;
      span.setAttribute('http.response.status_code', res.statusCode ?? 0);
      // The span covers the wait for the answer's headers; the body is the pump's.
      span.end();
      const status = res.statusCode ?? 0;
      if (status >= 500) errors?.add(1, { reason: `status_${status}` });
      resolve({
        status,
        // We send no Accept-Encoding, so an encoded body is not one we can parse.
        eventStream: String(res.headers['content-type'] ?? '').toLowerCase().startsWith('text/event-stream') && ['', 'identity'].includes(String(res.headers['content-encoding'] ?? '').toLowerCase()),
        body: res,
        close: () => res.destroy(),
      });
    });
    // `on`, not `once`: a connection that breaks mid-body errors the request
    // again; the body's reader sees that break itself.
    req.on('error', (err) => {
      if (answered) return;
      answered = true;
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      if (signal.aborted) return reject(err);
      errors?.add(1, { reason: 'unreachable' });
      reject(new UpstreamError(`upstream ${upstreamLabel(url)} did not answer: ${err.message}`, { cause: err }));
    });
    req.end();
  });
}

/** Renewed credentials a refused reconnect tries before it gives up: each needs the client to present new ones. */
const MAX_RENEWALS = 3;

/**
 * `openUpstreamStream` for a call the gateway makes on its own, with the
 * caller's newest credentials: an upstream that refuses them (401, the
 * token the upstream was given expired) is asked again once the client has
 * presented newer ones on this instance (`--upstream-auth forward`), rather
 * than the stream ending while the client holds a good token. A 401 is
 * answered as it came when no renewal comes (bounded by
 * `CallerCredentials.renewed`).
 */
export async function openStreamAsCaller(url: string, headers: Record<string, string>, credentials: CallerCredentials, signal: AbortSignal, errors?: Counter): Promise<UpstreamStream> {
  let used = credentials.current();
  let answer = await openUpstreamStream(url, { ...used, ...headers }, signal, errors);
  // Without an Authorization of the caller's (`--upstream-auth strip`) no token the client
  // presents would change what is sent: a 401 then is final, not worth a wait.
  if (used.authorization === undefined) return answer;
  for (let renewals = 0; answer.status === 401 && renewals < MAX_RENEWALS; renewals += 1) {
    if (!(await credentials.renewed(used, signal))) return answer;
    answer.close();
    used = credentials.current();
    answer = await openUpstreamStream(url, { ...used, ...headers }, signal, errors);
  }
  return answer;
}
