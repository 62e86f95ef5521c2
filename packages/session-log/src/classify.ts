import type { StoredMsg } from '@nats-io/jetstream';
import type { MsgHdrs } from '@nats-io/transport-node';
import { decodeEventId, EndReason, EventKind, ResumeVerdict } from '@tether/protocol';
import type { EventId } from '@tether/protocol';
import type { LogContext } from './context.js';
import { directBatch, directBatchSize, RESUME_FIRST_BATCH } from './direct-batch.js';
import type { DirectBatch, StoredEvent } from './direct-batch.js';
import { decodeLogEvent } from './event.js';
import type { Cursor, LogEvent } from './event.js';
import type { ReplayOptions } from './replay.js';
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
  /** What the reader's first pass starts with (internal: the batch read with the cursor, the head it must reach). */
  readonly replay?: ReplayOptions;
}

export type Classification = Acceptance | Refusal;

/** A message the log holds, whatever read found it. */
interface Held {
  readonly seq: number;
  readonly subject: string;
  readonly headers: MsgHdrs | undefined;
  readonly data: Uint8Array;
}

/** What the log says around a cursor: the message at its position, the stream's last, the first one after it. */
interface Facts {
  readonly at: Held | null;
  readonly last: Held | null;
  /** `undefined`: not known yet (the leader is asked only if the verdict needs it). */
  readonly next: Held | null | undefined;
  /** The messages after the cursor that were read with it: the reader's first batch. */
  readonly first?: DirectBatch;
}

