import { setTimeout as delay } from 'node:timers/promises';
import type { StoredMsg } from '@nats-io/jetstream';
import { encodeEventId, EventKind, LogHeader } from '@tether/protocol';
import type { EndReason } from '@tether/protocol';
import type { LogContext } from './context.js';
import { isNoResponders, JsErrCode, jsErrorCode, SessionLogError, SessionLogErrorCode } from './errors.js';
import { decodeLogEvent } from './event.js';
import type { Cursor } from './event.js';
import { unavailable } from './setup.js';
import { AckInbox, EncodedHeaders, EXPECTED_LAST_SUBJECT_SEQUENCE, headerValue, storedHeaderValue } from './publish.js';
import { msgIdOf } from './wire.js';

export interface AppendOptions {
  /** The upstream's SSE id of this event, kept for a nested resume. */
  readonly upstreamId?: string;
  /** For `end` events: why the stream ended. Default `complete`. */
  readonly endReason?: EndReason;
  /** W3C traceparent to carry in the message headers. */
  readonly traceparent?: string;
  /**
   * The caller knows the stream already holds events (a writer taking over,
   * the GET stream after initialize). If the log then answers that it holds
   * none, the answer is stale or the stream's limits took it whole (a leader
   * that had not caught up answered so on 2.9.10, in the chaos run; max_age
   * or max_bytes can on any server), and the append fails `log_unavailable`
   * instead of starting the stream over at seq 1, which would fork it.
   */
  readonly existing?: boolean;
  /**
   * This call repeats one that failed `log_unavailable` (its outcome is
   * unknown): if that one landed, its result is returned instead of
   * appending the event a second time. Only a caller knows whether an event
   * equal to the last one is a retry or a new event (two `list_changed`
   * notifications are byte for byte the same), so without this flag an
   * equal event is always appended. Covers retries on the same `SessionLog`;
   * across instances, a writer taking over reads the log first.
   */
  readonly retry?: boolean;
  /**
   * This append opens a stream nobody has written yet, of the session given
   * (a fresh random POST stream id, or stream `0` of a session just
   * created): the writer starts at seq 1 with that session's epoch, without
   * reading the session and the stream's end from the log, two round trips
   * before a client's first byte. Were the stream not new after all, the
   * append fails `writer_conflict` (its message id is taken) or readers find
   * the chain broken (`diverged`): explicit, never a silent fork.
   */
  readonly opensStream?: { readonly epoch: string };
  /**
   * The writer appending (`Tether-Writer`): a process's incarnation id that
   * answers on `<prefix>.writer.<id>` while it lives (see `holdPresence`).
   * A reader that finds it gone takes the stream over at once.
   */
  readonly writer?: string;
  /**
   * Take the stream over: this append must directly follow the event at
   * seq `afterSeq`, the head the caller found orphaned. Any writer cached
   * here is dropped and the stream's end read again; if someone appended
   * after that head (the old writer lives, or another instance claimed it
   * first), the append fails `writer_conflict` and nothing is written.
   */
  readonly claim?: { readonly afterSeq: number };
  /**
   * Several writers append to this stream by design (an SDK server's
   * standalone stream, written by whichever instance has a notification).
   * Without it a stream has one writer at a time: after an append of
   * `writer` ended in doubt, finding another writer's event at the stream's
   * end means the stream was taken over meanwhile, and this writer's
   * appends fail `writer_conflict` until it claims the stream again.
   */
  readonly shared?: boolean;
}

export interface AppendResult {
  readonly id: string;
  readonly seq: number;
  readonly pos: number;
}

const PUBLISH_ATTEMPTS = 3;
/** Refusals because the subject or msg id is still being proposed: asked again this often, after 5, 10, … (at most 50) ms. */
const BUSY_RETRIES = 20;
const BUSY_WAIT_MS = 5;

/** An append whose outcome is unknown: every attempt timed out or lost its reply. */
export interface InDoubtAppend {
  readonly seq: number;
  readonly prev: number;
  readonly kind: EventKind;
  readonly payload: Uint8Array;
  /** Its `Tether-Writer` ('' without one). */
  readonly writer: string;
}

/**
 * The single writer of one session stream. Appends are serialised: each one
 * names the previous event's position (`Tether-Prev`) and expects it to be
 * the subject's last (the tripwire), so they cannot be pipelined.
 *
 * After any failure whose outcome is unknown the writer is `broken` and must
 * be reopened, which rebuilds its position from the log.
 */
