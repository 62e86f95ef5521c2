import { context, trace } from '@opentelemetry/api';
import { HttpHeader, newStreamId } from '@tether/protocol';
import { traceparentOf } from '@tether/telemetry';
import type { SessionRecord, StreamReader } from '@tether/session-log';
import { Meta } from '../context.js';
import type { GatewayContext } from '../context.js';
import { openUpstreamStream } from '../upstream-stream.js';
import type { UpstreamAnswer } from '../upstream.js';
import { pumpStream } from './pump.js';
import type { PumpOutcome } from './pump.js';

/** What a POST stream's opening `prime` event carries: the requests it must answer (read back on takeover). */
export interface StreamOpening {
  readonly requests: readonly string[];
}

/**
 * Turns an upstream SSE answer into a logged stream: a fresh stream id, a
 * reader opened before anything is stored (so serving the client needs no
 * replay), the opening `prime` event stamped with this instance's writer id
 * (appended before the client is answered, so its id is a cursor from the
 * first byte; no lease, no other write), then the pump in the background. Returns the stream id and the reader; the caller serves the
 * client from the log with it.
 */
export async function startPostStream(
  ctx: GatewayContext,
  session: SessionRecord,
  upstream: UpstreamAnswer,
  requestIds: readonly string[],
  abort: AbortController,
  protocolVersion: string | undefined,
): Promise<{ stream: string; reader: StreamReader }> {
  const stream = newStreamId();
  const { sessionId } = session;
  const reader = ctx.log.openReader(session, stream);
  try {
    const opening: StreamOpening = { requests: [...requestIds] };
    await ctx.log.append(sessionId, stream, 'prime', Buffer.from(JSON.stringify(opening)), { opensStream: session, writer: ctx.writerId });
    runPump(ctx, session, stream, upstream.body ?? emptyBody(), new Set(requestIds), undefined, abort, protocolVersion);
  } catch (err) {
    reader.close();
    throw err;
  }
  return { stream, reader };
}

/**
 * Runs a pump under a deadline, registered so that drain and close can stop
 * it and so that this instance's presence answers "writing" for it.
 */
export function runPump(
  ctx: GatewayContext,
  session: SessionRecord,
  stream: string,
  body: AsyncIterable<Uint8Array>,
  outstanding: Set<string>,
  lastUpstreamId: string | undefined,
  abort: AbortController,
  protocolVersion: string | undefined,
): void {
  const { sessionId } = session;
  const logger = ctx.logger.child({ component: 'pump', sessionId, stream });
  const deadline = setTimeout(() => abort.abort('deadline'), ctx.config.requestDeadlineMs);
  deadline.unref();
  const span = ctx.tracer.startSpan('tether.record', { attributes: { 'tether.stream': stream, 'tether.instance': ctx.config.instanceId } });
  const counters = { appended: 0 };
  const traceparent = traceparentOf(trace.setSpan(context.active(), span));
  const done = pumpStream({
    log: ctx.log,
    logger,
    sessionId,
    stream,
    writer: ctx.writerId,
    outstanding,
    body,
    lastUpstreamId,
    reopen: (upstreamId) => reopenUpstream(session, upstreamId, protocolVersion, abort.signal),
    signal: abort.signal,
    maxEventBytes: ctx.config.maxEventBytes,
    endless: false,
    ...(traceparent === undefined ? {} : { traceparent }),
    onAppend: (ms) => ctx.metrics.appendDuration.record(ms),
    counters,
  }).then((outcome) => {
    clearTimeout(deadline);
    span.setAttributes({ 'tether.outcome': outcome, 'tether.events': counters.appended });
    span.end();
    logger.info({ outcome, events: counters.appended }, 'stream recorded');
    return outcome;
  });
  ctx.local.addWriter({ sessionId, stream, abort, done });
  // After addWriter: the registry forgets the pump first, so a prober that
  // acts on the message hears "not writing".
  void done.then((outcome) => releaseIfUnfinished(ctx, sessionId, stream, outcome));
}

/**
 * A pump that stopped without the stream's end marker (drain, a failed
 * log) tells every instance serving the stream, so a reader there takes it
 * over now rather than at its next liveness tick. A `conflict` means another
 * writer holds the stream already: nothing to hand over.
 */
export function releaseIfUnfinished(ctx: GatewayContext, sessionId: string, stream: string, outcome: PumpOutcome): void {
  if (outcome !== 'stopped' && outcome !== 'log_failed') return;
  ctx.log.publishControl({ type: 'released', sessionId, stream, from: ctx.config.instanceId });
}

/**
 * Nested resume: asks the upstream for the rest of a stream after the last
 * event we recorded. Only a 200 event stream counts; anything else means the
 * upstream cannot resume it.
 */
export async function reopenUpstream(
  session: SessionRecord,
  lastUpstreamId: string,
  protocolVersion: string | undefined,
  signal: AbortSignal,
): Promise<AsyncIterable<Uint8Array> | undefined> {
  const headers: Record<string, string> = { accept: 'text/event-stream', [HttpHeader.lastEventId]: lastUpstreamId };
  const upstreamSessionId = session.meta[Meta.upstreamSessionId];
  if (upstreamSessionId !== undefined && upstreamSessionId !== '') headers[HttpHeader.sessionId] = upstreamSessionId;
  if (protocolVersion !== undefined) headers[HttpHeader.protocolVersion] = protocolVersion;
  const res = await openUpstreamStream(session.meta[Meta.upstream]!, headers, signal);
  if (res.status !== 200 || !res.eventStream) {
    res.close();
    return undefined;
  }
  return res.body;
}

async function* emptyBody(): AsyncIterable<Uint8Array> {
  // An SSE answer without a body: nothing to record.
}
