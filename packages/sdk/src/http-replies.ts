import { HttpHeader } from '@tether/protocol';
import type { ResumeVerdict } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import { JsonRpcCode } from './wire.js';

/** A JSON-RPC error body with `id: null`, the shape both SDKs answer transport errors with. */
export function jsonRpcError(status: number, code: number, message: string, options: { data?: Readonly<Record<string, unknown>>; headers?: Readonly<Record<string, string>> } = {}): Response {
  const error = { code, message, ...(options.data === undefined ? {} : { data: options.data }) };
  return new Response(JSON.stringify({ jsonrpc: '2.0', error, id: null }), { status, headers: { 'content-type': 'application/json', ...options.headers } });
}

/** What both SDKs answer for a session they do not hold (`validateSession`): 404, -32001. Another principal's session looks exactly like this. */
export function sessionNotFound(): Response {
  return jsonRpcError(404, JsonRpcCode.sessionNotFound, 'Session not found');
}

/**
 * A refused resume: an error status, the verdict in `Tether-Resume` and in
 * the body, and the log's reason, so people and programs both see why. The
 * statuses are the gateway's (design.md; `ResumeVerdict` table): 400 for a
 * cursor that does not parse, 404 for every other refusal.
 */
export function resumeRefused(verdict: ResumeVerdict, reason: string): Response {
  return jsonRpcError(verdict === 'malformed' ? 400 : 404, JsonRpcCode.resumeRefused, `resume refused (${verdict}): ${reason}`, {
    data: { verdict },
    headers: { [HttpHeader.tetherResume]: verdict },
  });
}

/** Log failures as the client sees them: too many sessions is the principal's to fix; anything else is a 503 without internals. */
export function fromLogError(err: unknown): Response {
  if (isSessionLogError(err, 'session_not_found') || isSessionLogError(err, 'session_closed')) return sessionNotFound();
  if (isSessionLogError(err, 'too_many_sessions')) {
    return jsonRpcError(429, JsonRpcCode.transport, `too many sessions: ${err.message}; close one (DELETE) or let one idle out`);
  }
  return jsonRpcError(503, JsonRpcCode.unavailable, 'the session log is unavailable; retry shortly', { headers: { 'retry-after': '1' } });
}
