import { HttpHeader } from '@tether/protocol';
import { AuditKind } from '@tether/session-log';
import type { Cursor, LogEvent, SessionRecord } from '@tether/session-log';
import { Meta } from '../context.js';
import type { GatewayContext } from '../context.js';
import { openStreamAsCaller } from '../upstream-stream.js';
import type { UpstreamStream } from '../upstream-stream.js';
import type { CallerCredentials } from '../auth/presented-credentials.js';
import { AckedFeed } from './acked-feed.js';
import { pumpStream } from './pump.js';
import { releaseIfUnfinished, reopenUpstream } from './post-stream.js';
import { claimStream, findWriter, once } from './writer-claim.js';

export type ListenerState = 'running_here' | 'running_elsewhere' | 'unsupported' | 'failed';

/** The listener's state, and who writes stream `0` now (for the reader's liveness watch). */
export interface ListenerResult {
  readonly state: ListenerState;
  readonly writer?: string;
}

/**
 * Makes sure exactly one instance holds the upstream GET of a session and
 * records it into stream `0`. The log decides who: an instance that finds
 * the stream's writer gone (or never claimed, on a session's first GET)
 * claims it with an append that must follow the head it found. The holder
 * opens the upstream GET (a nested resume from the last recorded upstream
 * id, when a previous holder died) and keeps it until the session closes,
 * another writer shows up in the log, or this instance drains. Readers on
 * every instance follow the log.
 */
export function ensureListener(ctx: GatewayContext, session: SessionRecord, credentials: CallerCredentials): Promise<ListenerResult> {
  return once(inflight, `${ctx.writerId}.${session.sessionId}`, () => startListener(ctx, session, credentials));
}

const inflight = new Map<string, Promise<ListenerResult>>();

async function startListener(ctx: GatewayContext, session: SessionRecord, credentials: CallerCredentials): Promise<ListenerResult> {
  const { sessionId } = session;
  const found = await findWriter(ctx, sessionId, '0');
  if (found.kind === 'here') return { state: 'running_here', writer: ctx.writerId };
  if (found.kind === 'elsewhere') return { state: 'running_elsewhere', writer: found.writer };
  if (found.kind === 'ended') return { state: 'failed' };
  const { head } = found;
  const claimed = await claimStream(ctx, sessionId, '0', head);
  if (claimed === undefined) return { state: 'running_elsewhere' };
  ctx.audit.record(sessionId, { kind: head?.writer === undefined ? AuditKind.claim : AuditKind.takeover, stream: '0', writer: ctx.writerId, ...(head?.writer === undefined ? {} : { from: head.writer }) });
  try {
    return await listen(ctx, session, head, claimed.at, credentials);
  } finally {
    claimed.release();
  }
}

async function listen(ctx: GatewayContext, session: SessionRecord, head: LogEvent | undefined, claimedAt: Cursor, credentials: CallerCredentials): Promise<ListenerResult> {
  const { sessionId } = session;
  // A head with an upstream cursor means an earlier holder recorded this stream: we take over from it.
  if (head?.upstreamId !== undefined) ctx.metrics.leaseTakeovers.add(1, { stream: 'get' });
  const abort = new AbortController();
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  const upstreamSessionId = session.meta[Meta.upstreamSessionId];
  if (upstreamSessionId !== undefined && upstreamSessionId !== '') headers[HttpHeader.sessionId] = upstreamSessionId;
  if (head?.upstreamId !== undefined) headers[HttpHeader.lastEventId] = head.upstreamId;
  let answer: UpstreamStream;
  try {
    answer = await openStreamAsCaller(session.meta[Meta.upstream]!, headers, credentials, abort.signal, ctx.metrics.upstreamErrors);
  } catch {
    return { state: 'failed' };
  }
  if (answer.status !== 200 || !answer.eventStream) {
    answer.close();
    if (answer.status === 404) {
      await ctx.log.closeSession(sessionId, ctx.config.instanceId).catch(() => false);
      return { state: 'failed' };
    }
    return { state: answer.status === 405 ? 'unsupported' : 'failed' };
  }
  const logger = ctx.logger.child({ component: 'listener', sessionId, stream: '0' });
  // The session's GET clients on this instance tap the pump's acknowledged appends (no live tail each).
  const feed = new AckedFeed(session, '0', ctx.writerId, claimedAt);
  const done = pumpStream({
    log: ctx.log,
    logger,
    sessionId,
    stream: '0',
    writer: ctx.writerId,
    outstanding: new Set(),
    body: answer.body,
    lastUpstreamId: head?.upstreamId,
    reopen: (upstreamId) => reopenUpstream(session, upstreamId, credentials, abort.signal),
    signal: abort.signal,
    maxEventBytes: ctx.config.maxEventBytes,
    endless: true,
    onAppend: (ms) => ctx.metrics.appendDuration.record(ms),
    onStored: (stored) => feed.stored(stored),
  }).then((outcome) => {
    feed.stopped();
    logger.info({ outcome }, 'upstream GET stream ended');
    return outcome;
  });
  ctx.local.addWriter({ sessionId, stream: '0', abort, done, feed });
  void done.then((outcome) => releaseIfUnfinished(ctx, sessionId, '0', outcome));
  logger.info({ resumedFrom: head?.upstreamId ?? null }, 'holding the upstream GET stream');
  return { state: 'running_here', writer: ctx.writerId };
}
