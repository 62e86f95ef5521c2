import type { ServerResponse } from 'node:http';
import { HttpHeader } from '@tether/protocol';
import type { ResumeVerdict } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';

/**
 * JSON-RPC error codes the gateway answers with. -32000..-32099 is the range
 * JSON-RPC leaves to servers; the SDKs use -32000 for transport errors.
 */
export const GatewayErrorCode = {
  transport: -32000,
  resumeRefused: -32001,
  upstream: -32002,
  tooLarge: -32003,
  unavailable: -32004,
  tooManySessions: -32005,
  /** 401 and 403 of `--auth jwt|introspect`: the body names the problem, `data.error` the RFC 6750 code. */
  unauthorized: -32006,
  forbidden: -32007,
  parse: -32700,
  invalidRequest: -32600,
} as const;

export interface ErrorReply {
  readonly status: number;
  readonly code: number;
  readonly message: string;
  readonly data?: Readonly<Record<string, unknown>>;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Sends a JSON-RPC error body. Safe to call twice or after headers went out (it then just ends). */
export function replyError(res: ServerResponse, reply: ErrorReply): void {
  sendJson(res, reply.status, { jsonrpc: '2.0', id: null, error: { code: reply.code, message: reply.message, ...(reply.data === undefined ? {} : { data: reply.data }) } }, reply.headers);
}

/** One JSON-RPC message as a whole JSON answer. Safe to call twice or after headers went out (it then just ends). */
export function sendJson(res: ServerResponse, status: number, message: unknown, headers: Readonly<Record<string, string>> = {}): void {
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  const body = JSON.stringify(message);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers });
  res.end(body);
}

/** A refused resume: the verdict in the header and the body, so people and programs both see it. */
export function replyRefusal(
  res: ServerResponse,
  status: number,
  verdict: ResumeVerdict,
  reason: string,
  data: Readonly<Record<string, unknown>> = {},
): void {
  replyError(res, {
    status,
    code: GatewayErrorCode.resumeRefused,
    message: `resume refused (${verdict}): ${reason}`,
    data: { verdict, ...data },
    headers: { [HttpHeader.tetherResume]: verdict },
  });
}

export const unknownSession = (): ErrorReply => ({
  status: 404,
  code: GatewayErrorCode.transport,
  message: 'Session not found: initialize a new session',
});

/** Maps a log error to what the client sees; unknown failures become 503 without internals. */
export function fromLogError(err: unknown): ErrorReply {
  if (isSessionLogError(err)) {
    switch (err.code) {
      case 'session_not_found':
      case 'session_closed':
        return unknownSession();
      case 'invalid_argument':
        return { status: 400, code: GatewayErrorCode.invalidRequest, message: err.message };
      case 'payload_too_large':
        return { status: 413, code: GatewayErrorCode.tooLarge, message: err.message };
      case 'too_many_sessions':
        return { status: 429, code: GatewayErrorCode.tooManySessions, message: `too many sessions: ${err.message}; close one (DELETE) or let one idle out`, ...(err.fields.detail === undefined ? {} : { data: err.fields.detail }) };
      default:
        break;
    }
  }
  return { status: 503, code: GatewayErrorCode.unavailable, message: 'the session log is unavailable; retry shortly', headers: { 'retry-after': '1' } };
}
