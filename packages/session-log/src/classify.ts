import type { StoredMsg } from '@nats-io/jetstream';
import { decodeEventId, EndReason, EventKind, ResumeVerdict } from '@tether/protocol';
import type { EventId } from '@tether/protocol';
import type { LogContext } from './context.js';
import { decodeLogEvent } from './event.js';
import type { Cursor, LogEvent } from './event.js';
import { samePrincipal } from './principal.js';
import type { SessionRecord, SessionRegistry } from './registry.js';
import { unavailable } from './setup.js';

/** Why a resume was refused, with the positions involved (never payloads). */
export interface Refusal {
  readonly verdict: Exclude<ResumeVerdict, 'resumed'>;
  readonly reason: string;
  readonly sessionId: string;
  readonly cursor?: EventId;
  /** What the log holds, where it matters: the stream's last position, the event found after the cursor. */
  readonly log?: { readonly lastSeq?: number; readonly lastPos?: number; readonly nextSeq?: number; readonly nextPos?: number };
}

export interface Acceptance {
  readonly verdict: 'resumed';
  readonly session: SessionRecord;
  readonly stream: string;
  readonly cursor: Cursor;
  /** The cursor names the stream's `end` event: there is nothing to follow. */
  readonly endedAtCursor: boolean;
  /**
   * The stream has ended and nothing but its `end` event follows the cursor:
   * the client already has every message. (Lets an HTTP edge answer 204
   * instead of an empty stream that some clients would reopen forever.)
   */
  readonly nothingLeft: boolean;
}

export type Classification = Acceptance | Refusal;

/**
 * DESIGN section 7: the first rule that matches decides. Every read here goes
 * to the stream leader: a follower that lags an acknowledged append would turn
 * a good cursor into a false `ahead`.
 */
export async function classifyResume(
  ctx: LogContext,
  registry: SessionRegistry,
  sessionId: string,
  lastEventId: string,
  principal: string,
): Promise<Classification> {
  const decoded = decodeEventId(lastEventId);
  if (!decoded.ok) return { verdict: ResumeVerdict.malformed, reason: `Last-Event-ID is malformed: ${decoded.reason}`, sessionId };
  const cursor = decoded.value;
  const refuse = (verdict: Refusal['verdict'], reason: string, log?: Refusal['log']): Refusal =>
    log === undefined ? { verdict, reason, sessionId, cursor } : { verdict, reason, sessionId, cursor, log };

  const session = await registry.get(sessionId);
  if (session === undefined || session.state !== 'active' || !samePrincipal(session.principal, principal)) {
    return refuse(ResumeVerdict.unknownSession, 'the session is unknown, closed, or not yours');
  }
  if (cursor.epoch !== session.epoch) return refuse(ResumeVerdict.epochMismatch, 'the cursor belongs to another incarnation of this session');

  // The subject comes from the session header and the cursor's stream id;
  // the cursor's position is only ever compared, never used to pick a subject.
  const subject = ctx.subjects.log(sessionId, cursor.stream);
  // The three reads are independent: one round trip instead of three.
  const [at, last, nextMsg] = await Promise.all([
    get(ctx, { seq: cursor.pos }),
    get(ctx, { last_by_subj: subject }),
    get(ctx, { seq: cursor.pos + 1, next_by_subj: subject }),
  ]);
  const lastEvent = last === null ? undefined : decode(sessionId, cursor.stream, last);
  const lastInfo = lastEvent === undefined ? {} : { lastSeq: lastEvent.seq, lastPos: lastEvent.pos };

  if (at !== null) {
    const named = at.subject === subject ? decode(sessionId, cursor.stream, at) : undefined;
    if (named === undefined || named.seq !== cursor.seq || named.epoch !== cursor.epoch) {
      return refuse(ResumeVerdict.diverged, 'the log holds a different event at the cursor position', lastInfo);
    }
  } else if (lastEvent === undefined || lastEvent.pos < cursor.pos) {
    // The cursor's event is not held and nothing of the stream follows it.
    const state = await streamState(ctx);
    if (cursor.pos > state.lastSeq || (lastEvent !== undefined && lastEvent.pos < cursor.pos)) {
      return refuse(ResumeVerdict.ahead, 'the log never held the event the cursor names', lastInfo);
    }
    return refuse(ResumeVerdict.truncated, 'retention evicted this stream from the log', lastInfo);
  }

  if (lastEvent?.kind === EventKind.end && lastEvent.endReason === EndReason.abandoned) {
    return refuse(ResumeVerdict.abandoned, 'the stream ended without its writer finishing it', lastInfo);
  }

  const endedAtCursor = at !== null && lastEvent !== undefined && lastEvent.pos === cursor.pos && lastEvent.kind === EventKind.end;
  const acceptance: Acceptance = {
    verdict: ResumeVerdict.resumed,
    session,
    stream: cursor.stream,
    cursor: { seq: cursor.seq, pos: cursor.pos },
    endedAtCursor,
    nothingLeft: endedAtCursor,
  };
  if (lastEvent === undefined || lastEvent.pos === cursor.pos) return acceptance;

  const next = nextMsg === null ? undefined : decode(sessionId, cursor.stream, nextMsg);
  if (next === undefined) return refuse(ResumeVerdict.truncated, 'the events after the cursor were evicted from the log', lastInfo);
  const nextInfo = { ...lastInfo, nextSeq: next.seq, nextPos: next.pos };
  if (next.seq === cursor.seq + 1 && next.prev === cursor.pos && next.epoch === cursor.epoch) {
    return { ...acceptance, nothingLeft: next.kind === EventKind.end };
  }
  if (next.seq > cursor.seq + 1) return refuse(ResumeVerdict.truncated, 'retention evicted events right after the cursor', nextInfo);
  return refuse(ResumeVerdict.diverged, 'the event after the cursor does not chain to it', nextInfo);
}

type GetQuery = { seq: number } | { last_by_subj: string } | { seq: number; next_by_subj: string };

async function get(ctx: LogContext, query: GetQuery): Promise<StoredMsg | null> {
  try {
    // `next_by_subj` is accepted by the leader's STREAM.MSG.GET on 2.9 too;
    // the client's type only lists it for direct gets.
    return await ctx.jsm.streams.getMessage(ctx.config.streamName, query as { seq: number });
  } catch (err) {
    throw unavailable(err);
  }
}

async function streamState(ctx: LogContext): Promise<{ firstSeq: number; lastSeq: number }> {
  try {
    const { state } = await ctx.jsm.streams.info(ctx.config.streamName);
    return { firstSeq: state.first_seq, lastSeq: state.last_seq };
  } catch (err) {
    throw unavailable(err);
  }
}

function decode(sessionId: string, stream: string, msg: StoredMsg): LogEvent | undefined {
  const result = decodeLogEvent(sessionId, stream, msg.seq, msg.header, msg.data);
  return result.ok ? result.event : undefined;
}
