import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpHeader, isSessionId } from '@tether/protocol';
import { AuditKind } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { Meta } from '../context.js';
import type { GatewayContext } from '../context.js';
import type { Route } from '../config.js';
import { fromLogError, GatewayErrorCode, replyError, unknownSession } from '../http/reply.js';
import type { Caller } from '../auth/authenticator.js';
import { header } from '../http/request.js';
import { callUpstream, forwardHeaders } from '../upstream.js';
import { passThrough } from './pass-through.js';

/** DELETE: forwarded, then the session is closed on every instance and its log purged. */
export async function handleDelete(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const sessionId = header(req, HttpHeader.sessionId);
  // No session: nothing of ours to end; the upstream answers (a modern-only one with 405).
  if (sessionId === undefined) return passThrough(ctx, route, caller, req, res, 'DELETE');
  if (!isSessionId(sessionId)) return replyError(res, { status: 400, code: GatewayErrorCode.invalidRequest, message: 'Bad Request: Mcp-Session-Id is malformed (expected 22 base64url characters)' });
  let session: SessionRecord;
  try {
    session = await ctx.log.authorize(sessionId, caller.principal);
  } catch (err) {
    return replyError(res, fromLogError(err));
  }
  if (session.meta[Meta.route] !== route.path) return replyError(res, unknownSession());
  try {
    const answer = await callUpstream(session.meta[Meta.upstream]!, { method: 'DELETE', headers: forwardHeaders(req, caller, session.meta[Meta.upstreamSessionId]), errors: ctx.metrics.upstreamErrors });
    await answer.cancel();
  } catch (err) {
    // The upstream may be gone; our session ends regardless.
    ctx.logger.warn({ sessionId, err: (err as Error).message }, 'upstream DELETE failed');
  }
  try {
    await ctx.log.closeSession(sessionId, ctx.config.instanceId);
  } catch (err) {
    return replyError(res, fromLogError(err));
  }
  ctx.local.endSession(sessionId);
  ctx.audit.record(sessionId, { kind: AuditKind.delete, status: 200 });
  ctx.logger.info({ sessionId }, 'session deleted');
  res.writeHead(200, { 'content-length': 0 });
  res.end();
}
