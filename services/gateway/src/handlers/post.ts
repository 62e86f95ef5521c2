import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpHeader, isSessionId } from '@tether/protocol';
import { AuditKind, isSessionLogError } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { Meta, wantsPriming } from '../context.js';
import type { GatewayContext } from '../context.js';
import type { Route } from '../config.js';
import { fromLogError, GatewayErrorCode, replyError, unknownSession } from '../http/reply.js';
import type { Caller } from '../auth/authenticator.js';
import { BodyError, header, isInitialize, isRequest, parseMessages, readBody } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import { withMessageTrace } from '../http/tracing.js';
import { closeUnusedStream, openPostStream, startPostStream } from '../streams/post-stream.js';
import type { OpenedStream } from '../streams/post-stream.js';
import { callUpstream, upstreamLabel, forwardHeaders, isEventStream, isIdentity } from '../upstream.js';
import type { UpstreamAnswer } from '../upstream.js';
import { passThrough, tokenAuth, upstreamFailure, upstreamRefusedCaller } from './pass-through.js';
import { serveFromLog } from './serve-stream.js';
import { isModernRequest, serveModern } from '../modern/dispatch.js';

export async function handlePost(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let body: Buffer;
  try {
    body = await readBody(req, ctx.config.maxBodyBytes);
  } catch (err) {
    if (err instanceof BodyError) return replyError(res, err.reply);
    throw err;
  }
  const sessionId = header(req, HttpHeader.sessionId);
  if (sessionId === undefined) {
    const parsed = parseMessages(body);
    if (parsed.ok && parsed.messages.some(isInitialize)) return initialize(ctx, route, caller, req, res, body, parsed.messages);
    if (ctx.tasks !== undefined && parsed.ok && parsed.messages.length === 1 && isModernRequest(req)) return serveModern(ctx, ctx.tasks, route, caller, req, res, body, parsed.messages[0]!);
    // No session and no initialize: the stateless era (2026-07-28) or a
    // client error. Either way the upstream decides; we pass it through.
    return passThrough(ctx, route, caller, req, res, 'POST', body);
  }
  if (!isSessionId(sessionId)) {
    return replyError(res, { status: 400, code: GatewayErrorCode.invalidRequest, message: 'Bad Request: Mcp-Session-Id is malformed (expected 22 base64url characters)' });
  }
  const parsed = parseMessages(body);
  if (!parsed.ok) return replyError(res, parsed.reply);
  let session: SessionRecord;
  try {
    session = await ctx.log.authorize(sessionId, caller.principal);
  } catch (err) {
    return replyError(res, fromLogError(err));
  }
  if (session.meta[Meta.route] !== route.path) return replyError(res, unknownSession());
  touchLater(ctx, session);
  // MCP may carry trace context in the message itself (params._meta.traceparent).
  const metaTraceparent = header(req, 'traceparent') === undefined ? messageTraceparent(parsed.messages) : undefined;
  await withMessageTrace(ctx, metaTraceparent, 'mcp.message', () => forward(ctx, session, caller, req, res, body, parsed.messages));
}

function messageTraceparent(messages: JsonRpcMessage[]): string | undefined {
  for (const m of messages) {
    const value = (m.params as { _meta?: { traceparent?: unknown } } | undefined)?._meta?.traceparent;
    if (typeof value === 'string') return value;
  }
  return undefined;
}

