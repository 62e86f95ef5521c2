import { setTimeout as delay } from 'node:timers/promises';
import type { MsgHdrs } from '@nats-io/transport-node';
import { EventKind } from '@tether/protocol';
import type { LogContext } from './context.js';
import { SessionLogError, SessionLogErrorCode } from './errors.js';
import { decodeLogEvent } from './event.js';
import type { Cursor, LogEvent } from './event.js';
import { LiveTail } from './live-tail.js';
import { replay } from './replay.js';
import type { ReplayOptions } from './replay.js';

export interface FollowOptions {
  /** Aborting ends the iteration promptly, even while it waits for live events. */
  readonly signal?: AbortSignal;
  /** The cursor already names the stream's `end` event: yield nothing. */
  readonly endedAtCursor?: boolean;
  /** Filled in as the reader runs: where events came from and how much it held. */
  readonly stats?: FollowStats;
}

/** How long a reader that started live waits for its first live event before it asks the log once. */
export const LIVE_START_GRACE_MS = 1_000;

/** Counters of one reader, for metrics and for tests that check memory stays bounded. */
export interface FollowStats {
  /** Events delivered from the log (replay and refills). */
  fromLog: number;
  /** Events delivered from the live subscription. */
  fromLive: number;
  /** Times the reader went (back) to the log: the first replay, refills and overflows. */
  logPasses: number;
  /** Times the live buffer overflowed because the reader was slower than the writer. */
  liveOverflows: number;
  /** Most live messages held at once (never above `liveBufferMax`). */
  liveHighWater: number;
}

export function createFollowStats(): FollowStats {
  return { fromLog: 0, fromLive: 0, logPasses: 0, liveOverflows: 0, liveHighWater: 0 };
}

/** How a reader starts, when its caller knows more than the cursor. */
export interface FollowStart {
  /**
   * A live tail already open. Alone: opened before anything after the cursor
   * was stored, so the reader starts live, with no replay. With `replay`:
   * opened before that replay's first batch was read.
   */
  readonly tail?: LiveTail;
  /** What the first replay pass already has or must reach (from a resume's classification). */
  readonly replay?: ReplayOptions;
}

/** A pass that ends before a known stored event is asked again this often (after 50, 100, 150 ms) before it is `stream_truncated`. */
const SHORT_PASS_RETRIES = 3;
const SHORT_PASS_WAIT_MS = 50;

/** Republished messages carry their stream sequence in this header. */
const NATS_SEQUENCE = 'Nats-Sequence';

/**
 * Every event of one stream after `from`, in order and without holes: first
 * replayed from the log, then live. Ends after the stream's `end` event.
 *
 * The seam rule (DESIGN section 8): each event must be `seq == last + 1` with
 * `prev == last pos`. Live messages are a cache: a duplicate is dropped, and
 * anything else out of line sends the reader back to the log, which decides.
 * A hole the log cannot fill throws `stream_truncated`; a broken chain throws
 * `stream_diverged`; a closed session throws `session_closed`.
 */
