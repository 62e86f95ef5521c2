import { randomBytes } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpHeader, isSessionId, ResumeVerdict } from '@tether/protocol';
import type { EventId } from '@tether/protocol';
import { AuditKind, isSessionLogError } from '@tether/session-log';
import type { ResumeResult, SessionRecord } from '@tether/session-log';
import { Meta, wantsPriming } from '../context.js';
import type { GatewayContext } from '../context.js';
import type { Route } from '../config.js';
import { fromLogError, GatewayErrorCode, replyError, replyRefusal, unknownSession } from '../http/reply.js';
import type { Caller } from '../auth/authenticator.js';
import { header } from '../http/request.js';
import type { CallerCredentials } from '../auth/presented-credentials.js';
import { ensureListener } from '../streams/standalone.js';
import type { ListenerResult } from '../streams/standalone.js';
import { takeOverIfOrphaned } from '../streams/takeover.js';
import { passThrough } from './pass-through.js';
import { serveFromLog } from './serve-stream.js';

/** GET: the session's standalone stream, or (with `Last-Event-ID`) a resume of any of its streams, on any instance. */
export async function handleGet(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const sessionId = header(req, HttpHeader.sessionId);
  // No session: nothing of ours to serve; the upstream answers (a modern-only one with 405).
  if (sessionId === undefined) return passThrough(ctx, route, caller, req, res, 'GET');
  const accept = header(req, 'accept') ?? '';
  if (!accept.includes('text/event-stream') && !accept.includes('*/*')) {
    return replyError(res, { status: 406, code: GatewayErrorCode.transport, message: 'Not Acceptable: GET needs Accept: text/event-stream' });
  }
  if (!isSessionId(sessionId)) return replyError(res, { status: 400, code: GatewayErrorCode.invalidRequest, message: 'Bad Request: Mcp-Session-Id is malformed (expected 22 base64url characters)' });
  const { principal } = caller;
  const lastEventId = header(req, HttpHeader.lastEventId);
  if (lastEventId !== undefined) return resume(ctx, route, caller, req, res, sessionId, lastEventId);

  let session: SessionRecord;
  try {
    session = await ctx.log.authorize(sessionId, principal);
  } catch (err) {
    return replyError(res, fromLogError(err));
  }
  if (session.meta[Meta.route] !== route.path) return replyError(res, unknownSession());
  if (ctx.local.deliveriesOf(sessionId) >= ctx.config.maxStreamsPerSession) {
    return replyError(res, { status: 429, code: GatewayErrorCode.transport, message: `too many open streams for this session (limit ${ctx.config.maxStreamsPerSession})` });
  }
  const protocolVersion = header(req, HttpHeader.protocolVersion) ?? session.meta[Meta.protocolVersion];
  const credentials = ctx.credentials.of(caller, protocolVersion);
  const token = randomBytes(8).toString('hex');
  // A newer GET supersedes older ones, on every instance.
  ctx.log.publishControl({ type: 'superseded', sessionId, stream: '0', from: token });
  let listener: ListenerResult;
  try {
    listener = await ensureListener(ctx, session, credentials);
  } catch (err) {
    return replyError(res, fromLogError(err));
  }
  if (listener.state === 'unsupported') {
    return replyError(res, { status: 405, code: GatewayErrorCode.transport, message: 'Method Not Allowed: the upstream offers no GET stream', headers: { allow: 'POST, DELETE' } });
  }
  // Opened before the head is read, so whatever is stored after the head
  // reaches the client without a replay: a tap of the listener's own
  // appends when it runs here, else a reader of the stream's live copies.
  const tap = listener.state === 'running_here' ? ctx.local.writer(sessionId, '0')?.feed?.tap() : undefined;
  const reader = tap === undefined ? ctx.log.openReader(session, '0') : undefined;
  let head;
  try {
    head = await ctx.log.head(sessionId, '0');
  } catch (err) {
    reader?.close();
    return replyError(res, fromLogError(err));
  }
  const from = head === undefined ? { seq: 0, pos: 0 } : { seq: head.seq, pos: head.pos };
  await serveFromLog(ctx, req, res, {
    sessionId,
    stream: '0',
    from,
    ...(tap !== undefined ? { events: (signal, stats) => tap.follow(ctx.log, from, signal, stats) } : reader !== undefined ? { reader } : {}),
    headers: { [HttpHeader.sessionId]: sessionId },
    priming: wantsPriming(protocolVersion),
    ...(head === undefined ? {} : { primeId: head.id }),
    token,
    writer: { current: listener.writer, recheck: async () => (await ensureListener(ctx, session, credentials)).writer },
    conn: ctx.audit.open(sessionId, { kind: AuditKind.get, stream: '0', status: 200, ...(head === undefined ? {} : { cursor: { stream: '0', seq: head.seq, pos: head.pos } }) }),
  });
}

