import { EventKind } from '@tether/protocol';
import { START_CURSOR, storedHeaderValue } from '@tether/session-log';
import type { Cursor, FollowStats, LogEvent, SessionRecord } from '@tether/session-log';
import type { LogPort } from '../log/log-port.js';
import type { StoredEvent } from './pump.js';

/** Events an `AckedFeed` holds for a client that reads slower than the pump appends; past this it goes to the log. */
export const ACKED_FEED_MAX = 256;

/**
 * The events of one POST stream as its pump on this instance stored them:
 * each one is pushed when the log acknowledged its append (never before), in
 * the stream's order, with the seq, position and id the log gave it, and
 * `prev` the position of the one before. So the client that opened the
 * stream gets exactly what the log holds, without subscribing to the
 * stream's republished copies and decoding each one again (a NATS
 * subscription, its SUB and UNSUB, and a header parse per event: the
 * largest share of the gateway's CPU per event after its own appends, in
 * profiles). A resume, here or elsewhere, still reads the log.
 *
 * Where the feed cannot go on, the client's reader continues from the log
 * after the last event it delivered: when the pump stops without the
 * stream's end marker (drain, a failed log, another writer took the stream
 * over), when an acknowledged seq does not follow the last one (events of
 * another writer lie between), and when the client falls more than
 * `ACKED_FEED_MAX` events behind (the feed drops what it held, so memory
 * stays bounded, like a live tail's overflow).
 *
 * What it gives up: a fork the server's fencing lets through reaches this
 * client as this writer's branch (each event of it stored), where a reader
 * of the log would have ended `diverged` at once; the client gets that
 * verdict at its next resume. Two Tether writers never fork a stream (they
 * share msg ids); only another publisher of the subject with its own msg
 * ids on a 2.9.x R3 stream can (nats-server#4320; docs/design.md, *Writer
 * fencing on current servers*).
 */
export class AckedFeed {
  readonly #session: SessionRecord;
  readonly #stream: string;
  readonly #writer: string;
  #traceparent: string | undefined;
  #queue: LogEvent[] = [];
  /** The seq and position of the last event stored: the next must be seq + 1, chained to it. */
  #seq = 0;
  #prev = 0;
  /** `more`: the pump still writes; `end`: its end marker is queued; `log`: the rest is read from the log. */
  #state: 'more' | 'end' | 'log' = 'more';
  #detached = false;
  #wake: (() => void) | undefined;

  constructor(session: SessionRecord, stream: string, writer: string) {
    this.#session = session;
    this.#stream = stream;
    this.#writer = writer;
  }

  /** The trace context the pump stores with its appends from now on (the opening prime has none). */
  tracedBy(traceparent: string | undefined): void {
    this.#traceparent = traceparent;
  }

  /** One acknowledged append, as a reader of the log would decode it. */
  stored(s: StoredEvent): void {
    if (this.#detached || this.#state !== 'more') return;
    const { result } = s;
    if (result.seq !== this.#seq + 1 || result.pos <= this.#prev) {
      // Not the next event of the chain this feed holds: someone else's were
      // stored in between (this writer was rebuilt from the log after an
      // append of unknown outcome, behind another writer's). Only the log
      // can say what lies between: the client reads on from there.
      this.#state = 'log';
      this.#notify();
      return;
    }
    this.#seq = result.seq;
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
    if (this.#queue.length >= ACKED_FEED_MAX) {
      // The client reads slower than the upstream sends: drop what is held, the log has it.
      this.#queue = [];
      this.#state = 'log';
    } else {
      this.#queue.push(event);
      if (event.kind === EventKind.end) this.#state = 'end';
    }
    this.#notify();
  }

  /** The pump stopped. Without its end marker, what comes next (if anything) is another writer's: the log decides. */
  stopped(): void {
    if (this.#state === 'more') this.#state = 'log';
    this.#notify();
  }

  /** The client's events: from the feed while it can, then from the log after the last one delivered. */
  async *follow(log: LogPort, signal: AbortSignal, stats: FollowStats): AsyncGenerator<LogEvent, void, undefined> {
    const onAbort = (): void => this.#notify();
    signal.addEventListener('abort', onAbort, { once: true });
    let last: Cursor = START_CURSOR;
    try {
      for (;;) {
        if (signal.aborted) return;
        const event = this.#queue.shift();
        if (event !== undefined) {
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
      // Nobody reads the feed any more: the pump's next events are not kept.
      this.#detached = true;
      this.#queue = [];
    }
    yield* log.follow(this.#session.sessionId, this.#stream, last, { signal, stats });
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
