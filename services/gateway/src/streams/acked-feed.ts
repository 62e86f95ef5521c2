import { EventKind } from '@tether/protocol';
import { START_CURSOR, storedHeaderValue } from '@tether/session-log';
import type { Cursor, FollowStats, LogEvent, SessionRecord } from '@tether/session-log';
import type { LogPort } from '../log/log-port.js';
import type { StoredEvent } from './pump.js';

/** Events a reader's tap holds for a client that reads slower than the pump appends; past this it goes to the log. */
export const ACKED_FEED_MAX = 256;

/**
 * The events of one stream as its pump on this instance stored them: each
 * one is pushed when the log acknowledged its append (never before), in the
 * stream's order, with the seq, position and id the log gave it, and `prev`
 * the position of the one before. Readers on this instance tap it: the
 * client that opened a POST stream, and the GET clients of a session whose
 * listener runs here. They get exactly what the log holds, without
 * subscribing to the stream's republished copies and decoding each one
 * again (a NATS subscription, its SUB and UNSUB, and a header parse per
 * event: the largest share of the gateway's CPU per event after its own
 * appends, in profiles; and for an idle GET stream, the live tail's
 * subscription and generator chain, a fifth of its memory). A resume reads
 * the log first.
 *
 * Where a tap cannot go on, its reader continues from the log after the last
 * event it delivered: when the pump stops without the stream's end marker
 * (drain, a failed log, another writer took the stream over), when an
 * acknowledged seq does not follow the last one (events of another writer
 * lie between), when the first event a tap sees does not follow the cursor
 * its reader started from, and when the reader falls more than
 * `ACKED_FEED_MAX` events behind (the tap drops what it held, so memory
 * stays bounded, like a live tail's overflow).
 *
 * What it gives up: a fork the server's fencing lets through reaches these
 * readers as this writer's branch (each event of it stored), where a reader
 * of the log would have ended `diverged` at once; the client gets that
 * verdict at its next resume. Two Tether writers never fork a stream (they
 * share msg ids), and the current servers refuse another publisher of the
 * subject (nats-server#4320, fixed in 2.9.21, below the 2.11 floor;
 * docs/design.md, *Writer fencing on current servers*).
 */
export class AckedFeed {
  readonly #session: SessionRecord;
  readonly #stream: string;
  readonly #writer: string;
  readonly #taps = new Set<FeedTap>();
  #traceparent: string | undefined;
  /** The seq and position of the last event stored: the next must be seq + 1, chained to it. */
  #seq: number;
  #prev: number;
  /** False once the pump stopped or the chain broke: taps opened later go to the log at once. */
  #live = true;

  /** `after`: the stream's last event before this pump's first append (none for a new POST stream). */
  constructor(session: SessionRecord, stream: string, writer: string, after: Cursor = START_CURSOR) {
    this.#session = session;
    this.#stream = stream;
    this.#writer = writer;
    this.#seq = after.seq;
    this.#prev = after.pos;
  }

  /** The trace context the pump stores with its appends from now on (the opening prime has none). */
  tracedBy(traceparent: string | undefined): void {
    this.#traceparent = traceparent;
  }

  /** One acknowledged append, as a reader of the log would decode it. */
  stored(s: StoredEvent): void {
    if (!this.#live) return;
    const { result } = s;
    if (result.seq !== this.#seq + 1 || result.pos <= this.#prev) {
      // Not the next event of the chain this feed holds: someone else's were
      // stored in between (this writer was rebuilt from the log after an
      // append of unknown outcome, behind another writer's). Only the log
      // can say what lies between: readers go on from there.
      this.stopped();
      return;
    }
    this.#seq = result.seq;
    if (this.#taps.size === 0) {
      this.#prev = result.pos;
      return;
    }
    const event: LogEvent = {
      id: result.id,
      sessionId: this.#session.sessionId,
      stream: this.#stream,
      epoch: this.#session.epoch,
      seq: result.seq,
      pos: result.pos,
      prev: this.#prev,
      kind: s.kind,
      payload: s.payload,
      upstreamId: s.upstreamId === undefined ? undefined : storedHeaderValue(s.upstreamId),
      endReason: s.kind === EventKind.end ? (s.endReason ?? 'complete') : undefined,
      traceparent: this.#traceparent,
      writer: this.#writer,
    };
    this.#prev = result.pos;
    for (const tap of this.#taps) tap.push(event);
  }

  /** The pump stopped (or the chain broke). Without the end marker, what comes next (if anything) is another writer's: the log decides. */
  stopped(): void {
    this.#live = false;
    for (const tap of this.#taps) tap.toLog();
    this.#taps.clear();
  }

  /**
   * A tap opened now: it holds every event stored from now on, for a reader
   * that starts after a cursor it learns next (a head read, or the start of
   * a new stream). Open it before that cursor is read, so nothing stored in
   * between is missed; `follow` then skips what the cursor already covers.
   */
  tap(): FeedTap {
    const tap = new FeedTap(this.#session.sessionId, this.#stream, (t) => this.#taps.delete(t));
    if (this.#live) this.#taps.add(tap);
    else tap.toLog();
    return tap;
  }
}

/** One reader's view of an `AckedFeed`: its own bounded queue. */
export class FeedTap {
  readonly #sessionId: string;
  readonly #stream: string;
  readonly #detach: (tap: FeedTap) => void;
  #queue: LogEvent[] = [];
  /** `more`: the feed still pushes; `log`: the rest is read from the log. */
  #state: 'more' | 'log' = 'more';
  #wake: (() => void) | undefined;

  constructor(sessionId: string, stream: string, detach: (tap: FeedTap) => void) {
    this.#sessionId = sessionId;
    this.#stream = stream;
    this.#detach = detach;
  }

  push(event: LogEvent): void {
    if (this.#state !== 'more') return;
    if (this.#queue.length >= ACKED_FEED_MAX) {
      // The reader is slower than the upstream: drop what is held, the log has it.
      this.#queue = [];
      this.toLog();
      this.#detach(this);
      return;
    }
    this.#queue.push(event);
    if (event.kind === EventKind.end) this.#detach(this);
    this.#notify();
  }

  /** Nothing more comes from the feed: the reader takes what is queued (all acknowledged, in order), then reads the log. */
  toLog(): void {
    this.#state = 'log';
    this.#notify();
  }

  /** The reader's events after `from`: from the feed while it can, then from the log after the last one delivered. */
  async *follow(log: LogPort, from: Cursor, signal: AbortSignal, stats: FollowStats): AsyncGenerator<LogEvent, void, undefined> {
    const onAbort = (): void => this.#notify();
    signal.addEventListener('abort', onAbort, { once: true });
    let last = from;
    try {
      for (;;) {
        if (signal.aborted) return;
        const event = this.#queue.shift();
        if (event !== undefined) {
          // Stored before the cursor was read: the reader has it already.
          if (event.seq <= last.seq) continue;
          // Not the next after the cursor: what lies between is the log's to say.
          if (event.seq !== last.seq + 1 || event.prev !== last.pos) break;
          last = { seq: event.seq, pos: event.pos };
          stats.fromLive += 1;
          yield event;
          if (event.kind === EventKind.end) return;
          continue;
        }
        if (this.#state === 'log') break;
        await new Promise<void>((resolve) => (this.#wake = resolve));
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      // Nobody reads this tap any more: the pump's next events are not kept for it.
      this.#detach(this);
      this.#state = 'log';
      this.#queue = [];
    }
    yield* log.follow(this.#sessionId, this.#stream, last, { signal, stats });
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
