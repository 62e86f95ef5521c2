import { status } from '@grpc/grpc-js';
import type { ServerWritableStream } from '@grpc/grpc-js';
import { context, trace } from '@opentelemetry/api';
import { controlTypeFromSpelling, ResumeVerdict as ProtoVerdict } from '@tether/cursor-proto';
import type { FollowRequest, FollowResponse, ResumeRequest, ResumeResponse, WatchControlRequest, WatchControlResponse } from '@tether/cursor-proto';
import { decodeEventId, ResumeVerdict } from '@tether/protocol';
import { createFollowStats, createSubjects } from '@tether/session-log';
import type { ControlMessage, Cursor, LogEvent, Refusal, ResumeResult, SessionLog } from '@tether/session-log';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import { auditedByCaller } from './audit.js';
import type { ServiceAudit } from './audit.js';
import { assertDecoded } from './decode.js';
import type { Authenticator } from './auth.js';
import { countOf, sessionIdOf, streamIdOf, toProtoEvent, toProtoSession } from './convert.js';
import { CursorServiceError, invalid, refusalStatus, ServiceErrorCode, toGrpcStatus } from './errors.js';
import type { CallerScope, StreamLimiter } from './scope.js';
import { principalOf } from './sessions.js';
import { startCallSpan } from './tracing.js';

/** Control messages a watcher may have queued before it is ended as too slow. */
const MAX_CONTROL_BACKLOG = 256;

export interface StreamDeps {
  readonly log: SessionLog;
  readonly auth: Authenticator;
  readonly scope: CallerScope;
  readonly limiter: StreamLimiter;
  readonly logger: Logger;
  readonly metrics: TetherMetrics;
  /** The service's own audit events (a Resume's verdict and cursor). */
  readonly audit: ServiceAudit;
}

/**
 * Writes one message, then waits while grpc-js says the call is not ready
 * (`write()` returned false) until it drains or the call ends. This is the
 * whole of the flow control: the next event is not even read from the log
 * until the previous one fits into the call's buffer, so a slow reader costs
 * a few messages of memory, not its whole backlog. Resolves true when it
 * had to wait (Resume counts these: `readerWaits` in its "resume ended").
 */
export async function send<T>(call: ServerWritableStream<unknown, T>, message: T, signal: AbortSignal): Promise<boolean> {
  if (call.write(message)) return false;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      call.off('drain', done);
      signal.removeEventListener('abort', done);
      resolve();
    };
    call.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
    if (signal.aborted) done();
  });
  return true;
}

/**
 * Runs a server-streaming handler in a server span parented on the call's
 * `traceparent` (the span lasts as long as the stream): authenticates,
 * counts the stream against the caller's limit, aborts on cancellation or
 * deadline, and ends the call with a mapped status on failure.
 */
export function streaming<Req, Res>(deps: StreamDeps, name: string, body: (call: ServerWritableStream<Req, Res>, caller: string, signal: AbortSignal) => Promise<void>) {
  return (call: ServerWritableStream<Req, Res>): void => {
    const traced = startCallSpan(name, call.metadata);
    const abort = new AbortController();
    call.on('cancelled', () => abort.abort());
    let release: (() => void) | undefined;
    const run = async (): Promise<void> => {
      const caller = deps.auth.requireCaller(call.metadata, call.getAuthContext());
      traced.span.setAttribute('tether.caller', caller);
      assertDecoded(call.request, name);
      release = deps.limiter.acquire(caller);
      deps.metrics.streamsOpen.add(1, { 'rpc.method': name });
      await body(call, caller, abort.signal);
      if (!abort.signal.aborted) call.end();
    };
    let code: status = status.OK;
    context
      .with(traced.ctx, run)
      .catch((err: unknown) => {
        if (abort.signal.aborted) return;
        if (err instanceof RefusedResume) {
          const failure = refusalStatus(err.refusal);
          code = failure.code;
          call.emit('error', failure);
          return;
        }
        if (!(err instanceof CursorServiceError) && !isLibraryError(err)) deps.logger.error({ err, rpc: name }, 'stream failed');
        const failure = toGrpcStatus(err);
        code = failure.code;
        call.emit('error', failure);
      })
      .finally(() => {
        if (release !== undefined) {
          release();
          deps.metrics.streamsOpen.add(-1, { 'rpc.method': name });
        }
        traced.end(abort.signal.aborted ? status.CANCELLED : code);
      });
  };
}

/** A refused resume ends the call with its own status (see RESUME in cursor.proto). */
class RefusedResume extends Error {
  readonly refusal: Refusal;

  constructor(refusal: Refusal) {
    super(refusal.reason);
    this.refusal = refusal;
  }
}

function isLibraryError(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { name?: unknown }).name === 'SessionLogError';
}