/**
 * DESIGN section 7: the first rule that matches decides. What is *absent*
 * is only ever taken from the stream leader: a follower that lags an
 * acknowledged append would turn a good cursor into a false `ahead`. What a
 * read *finds* is exact wherever it came from (a replica holds a prefix of
 * the log). One round trip carries the session record, the cursor's event
 * with the events after it (the reader's first batch) and the stream's last
 * event.
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
  // The subject comes from the session header and the cursor's stream id;
  // the cursor's position is only ever compared, never used to pick a subject.
  const subject = ctx.subjects.log(sessionId, cursor.stream);
  // The log is read beside the registry; nothing read is used, or leaves
  // this function, before the session and principal check.
  const [session, facts] = await Promise.all([registry.get(sessionId), directFacts(ctx, subject, cursor.pos)]);
  if (session === undefined || session.state !== 'active' || !samePrincipal(session.principal, principal)) {
    return { verdict: ResumeVerdict.unknownSession, reason: 'the session is unknown, closed, or not yours', sessionId, cursor };
  }
  if (cursor.epoch !== session.epoch) {
    return { verdict: ResumeVerdict.epochMismatch, reason: 'the cursor belongs to another incarnation of this session', sessionId, cursor };
  }
  return decide(ctx, session, cursor, subject, facts);
}

/** The verdict from the facts: the same rules on every server and read path. */
async function decide(ctx: LogContext, session: SessionRecord, cursor: EventId, subject: string, facts: Facts): Promise<Classification> {
  const { sessionId } = session;
  const refuse = (verdict: Refusal['verdict'], reason: string, log?: Refusal['log']): Refusal =>
    log === undefined ? { verdict, reason, sessionId, cursor } : { verdict, reason, sessionId, cursor, log };
  const { at, last } = facts;
  const lastEvent = last === null ? undefined : decode(sessionId, cursor.stream, last);
  const lastInfo = lastEvent === undefined ? {} : { lastSeq: lastEvent.seq, lastPos: lastEvent.pos };

  let named: LogEvent | undefined;
  if (at !== null) {
    named = at.subject === subject ? decode(sessionId, cursor.stream, at) : undefined;
    if (named === undefined || named.seq !== cursor.seq || named.epoch !== cursor.epoch) {
      return refuse(ResumeVerdict.diverged, 'the log holds a different event at the cursor position', lastInfo);
    }
    // The two reads are not one moment: retention (or a close) can take the stream between them.
    // A cursor on the stream's end has nothing after it whatever the second read found; any other
    // cursor whose stream is gone now is truncated, never accepted to wait on a stream that is no
    // more (found by the SDK store fuzz: such a reader reported the client's complete stream evicted).
    if (lastEvent === undefined && named.kind !== EventKind.end) {
      return refuse(ResumeVerdict.truncated, 'retention evicted this stream from the log', lastInfo);
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

  // On the end itself (the last read may have missed the stream since: nothing follows an end either way).
  const endedAtCursor = named?.kind === EventKind.end && (lastEvent === undefined || lastEvent.pos === cursor.pos);
  const acceptance: Acceptance = {
    verdict: ResumeVerdict.resumed,
    session,
    stream: cursor.stream,
    cursor: { seq: cursor.seq, pos: cursor.pos },
    endedAtCursor,
    nothingLeft: endedAtCursor,
    replay: { reach: lastEvent?.pos ?? 0, ...(facts.first === undefined ? {} : { first: facts.first }) },
  };
  if (lastEvent === undefined || lastEvent.pos === cursor.pos) return acceptance;

  const next = facts.next !== undefined ? facts.next : await get(ctx, { seq: cursor.pos + 1, next_by_subj: subject });
  const nextEvent = next === null ? undefined : decode(sessionId, cursor.stream, next);
  if (nextEvent === undefined) return refuse(ResumeVerdict.truncated, 'the events after the cursor were evicted from the log', lastInfo);
  const nextInfo = { ...lastInfo, nextSeq: nextEvent.seq, nextPos: nextEvent.pos };
  if (nextEvent.seq === cursor.seq + 1 && nextEvent.prev === cursor.pos && nextEvent.epoch === cursor.epoch) {
    return { ...acceptance, nothingLeft: nextEvent.kind === EventKind.end };
  }
  if (nextEvent.seq > cursor.seq + 1) return refuse(ResumeVerdict.truncated, 'retention evicted events right after the cursor', nextInfo);
  return refuse(ResumeVerdict.diverged, 'the event after the cursor does not chain to it', nextInfo);
}

/**
 * One batch direct get from the cursor's position (its event and the
 * reader's first batch) beside the stream's last event. Only what is missing
 * from the batch is asked of the leader: the message at the cursor's
 * position when it is not this stream's (evicted, or another stream's: the
 * verdict needs to know which), and the event after the cursor when the
 * replica that answered stops short of the stream's last.
 */
async function directFacts(ctx: LogContext, subject: string, pos: number): Promise<Facts> {
  const [batch, last] = await Promise.all([directBatch(ctx, subject, pos, directBatchSize(ctx.config.readBatch, RESUME_FIRST_BATCH) + 1), lastOf(ctx, subject)]);
  if (batch === undefined) {
    // The replica ignored `batch` (a node older than 2.11 in a cluster being upgraded): the leader's gets, the head already read.
    const [at, next] = await Promise.all([get(ctx, { seq: pos }), get(ctx, { seq: pos + 1, next_by_subj: subject })]);
    return { at, last, next };
  }
  const [head] = batch.messages;
  const at = head !== undefined && head.seq === pos ? held(subject, head) : await get(ctx, { seq: pos });
  const after = batch.messages.filter((msg) => msg.seq > pos);
  const following = after[0];
  return { at, last, next: following === undefined ? undefined : held(subject, following), first: { messages: after, pending: batch.pending } };
}

function fromStored(msg: StoredMsg | null): Held | null {
  return msg === null ? null : { seq: msg.seq, subject: msg.subject, headers: msg.header, data: msg.data };
}

function held(subject: string, msg: StoredEvent): Held {
  return { seq: msg.seq, subject, headers: msg.headers, data: msg.data };
}

/** The stream's last event: from the only replica on R1 (direct, answered inline), from the leader otherwise. */
async function lastOf(ctx: LogContext, subject: string): Promise<Held | null> {
  if (ctx.config.replicas > 1) return get(ctx, { last_by_subj: subject });
  try {
    return fromStored(await ctx.jsm.direct.getMessage(ctx.config.streamName, { last_by_subj: subject }));
  } catch (err) {
    throw unavailable(err);
  }
}

type GetQuery = { seq: number } | { last_by_subj: string } | { seq: number; next_by_subj: string };

async function get(ctx: LogContext, query: GetQuery): Promise<Held | null> {
  try {
    // `next_by_subj` is accepted by the leader's STREAM.MSG.GET; the
    // client's type only lists it for direct gets.
    return fromStored(await ctx.jsm.streams.getMessage(ctx.config.streamName, query as { seq: number }));
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

function decode(sessionId: string, stream: string, msg: Held): LogEvent | undefined {
  const result = decodeLogEvent(sessionId, stream, msg.seq, msg.headers, msg.data);
  return result.ok ? result.event : undefined;
}
