import { HttpHeader } from '@tether/protocol';
import { ResumeGuardError, ResumeGuardErrorCode } from './errors.js';
import { INITIALIZED_NOTIFICATION, protocolVersionOf, withRequestId } from './rpc.js';
import type { JsonRpcId } from './rpc.js';
import type { InitRecord } from './sessions.js';

type BaseFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Headers of an `initialize` POST worth replaying: everything but the session's own. */
export function initHeaders(headers: Headers): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const [k, v] of headers) {
    if (k === HttpHeader.sessionId || k === HttpHeader.lastEventId || k === HttpHeader.protocolVersion) continue;
    out.push([k, v]);
  }
  return out;
}

/**
 * Opens a new session the way the client opened the first one: the same
 * `initialize` body (under a request id of the guard's), then the
 * `notifications/initialized` the spec requires before any other request.
 * Returns the new `Mcp-Session-Id`. Throws `reinitialize_failed`.
 */
export async function openSession(fetchFn: BaseFetch, init: InitRecord, requestId: JsonRpcId, timeoutMs: number): Promise<string> {
  const signal = AbortSignal.timeout(timeoutMs);
  const headers = new Headers(init.headers as Array<[string, string]>);
  headers.set('content-type', 'application/json');
  headers.set('accept', 'application/json, text/event-stream');
  let sessionId: string | undefined;
  try {
    const res = await fetchFn(init.url, { method: 'POST', headers, body: withRequestId(init.body, requestId), signal });
    // An SSE answer ends after the initialize result, so reading it whole is bounded.
    const text = await res.text();
    sessionId = res.headers.get(HttpHeader.sessionId) ?? undefined;
    if (!res.ok || sessionId === undefined) {
      throw new ResumeGuardError(
        ResumeGuardErrorCode.reinitializeFailed,
        `re-initialization failed: initialize answered HTTP ${res.status}${sessionId === undefined ? ' without Mcp-Session-Id' : ''}`,
      );
    }
    const ackHeaders = new Headers(headers);
    ackHeaders.set(HttpHeader.sessionId, sessionId);
    const version = protocolVersionOf(text, res.headers.get('content-type'));
    if (version !== undefined) ackHeaders.set(HttpHeader.protocolVersion, version);
    const ack = await fetchFn(init.url, { method: 'POST', headers: ackHeaders, body: INITIALIZED_NOTIFICATION, signal });
    await ack.body?.cancel();
    if (!ack.ok) {
      throw new ResumeGuardError(
        ResumeGuardErrorCode.reinitializeFailed,
        `re-initialization failed: notifications/initialized answered HTTP ${ack.status}`,
      );
    }
    return sessionId;
  } catch (err) {
    if (err instanceof ResumeGuardError) throw err;
    throw new ResumeGuardError(ResumeGuardErrorCode.reinitializeFailed, 're-initialization failed: the request did not complete', {
      cause: err,
    });
  }
}