export function resumeHandler(deps: StreamDeps) {
  return streaming<ResumeRequest, ResumeResponse>(deps, 'Resume', async (call, caller, signal) => {
    const { sessionId, lastEventId } = call.request;
    sessionIdOf(sessionId);
    const principal = principalOf(caller, call.request.principal);
    // Verdicts keep the library's order: malformed first, then a session
    // that is not this caller's looks unknown, before any log read (and
    // without positions that would describe another caller's session).
    const cursor = decodeEventId(lastEventId);
    let result: ResumeResult;
    const owned = await deps.scope.owns(sessionId, caller);
    if (cursor.ok && !owned) {
      // Exactly what the library answers for an unknown session (with the cursor, no positions).
      result = { verdict: ResumeVerdict.unknownSession, reason: 'the session is unknown, closed, or not yours', sessionId, cursor: cursor.value } satisfies Refusal;
    } else {
      result = await deps.log.resume(sessionId, lastEventId, principal);
    }
    deps.metrics.resumes.add(1, { verdict: result.verdict });
    // Only into the caller's own sessions: another caller's (or a made-up id)
    // gets no audit subject, so probing cannot draw phantom sessions.
    if (owned && !auditedByCaller(call.metadata)) deps.audit.record(sessionId, { kind: 'resume', verdict: result.verdict, ...auditCursorOf(result) });
    trace.getActiveSpan()?.setAttributes({ 'tether.verdict': result.verdict, ...(result.verdict === 'resumed' ? { 'tether.stream': result.stream } : {}) });
    if (result.verdict !== 'resumed') {
      deps.logger.info({ sessionId, verdict: result.verdict }, 'resume refused');
      throw new RefusedResume(result);
    }
    await send(call, {
      ack: {
        verdict: ProtoVerdict.RESUMED,
        session: toProtoSession(result.session),
        stream: result.stream,
        cursorSeq: result.cursor.seq,
        cursorPos: result.cursor.pos,
        endedAtCursor: result.endedAtCursor,
        nothingLeft: result.nothingLeft,
      },
    }, signal);
    const stats = createFollowStats();
    let sent = 0;
    // How often the next event waited for the reader to take the previous ones.
    let readerWaits = 0;
    try {
      for await (const event of result.events({ signal, stats })) {
        if (await send(call, { event: toProtoEvent(event) }, signal)) readerWaits += 1;
        sent += 1;
        if (signal.aborted) break;
      }
    } finally {
      deps.metrics.replayEvents.record(stats.fromLog);
      trace.getActiveSpan()?.setAttributes({ 'tether.events': sent, 'tether.events.from_log': stats.fromLog, 'tether.events.from_live': stats.fromLive });
      deps.logger.debug({ sessionId, stream: result.stream, sent, readerWaits, ...stats, cancelled: signal.aborted }, 'resume ended');
    }
  });
}

export function followHandler(deps: StreamDeps) {
  return streaming<FollowRequest, FollowResponse>(deps, 'Follow', async (call, caller, signal) => {
    const sessionId = sessionIdOf(call.request.sessionId);
    const stream = streamIdOf(call.request.stream);
    const from: Cursor = {
      seq: countOf('after_seq', call.request.afterSeq, 0, Number.MAX_SAFE_INTEGER),
      pos: countOf('after_pos', call.request.afterPos, 0, Number.MAX_SAFE_INTEGER),
    };
    if ((from.seq === 0) !== (from.pos === 0)) throw invalid('after_seq and after_pos are both 0 (from the beginning) or both set');
    await deps.scope.check(sessionId, caller);
    const events: AsyncGenerator<LogEvent> = deps.log.follow(sessionId, stream, from, { signal });
    let sent = 0;
    try {
      for await (const event of events) {
        await send(call, { event: toProtoEvent(event) }, signal);
        sent += 1;
        if (signal.aborted) break;
      }
    } finally {
      trace.getActiveSpan()?.setAttributes({ 'tether.stream': stream, 'tether.events': sent });
    }
  });
}

export function watchControlHandler(deps: StreamDeps) {
  return streaming<WatchControlRequest, WatchControlResponse>(deps, 'WatchControl', async (call, caller, signal) => {
    const sessionId = sessionIdOf(call.request.sessionId);
    await deps.scope.check(sessionId, caller);
    const subject = createSubjects(deps.log.config.subjectPrefix).control(sessionId);
    const sub = deps.log.connection.subscribe(subject);
    const stop = (): void => sub.unsubscribe();
    signal.addEventListener('abort', stop, { once: true });
    try {
      // The subscription is registered locally; a flush makes sure the
      // server has it before we tell the caller it is open.
      await deps.log.connection.flush();
      await send(call, { message: undefined }, signal);
      for await (const msg of sub) {
        if (sub.getPending() > MAX_CONTROL_BACKLOG) {
          throw new CursorServiceError(ServiceErrorCode.tooManyStreams, 'this watcher reads control messages too slowly; watch again');
        }
        let body: ControlMessage;
        try {
          body = msg.json<ControlMessage>();
        } catch {
          continue; // Not ours to judge: a malformed control message is ignored.
        }
        const type = controlTypeFromSpelling(String(body.type));
        if (type === undefined || body.sessionId !== sessionId) continue;
        const message = { type, sessionId, ...(typeof body.stream === 'string' ? { stream: body.stream.slice(0, 64) } : {}), ...(typeof body.from === 'string' ? { from: body.from.slice(0, 256) } : {}) };
        await send(call, { message }, signal);
      }
    } finally {
      signal.removeEventListener('abort', stop);
      sub.unsubscribe();
    }
  });
}

/** A resume's cursor as an audit event holds it: stream, seq and position, never the raw id. */
function auditCursorOf(result: ResumeResult): { stream?: string; cursor?: { stream: string; seq: number; pos: number } } {
  if (result.verdict === 'resumed') return { stream: result.stream, cursor: { stream: result.stream, seq: result.cursor.seq, pos: result.cursor.pos } };
  const c = result.cursor;
  return c === undefined ? {} : { stream: c.stream, cursor: { stream: c.stream, seq: c.seq, pos: c.pos } };
}
