import { AuditKind, isSessionLogError } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import type { GatewayContext } from '../context.js';
import type { CallerCredentials } from '../auth/presented-credentials.js';
import { reopenUpstream, runPump } from './post-stream.js';
import { responseIds } from './pump.js';
import type { StreamOpening } from './post-stream.js';
import { claimStream, findWriter, once } from './writer-claim.js';

/** Events read per page while working out what an orphaned stream still owes. */
const TAKEOVER_PAGE = 256;

/** What a takeover check ended with, and the stream's writer afterwards (for the reader's liveness watch). */
export interface TakeoverResult {
  readonly outcome: 'writer_alive' | 'ended' | 'resumed_upstream' | 'abandoned';
  readonly writer?: string;
}

/**
 * A client resumes a POST stream that is still open. If its writer lives
 * (a pump here, or a writer elsewhere that answers its liveness probe)
 * there is nothing to do. If it is gone, this instance claims the stream in
 * the log and performs the nested resume: GET to the upstream with the last
 * recorded upstream event id. When the upstream cannot resume, the stream is
 * ended as `abandoned`, with a JSON-RPC error for each request it still
 * owed. A stream whose responses are all recorded is ended `complete`
 * without asking the upstream.
 */
export function takeOverIfOrphaned(ctx: GatewayContext, session: SessionRecord, stream: string, credentials: CallerCredentials): Promise<TakeoverResult> {
  return once(inflight, `${ctx.writerId}.${session.sessionId}.${stream}`, () => takeOver(ctx, session, stream, credentials));
}

const inflight = new Map<string, Promise<TakeoverResult>>();

async function takeOver(ctx: GatewayContext, session: SessionRecord, stream: string, credentials: CallerCredentials): Promise<TakeoverResult> {
  const { sessionId } = session;
  const found = await findWriter(ctx, sessionId, stream);
  if (found.kind === 'here') return { outcome: 'writer_alive', writer: ctx.writerId };
  if (found.kind === 'elsewhere') return { outcome: 'writer_alive', writer: found.writer };
  if (found.kind === 'ended' || found.head === undefined) return { outcome: 'ended' };
  const { head } = found;
  const outstanding = await owedRequests(ctx, sessionId, stream, head.seq);
  if (outstanding.size === 0) {
    // The dead writer recorded every response but not the end marker (killed
    // between the two appends): the stream is complete, not abandoned. The
    // end itself is the claim: it must follow the head we found.
    try {
      await ctx.log.append(sessionId, stream, 'end', new Uint8Array(), { endReason: 'complete', claim: { afterSeq: head.seq }, writer: ctx.writerId, existing: true });
    } catch (err) {
      if (isSessionLogError(err, 'writer_conflict') || isSessionLogError(err, 'stream_ended')) return { outcome: 'writer_alive' };
      throw err;
    }
    ctx.audit.record(sessionId, { kind: AuditKind.takeover, stream, writer: ctx.writerId, ...(head.writer === undefined ? {} : { from: head.writer }), reason: 'ended_complete' });
    ctx.logger.info({ sessionId, stream }, 'took over an orphaned stream that owed nothing: ended it complete');
    return { outcome: 'ended' };
  }
  const claimed = await claimStream(ctx, sessionId, stream, head);
  if (claimed === undefined) return { outcome: 'writer_alive' };
  ctx.metrics.leaseTakeovers.add(1, { stream: 'post' });
  const abort = new AbortController();
  let body: AsyncIterable<Uint8Array> | undefined;
  try {
    body = head.upstreamId === undefined ? undefined : await reopenUpstream(session, head.upstreamId, credentials, abort.signal).catch(() => undefined);
    ctx.logger.info({ sessionId, stream, from: head.upstreamId ?? null, resumed: body !== undefined }, 'took over an orphaned stream');
    ctx.audit.record(sessionId, { kind: AuditKind.takeover, stream, writer: ctx.writerId, ...(head.writer === undefined ? {} : { from: head.writer }), reason: body === undefined ? 'abandoned' : 'resumed_upstream' });
    // With no body the pump records the explicit abandonment and returns;
    // wait for it then, so the resume that got us here sees the verdict.
    runPump(ctx, session, stream, body ?? noMore(), outstanding, head.upstreamId, abort, credentials);
  } finally {
    claimed.release();
  }
  if (body === undefined) await ctx.local.writer(sessionId, stream)?.done;
  return { outcome: body === undefined ? 'abandoned' : 'resumed_upstream', writer: ctx.writerId };
}

/**
 * The requests a stream still owes: those its opening `prime` names, less the
 * responses already recorded. One pass over the stream up to `headSeq`, each
 * page chained to the last event read (by its position), so nothing is read twice.
 */
async function owedRequests(ctx: GatewayContext, sessionId: string, stream: string, headSeq: number): Promise<Set<string>> {
  let owed: Set<string> | undefined;
  let after: { seq: number; pos: number } = { seq: 0, pos: 0 };
  while ((owed === undefined || owed.size > 0) && after.seq < headSeq) {
    const page = await ctx.log.readPage(sessionId, stream, after.seq, TAKEOVER_PAGE, after.seq === 0 ? undefined : after.pos);
    if (page.length === 0) break;
    for (const event of page) {
      if (event.seq === 1) owed = new Set(parseOpening(event.payload).requests);
      else if (event.kind === 'event' && owed !== undefined) for (const id of responseIds(Buffer.from(event.payload).toString('utf8'))) owed.delete(id);
    }
    const last = page[page.length - 1]!;
    after = { seq: last.seq, pos: last.pos };
  }
  return owed ?? new Set();
}

function parseOpening(payload: Uint8Array | undefined): StreamOpening {
  try {
    const value = JSON.parse(Buffer.from(payload ?? new Uint8Array()).toString('utf8')) as Partial<StreamOpening>;
    return { requests: Array.isArray(value.requests) ? value.requests.filter((r): r is string => typeof r === 'string') : [] };
  } catch {
    return { requests: [] };
  }
}

/** A body that ended before anything came: the pump sees a clean close. */
async function* noMore(): AsyncIterable<Uint8Array> {
  // nothing
}
