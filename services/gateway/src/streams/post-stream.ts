import { context, trace } from '@opentelemetry/api';
import { EventKind, HttpHeader, newStreamId } from '@tether/protocol';
import { traceparentOf } from '@tether/telemetry';
import { START_CURSOR } from '@tether/session-log';
import type { AppendResult, FollowStats, LogEvent, SessionRecord } from '@tether/session-log';
import { Meta } from '../context.js';
import type { GatewayContext } from '../context.js';
import { openStreamAsCaller } from '../upstream-stream.js';
import type { CallerCredentials } from '../auth/presented-credentials.js';
import type { UpstreamAnswer } from '../upstream.js';
import { pumpStream } from './pump.js';
import type { PumpOutcome, StoredEvent } from './pump.js';
import { AckedFeed } from './acked-feed.js';

/** What a POST stream's opening `prime` event carries: the requests it must answer (read back on takeover). */
export interface StreamOpening {
  readonly requests: readonly string[];
}

/** A POST stream whose opening `prime` has been sent to the log (it may still be in flight). */
export interface OpenedStream {
  readonly stream: string;
  /** The prime's payload: the requests the stream must answer. */
  readonly payload: Buffer;
  /** The prime's append; rejects as the append does. */
  readonly prime: Promise<AppendResult>;
}

/**
 * Opens a POST stream in the log: a fresh stream id and its opening
 * `prime`, stamped with this instance's writer id, that records the JSON-RPC
 * ids the stream owes (read back by a takeover). The caller may do this
 * while the upstream is still being asked (the prime then costs the client
 * no round trip), and must end the stream with `closeUnusedStream` when the
 * answer turns out not to be a stream.
 */
export function openPostStream(ctx: GatewayContext, session: SessionRecord, requestIds: readonly string[]): OpenedStream {
  const stream = newStreamId();
  const opening: StreamOpening = { requests: [...requestIds] };
  const payload = Buffer.from(JSON.stringify(opening));
  const prime = ctx.log.append(session.sessionId, stream, 'prime', payload, { opensStream: session, writer: ctx.writerId });
  // Awaited by whoever uses the stream; an unused one must not make an unhandled rejection.
  prime.catch(() => undefined);
  return { stream, payload, prime };
}

/**
 * A stream opened before the upstream answered, whose answer was not a
 * stream (JSON, 202, an error): its `end` marker once its prime landed, so
 * the log holds no open stream (and no cached writer) for it. No client
 * ever learns its id. Fire and forget.
 */
export function closeUnusedStream(ctx: GatewayContext, session: SessionRecord, opened: OpenedStream): void {
  opened.prime
    .then(() => ctx.log.append(session.sessionId, opened.stream, 'end', new Uint8Array(), { writer: ctx.writerId, existing: true, endReason: 'complete' }))
    .catch(() => undefined);
}

/**
 * Turns an upstream SSE answer into a logged stream: its opening `prime`
 * acknowledged (appended now unless the caller opened the stream already;
 * before the client is answered, so its id is a cursor from the first byte;
 * no lease, no other write), then the pump in the background. Returns the
 * stream id and the client's events: each one as the log acknowledged it
 * (`AckedFeed`), the log itself wherever that feed cannot go on.
 */
export async function startPostStream(
  ctx: GatewayContext,
  session: SessionRecord,
  upstream: UpstreamAnswer,
  requestIds: readonly string[],
  abort: AbortController,
  credentials: CallerCredentials,
  opened: OpenedStream = openPostStream(ctx, session, requestIds),
): Promise<{ stream: string; events: (signal: AbortSignal, stats: FollowStats) => AsyncIterable<LogEvent> }> {
  const { stream, payload } = opened;
  const prime = await opened.prime;
  const feed = new AckedFeed(session, stream, ctx.writerId);
  // The client's tap, opened before the prime is pushed: it starts at the stream's start.
  const tap = feed.tap();
  feed.stored({ kind: EventKind.prime, payload, result: prime, upstreamId: undefined, endReason: undefined });
  runPump(ctx, session, stream, upstream.body ?? emptyBody(), new Set(requestIds), undefined, abort, credentials, feed);
  return { stream, events: (signal, stats) => tap.follow(ctx.log, START_CURSOR, signal, stats) };
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
  credentials: CallerCredentials,
  feed?: AckedFeed,
): void {
  const { sessionId } = session;
  const logger = ctx.logger.child({ component: 'pump', sessionId, stream });
  const deadline = setTimeout(() => abort.abort('deadline'), ctx.config.requestDeadlineMs);
  deadline.unref();
  const span = ctx.tracer.startSpan('tether.record', { attributes: { 'tether.stream': stream, 'tether.instance': ctx.config.instanceId } });
  const counters = { appended: 0 };
  const traceparent = traceparentOf(trace.setSpan(context.active(), span));
  feed?.tracedBy(traceparent);
  const done = pumpStream({
    log: ctx.log,
    logger,
    sessionId,
    stream,
    writer: ctx.writerId,
    outstanding,
    body,
    lastUpstreamId,
    reopen: (upstreamId) => reopenUpstream(session, upstreamId, credentials, abort.signal),
    signal: abort.signal,
    maxEventBytes: ctx.config.maxEventBytes,
    endless: false,
    ...(traceparent === undefined ? {} : { traceparent }),
    onAppend: (ms) => ctx.metrics.appendDuration.record(ms),
    counters,
    ...(feed === undefined ? {} : { onStored: (stored: StoredEvent) => feed.stored(stored) }),
  }).then((outcome) => {
    clearTimeout(deadline);
    feed?.stopped();
    span.setAttributes({ 'tether.outcome': outcome, 'tether.events': counters.appended });
    span.end();
    logger.info({ outcome, events: counters.appended }, 'stream recorded');
    return outcome;
  });
  ctx.local.addWriter({ sessionId, stream, abort, done, ...(feed === undefined ? {} : { feed }) });
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
  credentials: CallerCredentials,
  signal: AbortSignal,
): Promise<AsyncIterable<Uint8Array> | undefined> {
  const headers: Record<string, string> = { accept: 'text/event-stream', [HttpHeader.lastEventId]: lastUpstreamId };
  const upstreamSessionId = session.meta[Meta.upstreamSessionId];
  if (upstreamSessionId !== undefined && upstreamSessionId !== '') headers[HttpHeader.sessionId] = upstreamSessionId;
  const res = await openStreamAsCaller(session.meta[Meta.upstream]!, headers, credentials, signal);
  if (res.status !== 200 || !res.eventStream) {
    res.close();
    return undefined;
  }
  return res.body;
}

async function* emptyBody(): AsyncIterable<Uint8Array> {
  // An SSE answer without a body: nothing to record.
}