async function initialize(ctx: GatewayContext, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, messages: JsonRpcMessage[]): Promise<void> {
  const upstream = ctx.pickers.get(route.path)!.pick();
  const abort = new AbortController();
  let answer: UpstreamAnswer;
  try {
    answer = await callUpstream(upstream, { method: 'POST', headers: forwardHeaders(req, caller, undefined), body, signal: abort.signal, errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    return replyError(res, upstreamFailure(err));
  }
  if (answer.status < 200 || answer.status > 299) return relay(ctx, route, res, answer, {});
  const init = messages.find(isInitialize);
  const requested = (init?.params as { protocolVersion?: unknown } | undefined)?.protocolVersion;
  let session: SessionRecord;
  try {
    session = await ctx.log.createSession(caller.principal, {
      [Meta.route]: route.path,
      [Meta.upstream]: upstream,
      [Meta.upstreamSessionId]: answer.header(HttpHeader.sessionId) ?? '',
      [Meta.protocolVersion]: typeof requested === 'string' ? requested.slice(0, 32) : '',
    });
    // The GET stream always has a head, so a fresh GET can prime its client with a real cursor.
    await ctx.log.append(session.sessionId, '0', 'prime', new Uint8Array(), { opensStream: session });
  } catch (err) {
    abort.abort();
    if (isSessionLogError(err, 'too_many_sessions')) ctx.metrics.sessionsRefused.add(1, { reason: err.code });
    // The upstream made a session that no client will ever name: end it there too.
    const upstreamSessionId = answer.header(HttpHeader.sessionId);
    if (upstreamSessionId !== undefined) {
      void callUpstream(upstream, { method: 'DELETE', headers: forwardHeaders(req, caller, upstreamSessionId), errors: ctx.metrics.upstreamErrors })
        .then((r) => r.cancel())
        .catch(() => undefined);
    }
    return replyError(res, fromLogError(err));
  }
  ctx.logger.info({ sessionId: session.sessionId, route: route.path, upstream: upstreamLabel(upstream) }, 'session initialized');
  await answerFromUpstream(ctx, session, caller, req, res, answer, messages.filter(isRequest).map((m) => JSON.stringify(m.id)), abort, upstream, undefined, AuditKind.initialize);
}

async function forward(ctx: GatewayContext, session: SessionRecord, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, messages: JsonRpcMessage[]): Promise<void> {
  const abort = new AbortController();
  const upstream = session.meta[Meta.upstream]!;
  const requestIds = messages.filter(isRequest).map((m) => JSON.stringify(m.id));
  const calling = callUpstream(upstream, {
    method: 'POST',
    headers: forwardHeaders(req, caller, session.meta[Meta.upstreamSessionId]),
    body,
    signal: abort.signal,
    errors: ctx.metrics.upstreamErrors,
  });
  // An upstream that answered its last requests with a stream will likely do
  // so again: the stream's opening prime goes to the log while the upstream
  // works (after the request went out), so the client's first byte waits for
  // the upstream alone, not for the upstream and then an append.
  const opened =
    requestIds.length > 0 && streamingUpstreams.get(upstream) === true && ctx.local.deliveriesOf(session.sessionId) < ctx.config.maxStreamsPerSession
      ? openPostStream(ctx, session, requestIds)
      : undefined;
  let answer: UpstreamAnswer;
  try {
    answer = await calling;
  } catch (err) {
    if (opened !== undefined) closeUnusedStream(ctx, session, opened);
    return replyError(res, upstreamFailure(err));
  }
  if (answer.status === 404) {
    // The upstream forgot the session: so do we, everywhere, and the client re-initializes.
    await answer.cancel();
    // The purge below must come after a prime still in flight, or that prime would outlive it.
    await opened?.prime.catch(() => undefined);
    await ctx.log.closeSession(session.sessionId, ctx.config.instanceId).catch(() => false);
    ctx.audit.record(session.sessionId, { kind: AuditKind.close, status: 404, reason: 'upstream_404' });
    return replyError(res, unknownSession());
  }
  await answerFromUpstream(ctx, session, caller, req, res, answer, requestIds, abort, upstream, opened, AuditKind.post);
}

/**
 * Upstreams (by URL) whose last answer to a POST with requests was an event
 * stream (true) or something else (false): the hint that opens a stream
 * before the answer. A wrong guess costs two appends nobody waits for.
 */
const streamingUpstreams = new Map<string, boolean>();
const MAX_STREAMING_HINTS = 1_024;

function noteAnswer(upstream: string, streamed: boolean): void {
  if (streamingUpstreams.get(upstream) === streamed) return;
  if (streamingUpstreams.size >= MAX_STREAMING_HINTS) streamingUpstreams.clear();
  streamingUpstreams.set(upstream, streamed);
}

/** JSON and 202 answers pass through; an SSE answer becomes a logged stream served from the log. */
async function answerFromUpstream(
  ctx: GatewayContext,
  session: SessionRecord,
  caller: Caller,
  req: IncomingMessage,
  res: ServerResponse,
  answer: UpstreamAnswer,
  requestIds: readonly string[],
  abort: AbortController,
  upstream: string,
  opened: OpenedStream | undefined,
  kind: AuditKind,
): Promise<void> {
  const ours = { [HttpHeader.sessionId]: session.sessionId };
  const unused = (): void => {
    if (opened !== undefined) closeUnusedStream(ctx, session, opened);
  };
  if (!isIdentity(answer) && (answer.header('content-type') ?? '').toLowerCase().startsWith('text/event-stream')) {
    // We asked for no encoding: an encoded event stream can be neither
    // recorded nor relayed whole (it may stream for minutes).
    abort.abort();
    unused();
    return replyError(res, { status: 502, code: GatewayErrorCode.upstream, message: `upstream answered with an encoded event stream (content-encoding: ${answer.header('content-encoding')!.slice(0, 32)}) though none was asked for` });
  }
  const streamed = isEventStream(answer) && answer.status === 200;
  if (requestIds.length > 0 && answer.status >= 200 && answer.status <= 299) noteAnswer(upstream, streamed);
  if (!streamed) {
    unused();
    ctx.audit.record(session.sessionId, { kind, status: answer.status });
    return relay(ctx, { path: session.meta[Meta.route]! }, res, answer, ours);
  }
  if (ctx.local.deliveriesOf(session.sessionId) >= ctx.config.maxStreamsPerSession) {
    abort.abort();
    unused();
    return replyError(res, { status: 429, code: GatewayErrorCode.transport, message: `too many open streams for this session (limit ${ctx.config.maxStreamsPerSession})` });
  }
  const protocolVersion = header(req, HttpHeader.protocolVersion) ?? session.meta[Meta.protocolVersion];
  let started: Awaited<ReturnType<typeof startPostStream>>;
  try {
    started = await startPostStream(ctx, session, answer, requestIds, abort, ctx.credentials.of(caller, protocolVersion), opened ?? openPostStream(ctx, session, requestIds));
  } catch (err) {
    abort.abort();
    return replyError(res, fromLogError(err));
  }
  await serveFromLog(ctx, req, res, {
    sessionId: session.sessionId,
    stream: started.stream,
    from: { seq: 0, pos: 0 },
    events: started.events,
    headers: ours,
    priming: wantsPriming(protocolVersion),
    conn: ctx.audit.open(session.sessionId, { kind, stream: started.stream, status: 200 }),
  });
}

/**
 * Copies a non-stream upstream answer to the client, replacing the
 * upstream's session id with ours. With `--auth jwt|introspect` the
 * upstream's challenge is not relayed, and its 401 becomes the route's own
 * (`upstreamRefusedCaller`).
 */
async function relay(ctx: GatewayContext, route: Pick<Route, 'path'>, res: ServerResponse, answer: UpstreamAnswer, extra: Record<string, string>): Promise<void> {
  const refused = upstreamRefusedCaller(ctx, route, answer.status);
  if (refused !== undefined) {
    await answer.cancel();
    return replyError(res, refused);
  }
  const headers: Record<string, string> = { ...extra };
  // Content-Encoding too: the body is the upstream's bytes, decoded by nobody here.
  for (const name of ['content-type', 'content-encoding', HttpHeader.protocolVersion, ...(tokenAuth(ctx) ? [] : ['www-authenticate']), 'retry-after']) {
    const value = answer.header(name);
    if (value !== undefined) headers[name] = value;
  }
  const payload = await answer.bytes();
  res.writeHead(answer.status, { ...headers, 'content-length': payload.length });
  res.end(payload);
}

/** Restarts the idle clock at most every tenth of the idle timeout: not a write per request. */
function touchLater(ctx: GatewayContext, session: SessionRecord): void {
  if (Date.now() - session.touchedAtMs < ctx.config.sessionIdleMs / 10) return;
  ctx.log.touchSession(session.sessionId).catch(() => undefined);
}