/** DESIGN section 7 on any instance; an unrecoverable cursor terminates the session and answers 404. */
async function resume(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, sessionId: string, lastEventId: string): Promise<void> {
  let result: ResumeResult;
  let writer: string | undefined;
  try {
    result = await ctx.log.resume(sessionId, lastEventId, caller.principal);
    if (result.verdict === 'resumed' && result.session.meta[Meta.route] !== route.path) {
      return replyRefusal(res, 404, ResumeVerdict.unknownSession, 'the session is unknown, closed, or not yours');
    }
    if (result.verdict === 'resumed' && !result.endedAtCursor) {
      // The stream may have lost its writer: take over before serving, so
      // the client's next event comes within a round trip of the takeover.
      // A stream that cannot continue is ended by it with a JSON-RPC error
      // per request it owed; this resume then delivers those (they follow
      // its cursor), and only a later one is refused `abandoned`.
      const protocolVersion = header(req, HttpHeader.protocolVersion) ?? result.session.meta[Meta.protocolVersion];
      writer = await ensureWriter(ctx, result.session, result.stream, ctx.credentials.of(caller, protocolVersion));
    }
  } catch (err) {
    // Closed while we classified or took over: still a verdict on the cursor, not a bare 404.
    if (isSessionLogError(err, 'session_not_found') || isSessionLogError(err, 'session_closed')) {
      return replyRefusal(res, 404, ResumeVerdict.unknownSession, 'the session was closed while the resume was being served');
    }
    return replyError(res, fromLogError(err));
  }
  ctx.logger.info({ sessionId, verdict: result.verdict }, 'resume classified');
  ctx.metrics.resumes.add(1, { verdict: result.verdict });
  trace.getActiveSpan()?.setAttributes({ 'tether.verdict': result.verdict, 'tether.stream': result.verdict === 'resumed' ? result.stream : '' });
  if (result.verdict !== 'resumed') {
    const { verdict, reason } = result;
    // Audit events go only into the caller's own session. `unknown_session`
    // is also another principal's session, or none at all: nothing is
    // recorded. A malformed cursor is refused before the session is looked
    // at (classifyResume), so its event waits for authorize to say the
    // session is the caller's (not awaited: the refusal need not wait).
    const refusal = { kind: AuditKind.resume, verdict, status: verdict === 'malformed' ? 400 : 404, ...auditCursor(result.cursor) };
    if (verdict === 'malformed') {
      if (ctx.audit.enabled) void ctx.log.authorize(sessionId, caller.principal).then(() => ctx.audit.record(sessionId, refusal), () => undefined);
    } else if (verdict !== 'unknown_session') ctx.audit.record(sessionId, refusal);
    if (verdict === 'malformed') return replyRefusal(res, 400, verdict, reason);
    if (verdict !== 'unknown_session') {
      // The cursor cannot be continued: end the session so the client starts a new one.
      await ctx.log.closeSession(sessionId, ctx.config.instanceId).catch(() => false);
      ctx.audit.record(sessionId, { kind: AuditKind.close, reason: verdict });
    }
    return replyRefusal(res, 404, verdict, reason, { ...(result.log ?? {}), lastEventId: result.cursor === undefined ? undefined : lastEventId });
  }
  const accepted = result;
  const cursor = { stream: accepted.stream, seq: accepted.cursor.seq, pos: accepted.cursor.pos };
  if (accepted.nothingLeft) {
    // The stream is complete and the client has all of it. An empty 200
    // stream would make the SDK client reconnect forever (it only counts a
    // *result* as the end of a request); 204 has no body, so it stops.
    ctx.audit.record(sessionId, { kind: AuditKind.resume, stream: accepted.stream, cursor, verdict: accepted.verdict, status: 204 });
    res.writeHead(204, { [HttpHeader.sessionId]: sessionId, [HttpHeader.tetherResume]: ResumeVerdict.resumed });
    return void res.end();
  }
  const protocolVersion = header(req, HttpHeader.protocolVersion) ?? accepted.session.meta[Meta.protocolVersion];
  const credentials = ctx.credentials.of(caller, protocolVersion);
  // A resumed GET stream replaces whatever older GET of the session is still open.
  const token = randomBytes(8).toString('hex');
  if (accepted.stream === '0') ctx.log.publishControl({ type: 'superseded', sessionId, stream: '0', from: token });
  await serveFromLog(ctx, req, res, {
    sessionId,
    token,
    stream: accepted.stream,
    from: accepted.cursor,
    events: (signal, stats) => accepted.events({ signal, stats }),
    replay: true,
    headers: { [HttpHeader.sessionId]: sessionId, [HttpHeader.tetherResume]: ResumeVerdict.resumed },
    priming: wantsPriming(protocolVersion),
    // The resume acknowledgment (`event: resume`, its id the cursor): the SDK
    // client forgets a cursor it did not see on this very response, so this
    // keeps it even if we end before the next event; it also names the seq
    // the stream goes on with (DESIGN, gateway: the resume acknowledgment).
    resumeAck: { cursor: lastEventId, stream: accepted.stream, nextSeq: accepted.cursor.seq + 1 },
    writer: {
      current: writer,
      recheck: () => ensureWriter(ctx, accepted.session, accepted.stream, credentials),
    },
    conn: ctx.audit.open(sessionId, { kind: AuditKind.resume, stream: accepted.stream, cursor, verdict: accepted.verdict, status: 200 }),
  });
}

/** A refused cursor as the audit events keep it: stream, seq, position (never the raw id). */
function auditCursor(cursor: EventId | undefined): { cursor?: { stream: string; seq: number; pos: number } } {
  return cursor === undefined ? {} : { cursor: { stream: cursor.stream, seq: cursor.seq, pos: cursor.pos } };
}

/**
 * Makes sure a stream being resumed has a live writer, taking it over when
 * its writer is gone: the listener for stream `0`, a nested resume for a
 * POST stream. Returns the writer it then has, for the reader's watch.
 */
async function ensureWriter(ctx: GatewayContext, session: SessionRecord, stream: string, credentials: CallerCredentials): Promise<string | undefined> {
  if (stream === '0') return (await ensureListener(ctx, session, credentials)).writer;
  return (await takeOverIfOrphaned(ctx, session, stream, credentials)).writer;
}