export async function* follow(
  ctx: LogContext,
  sessionId: string,
  stream: string,
  epoch: string,
  from: Cursor,
  options: FollowOptions = {},
  start: FollowStart = {},
): AsyncGenerator<LogEvent, void, undefined> {
  const opened = start.tail;
  if (options.endedAtCursor === true) {
    opened?.close();
    return;
  }
  const subject = ctx.subjects.log(sessionId, stream);
  // Opened before the replay starts, so nothing stored during the replay is
  // missed between the two (the seam). A tail opened earlier, before the
  // stream's next append (see `openReader`), makes the first replay needless:
  // everything after `from` reaches it live.
  const stats = options.stats ?? createFollowStats();
  const tail = opened ?? new LiveTail(ctx, sessionId, stream, options.signal, stats);
  opened?.attach(options.signal, stats);
  // A tail opened before anything after `from` was stored starts live; one
  // opened before a resume's first read (which `start.replay` then carries)
  // replays that read first.
  let startLive = opened !== undefined && start.replay === undefined;
  let last: Cursor = from;
  const fail = (code: SessionLogErrorCode, message: string, event: { seq: number; pos: number }): SessionLogError =>
    new SessionLogError(code, message, { sessionId, stream, seq: event.seq, pos: event.pos, expectedSeq: last.seq + 1, expectedPrev: last.pos });
  try {
    // A live message we could not deliver: the log must reach at least it.
    let mustReach = 0;
    let shortPasses = 0;
    let firstPass = start.replay;
    for (;;) {
      tail.rearm();
      const pass = startLive ? noReplay() : replay(ctx, subject, last.pos, firstPass ?? { reach: mustReach });
      firstPass = undefined;
      if (!startLive) stats.logPasses += 1;
      for await (const msg of pass) {
        const event = decode(sessionId, stream, msg.seq, msg.headers, msg.data);
        if (event === undefined) throw fail(SessionLogErrorCode.streamDiverged, 'an event in the log has malformed chain headers', { seq: 0, pos: msg.seq });
        if (event.pos <= last.pos) continue;
        if (event.seq > last.seq + 1) {
          throw fail(SessionLogErrorCode.streamTruncated, 'events of this stream were evicted from the log before they were read', event);
        }
        if (!continues(event, last, epoch)) throw fail(SessionLogErrorCode.streamDiverged, 'the log breaks the prev-chain of this stream', event);
        last = { seq: event.seq, pos: event.pos };
        stats.fromLog += 1;
        yield event;
        if (event.kind === EventKind.end) return;
        if (tail.aborted) return;
        if (tail.closed) throw fail(SessionLogErrorCode.sessionClosed, 'the session was closed', event);
      }
      if (last.pos < mustReach) {
        // The pass ended before an event the server already republished. A
        // leader that has just taken over may answer before it applied that
        // event: that is stale, not evicted. Ask again a few times before
        // calling it truncated.
        if (shortPasses < SHORT_PASS_RETRIES) {
          shortPasses += 1;
          await delay(SHORT_PASS_WAIT_MS * shortPasses);
          continue;
        }
        throw fail(SessionLogErrorCode.streamTruncated, 'a stored event was evicted before it could be read', { seq: last.seq + 1, pos: mustReach });
      }
      shortPasses = 0;
      mustReach = 0;
      // Started live: if nothing comes soon, ask the log once (interest in the
      // live subject may reach the stream's leader late in some clusters).
      const grace = startLive ? LIVE_START_GRACE_MS : undefined;
      startLive = false;
      // Held across the wait below only as `undefined`: an idle reader must not keep its last live
      // message (its payload is a view of a NATS read buffer, which it would keep whole).
      let next: Awaited<ReturnType<LiveTail['next']>> | undefined;
      for (let first = true; ; first = false) {
        next = undefined;
        next = await tail.next(first ? grace : undefined);
        if (next === 'idle') break;
        if (next === 'aborted') return;
        if (next === 'closed') throw fail(SessionLogErrorCode.sessionClosed, 'the session was closed', last);
        if (next === 'overflow') break;
        const pos = Number(next.headers?.get(NATS_SEQUENCE));
        if (!Number.isSafeInteger(pos) || pos <= last.pos) continue;
        const event = decode(sessionId, stream, pos, next.headers, next.data);
        if (event === undefined || !continues(event, last, epoch)) {
          mustReach = pos;
          break;
        }
        last = { seq: event.seq, pos: event.pos };
        stats.fromLive += 1;
        yield event;
        if (event.kind === EventKind.end) return;
      }
    }
  } finally {
    tail.close();
  }
}

async function* noReplay(): AsyncGenerator<never> {
  // The reader's tail was open before anything after its cursor was stored.
}

function decode(sessionId: string, stream: string, pos: number, header: MsgHdrs | undefined, data: Uint8Array): LogEvent | undefined {
  const result = decodeLogEvent(sessionId, stream, pos, header, data);
  return result.ok ? result.event : undefined;
}

function continues(event: LogEvent, last: Cursor, epoch: string): boolean {
  return event.seq === last.seq + 1 && event.prev === last.pos && event.epoch === epoch;
}