export class StreamWriter {
  readonly sessionId: string;
  readonly stream: string;
  readonly epoch: string;
  #ctx: LogContext;
  #last: Cursor;
  #ended: boolean;
  #broken: SessionLogError | undefined;
  #inDoubt: InDoubtAppend | undefined;
  #queue: Promise<unknown> = Promise.resolve();
  /** Appends called and not yet settled (the one running included). */
  #inFlight = 0;
  readonly #settled = (): void => {
    this.#inFlight -= 1;
  };
  readonly #epochHeader: string;
  readonly #headers = new EncodedHeaders();
  /** The headers every append of this writer repeats while its writer and trace context stay the same. */
  #fixedHeaders: { readonly writer: string | undefined; readonly traceparent: string | undefined; readonly tail: string } | undefined;

  /** `Tether-Writer` of the event this writer opened at ('' for none, or a new stream): who held the stream before it. */
  readonly headWriter: string;

  private constructor(ctx: LogContext, sessionId: string, stream: string, epoch: string, last: Cursor, ended: boolean, headWriter = '') {
    this.#ctx = ctx;
    this.headWriter = headWriter;
    this.sessionId = sessionId;
    this.stream = stream;
    this.epoch = epoch;
    this.#last = last;
    this.#ended = ended;
    this.#epochHeader = `${LogHeader.epoch}: ${headerValue(epoch)}\r\n`;
  }

  /** A writer for a stream nobody has written (see `AppendOptions.opensStream`): seq 1 next, no log read. */
  static create(ctx: LogContext, sessionId: string, stream: string, epoch: string): StreamWriter {
    return new StreamWriter(ctx, sessionId, stream, epoch, { seq: 0, pos: 0 }, false);
  }

  /**
   * Opens the writer at the stream's current end: the last message of its
   * subject. A writer taking over from a dead one continues its chain.
   */
  static async open(ctx: LogContext, sessionId: string, stream: string, epoch: string, existing = false): Promise<StreamWriter> {
    let last: StoredMsg | null;
    try {
      last = await ctx.jsm.streams.getMessage(ctx.config.streamName, { last_by_subj: ctx.subjects.log(sessionId, stream) });
    } catch (err) {
      throw unavailable(err);
    }
    if (last === null && existing) {
      throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'the log answered that a stream with events holds none (a leader still catching up?); retry', { sessionId, stream });
    }
    if (last === null) return new StreamWriter(ctx, sessionId, stream, epoch, { seq: 0, pos: 0 }, false);
    const decoded = decodeLogEvent(sessionId, stream, last.seq, last.header, last.data);
    if (!decoded.ok || decoded.event.epoch !== epoch) {
      throw new SessionLogError(SessionLogErrorCode.streamDiverged, 'the last event of the stream does not belong to this session epoch', {
        sessionId,
        stream,
        pos: last.seq,
      });
    }
    const { seq, pos, kind, writer } = decoded.event;
    return new StreamWriter(ctx, sessionId, stream, epoch, { seq, pos }, kind === EventKind.end, writer ?? '');
  }

  /** The last event appended (seq 0 before the first). */
  get last(): Cursor {
    return this.#last;
  }

  get ended(): boolean {
    return this.#ended;
  }

  get broken(): boolean {
    return this.#broken !== undefined;
  }

  /** The append that broke this writer with an unknown outcome, if that is how it broke. */
  get inDoubt(): InDoubtAppend | undefined {
    return this.#inDoubt;
  }

  /**
   * Settles an in-doubt append of a previous writer of this stream: if the
   * log's last event is exactly that append (same seq, prev, kind and bytes),
   * it landed and its result is returned; otherwise it did not land. Matching
   * on seq and prev, not only bytes, keeps two identical consecutive events
   * apart.
   */
  async settle(doubt: InDoubtAppend): Promise<AppendResult | undefined> {
    if (this.#last.seq !== doubt.seq) return undefined;
    const stored = await this.#ctx.jsm.streams.getMessage(this.#ctx.config.streamName, { seq: this.#last.pos });
    if (stored === null) return undefined;
    if (!storedIs(stored, { prev: doubt.prev, kind: doubt.kind, payload: doubt.payload, writer: doubt.writer })) return undefined;
    return { id: encodeEventId({ epoch: this.epoch, stream: this.stream, seq: doubt.seq, pos: this.#last.pos }), seq: doubt.seq, pos: this.#last.pos };
  }

  /** Appends one event; resolves once JetStream has acknowledged it. Calls are applied in call order. */
  append(kind: EventKind, payload: Uint8Array, options: AppendOptions = {}): Promise<AppendResult> {
    // Nothing in flight: start now, not a microtask later behind an empty queue.
    const run = this.#inFlight === 0 ? this.#appendNow(kind, payload, options) : this.#queue.then(() => this.#appendNow(kind, payload, options));
    this.#inFlight += 1;
    this.#queue = run.then(this.#settled, this.#settled);
    return run;
  }

  async #appendNow(kind: EventKind, payload: Uint8Array, options: AppendOptions): Promise<AppendResult> {
    const where = { sessionId: this.sessionId, stream: this.stream };
    if (this.#broken !== undefined) throw this.#broken;
    if (this.#ended) throw new SessionLogError(SessionLogErrorCode.streamEnded, 'the stream has ended; nothing can be appended after its end marker', where);
    if (payload.byteLength > this.#ctx.config.maxPayloadBytes) {
      throw new SessionLogError(
        SessionLogErrorCode.payloadTooLarge,
        `event payload is ${payload.byteLength} bytes; the log accepts at most ${this.#ctx.config.maxPayloadBytes}`,
        { ...where, detail: { bytes: payload.byteLength, maxBytes: this.#ctx.config.maxPayloadBytes } },
      );
    }
    const seq = this.#last.seq + 1;
    const prev = this.#last.pos;
    const writer = options.writer ?? '';
    const msgID = msgIdOf(this.sessionId, this.stream, seq);
    // One header object per writer, its text replaced per append: appends are serialised, and publish encodes it at once.
    const h = this.#headers;
    h.text = this.#headerText(seq, prev, kind, msgID, options);
    const subject = this.#ctx.subjects.log(this.sessionId, this.stream);

    let lastErr: unknown;
    let busy = 0;
    for (let attempt = 1; attempt <= PUBLISH_ATTEMPTS; attempt += 1) {
      try {
        const ack = await AckInbox.of(this.#ctx.nc).publish(subject, payload, h, this.#ctx.config.requestTimeoutMs);
        // A duplicate ack means a message with our msg id is stored. It is
        // ours only if it is our earlier attempt; a rival writer that computed
        // the same seq would have stored different bytes (the tripwire runs
        // after the duplicate check on the server, so it cannot catch this).
        if (ack.duplicate) await this.#verifyDuplicate(ack.seq, kind, payload, writer);
        return this.#stored(seq, ack.seq, kind);
      } catch (err) {
        if (err instanceof SessionLogError) throw this.#break(err);
        // The subject or our msg id is still being proposed on a replicated
        // stream (2.11+), or nobody answered (a stream just created, see
        // isNoResponders): this attempt was refused, not stored. The leader
        // clears the mark only after it sent the previous append's ack, so a
        // single writer meets it too. Ask again once that settles; it does
        // not count as an attempt with an unknown outcome.
        const code = jsErrorCode(err);
        const busyNow = code === JsErrCode.streamSubjectInProcess || code === JsErrCode.streamDuplicateInProcess || isNoResponders(err);
        if (busyNow && busy < BUSY_RETRIES) {
          busy += 1;
          attempt -= 1;
          await delay(Math.min(BUSY_WAIT_MS * busy, 50));
          continue;
        }
        if (code === JsErrCode.streamWrongLastSequence || /wrong last sequence/i.test(String(err))) {
          // Our own attempt may have landed with its reply lost. Where the
          // server checks the expected sequence before the message id (R1)
          // that reads as "wrong last sequence", not a duplicate ack. Same
          // rule as a duplicate ack: it is ours only if the subject's last
          // message is exactly this event (seq, prev, kind, epoch, bytes).
          let landed: number | undefined;
          try {
            landed = await this.#landedAs(subject, { seq, prev, kind, epoch: this.epoch, payload, writer });
          } catch (readErr) {
            // Which event holds the subject's end is unknown, so is this
            // append's outcome: not a conflict (the caller would give the
            // stream up), but a doubt a retry settles.
            lastErr = readErr;
            continue;
          }
          if (landed !== undefined) return this.#stored(seq, landed, kind);
          throw this.#break(
            new SessionLogError(SessionLogErrorCode.writerConflict, 'another writer appended to this stream; this writer stops', {
              ...where,
              seq,
              expectedPrev: prev,
            }, { cause: err }),
          );
        }
        lastErr = err;
        // Timeouts and lost replies are retried with the same msg id and
        // expectation: the server's duplicate window makes this idempotent.
      }
    }
    this.#inDoubt = { seq, prev, kind, payload, writer };
    throw this.#break(unavailable(lastErr));
  }

  /**
   * The NATS header block of one append, as text: the chain headers, then
   * `Nats-Msg-Id` and `Nats-Expected-Last-Subject-Sequence` (the same
   * headers, values and order that nats.js's `headers()` and `js.publish`
   * built, so what is stored is byte for byte what it was). Built as one
   * string: `MsgHdrsImpl.set` canonicalizes, scans every key and validates
   * per call, a few percent of the gateway's CPU per event in profiles. The
   * part that stays the same across a stream's appends (epoch, writer,
   * trace context) is built once.
   */
  #headerText(seq: number, prev: number, kind: EventKind, msgID: string, options: AppendOptions): string {
    const writer = options.writer;
    const traceparent = options.traceparent;
    let fixed = this.#fixedHeaders;
    if (fixed === undefined || fixed.writer !== writer || fixed.traceparent !== traceparent) {
      let tail = '';
      if (traceparent !== undefined) tail += `${LogHeader.traceparent}: ${storedHeaderValue(traceparent)}\r\n`;
      if (writer !== undefined) tail += `${LogHeader.writer}: ${headerValue(writer)}\r\n`;
      fixed = { writer, traceparent, tail };
      this.#fixedHeaders = fixed;
    }
    let text = `NATS/1.0\r\n${this.#epochHeader}${LogHeader.seq}: ${seq}\r\n${LogHeader.prev}: ${prev}\r\n${LogHeader.kind}: ${kind}\r\n`;
    if (options.upstreamId !== undefined) text += `${LogHeader.upstreamId}: ${storedHeaderValue(options.upstreamId)}\r\n`;
    if (kind === EventKind.end) text += `${LogHeader.endReason}: ${headerValue(options.endReason ?? 'complete')}\r\n`;
    return `${text}${fixed.tail}${LogHeader.msgId}: ${msgID}\r\n${EXPECTED_LAST_SUBJECT_SEQUENCE}: ${prev}\r\n\r\n`;
  }

  /** The append landed at `pos`: the writer moves on, and the caller gets its id. */
  #stored(seq: number, pos: number, kind: EventKind): AppendResult {
    this.#last = { seq, pos };
    if (kind === EventKind.end) this.#ended = true;
    return { id: encodeEventId({ epoch: this.epoch, stream: this.stream, seq, pos }), seq, pos };
  }

  /** The position of this exact event if it is the subject's last message (read from the leader), else undefined. */
  async #landedAs(subject: string, event: StoredEvent): Promise<number | undefined> {
    const stored = await this.#ctx.jsm.streams.getMessage(this.#ctx.config.streamName, { last_by_subj: subject });
    return stored !== null && storedIs(stored, event) ? stored.seq : undefined;
  }

  async #verifyDuplicate(pos: number, kind: EventKind, payload: Uint8Array, writer: string): Promise<void> {
    const stored = await this.#ctx.jsm.streams.getMessage(this.#ctx.config.streamName, { seq: pos });
    // The writer is compared too: two instances claiming an orphaned stream
    // append the same empty prime at the same seq (same msg id), and only
    // the header tells the winner from the one that must stand down.
    if (stored === null || !storedIs(stored, { kind, epoch: this.epoch, payload, writer })) {
      throw new SessionLogError(SessionLogErrorCode.writerConflict, 'another writer stored this sequence number first', {
        sessionId: this.sessionId,
        stream: this.stream,
        pos,
      });
    }
  }

  #break(err: SessionLogError): SessionLogError {
    this.#broken = err;
    return err;
  }
}

interface StoredEvent {
  readonly kind: EventKind;
  readonly payload: Uint8Array;
  readonly seq?: number;
  readonly prev?: number;
  readonly epoch?: string;
  /** '' for an event appended without a writer. */
  readonly writer?: string;
}

/** Whether a stored message is this event: its kind and bytes, and each chain header given. */
function storedIs(stored: StoredMsg, event: StoredEvent): boolean {
  const h = stored.header;
  return (
    h.get(LogHeader.kind) === event.kind &&
    (event.writer === undefined || h.get(LogHeader.writer) === event.writer) &&
    (event.seq === undefined || h.get(LogHeader.seq) === String(event.seq)) &&
    (event.prev === undefined || h.get(LogHeader.prev) === String(event.prev)) &&
    (event.epoch === undefined || h.get(LogHeader.epoch) === event.epoch) &&
    Buffer.compare(Buffer.from(stored.data), Buffer.from(event.payload)) === 0
  );
}
