import { HttpHeader } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { Meta } from '../context.js';
import type { GatewayContext } from '../context.js';
import { openUpstreamStream } from '../upstream-stream.js';
import type { UpstreamStream } from '../upstream-stream.js';
import { keepLease } from './lease-keeper.js';
import { pumpStream } from './pump.js';
import { reopenUpstream } from './post-stream.js';

export type ListenerState = 'running_here' | 'running_elsewhere' | 'unsupported' | 'failed';

/**
 * Makes sure exactly one instance holds the upstream GET of a session and
 * records it into stream `0`. The lease decides who; the holder opens the
 * upstream GET (a nested resume from the last recorded upstream id, when a
 * previous holder died) and keeps it until the session closes, the lease is
 * lost, or this instance drains. Readers on every instance follow the log.
 */
export async function ensureListener(ctx: GatewayContext, session: SessionRecord, protocolVersion: string | undefined): Promise<ListenerState> {
  const { sessionId } = session;
  if (ctx.local.writer(sessionId, '0') !== undefined) return 'running_here';
  let lease;
  try {
    lease = await ctx.log.acquireLease(sessionId, '0', ctx.config.instanceId, ctx.config.leaseTtlMs);
  } catch (err) {
    if (isSessionLogError(err, 'lease_held')) return 'running_elsewhere';
    throw err;
  }
  const head = await ctx.log.head(sessionId, '0');
  // A head with an upstream cursor means an earlier holder recorded this stream: we take over from it.
  if (head?.upstreamId !== undefined) ctx.metrics.leaseTakeovers.add(1, { stream: 'get' });
  const abort = new AbortController();
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  const upstreamSessionId = session.meta[Meta.upstreamSessionId];
  if (upstreamSessionId !== undefined && upstreamSessionId !== '') headers[HttpHeader.sessionId] = upstreamSessionId;
  if (protocolVersion !== undefined) headers[HttpHeader.protocolVersion] = protocolVersion;
  if (head?.upstreamId !== undefined) headers[HttpHeader.lastEventId] = head.upstreamId;
  let answer: UpstreamStream;
  try {
    answer = await openUpstreamStream(session.meta[Meta.upstream]!, headers, abort.signal, ctx.metrics.upstreamErrors);
  } catch {
    await ctx.log.releaseLease(lease).catch(() => undefined);
    return 'failed';
  }
  if (answer.status !== 200 || !answer.eventStream) {
    answer.close();
    await ctx.log.releaseLease(lease).catch(() => undefined);
    if (answer.status === 404) {
      await ctx.log.closeSession(sessionId, ctx.config.instanceId).catch(() => false);
      return 'failed';
    }
    return answer.status === 405 ? 'unsupported' : 'failed';
  }
  const logger = ctx.logger.child({ component: 'listener', sessionId, stream: '0' });
  const keeper = keepLease(ctx.log, lease, ctx.config.leaseTtlMs, () => abort.abort('stopped'));
  const done = pumpStream({
    log: ctx.log,
    logger,
    sessionId,
    stream: '0',
    outstanding: new Set(),
    body: answer.body,
    lastUpstreamId: head?.upstreamId,
    reopen: (upstreamId) => reopenUpstream(session, upstreamId, protocolVersion, abort.signal),
    signal: abort.signal,
    maxEventBytes: ctx.config.maxEventBytes,
    endless: true,
    onAppend: (ms) => ctx.metrics.appendDuration.record(ms),
  }).then(async (outcome) => {
    await keeper.release();
    logger.info({ outcome }, 'upstream GET stream ended');
    return outcome;
  });
  ctx.local.addWriter({ sessionId, stream: '0', abort, done });
  logger.info({ resumedFrom: head?.upstreamId ?? null }, 'holding the upstream GET stream');
  return 'running_here';
}
