import { EventKind } from '@tether/protocol';
import type { SessionRecord, SessionLog } from '@tether/session-log';
import { progressPayload } from './payload.js';
import { progress } from './stats.js';

/** One session stream written by the fill, with the log position of each event. */
export interface FilledStream {
  readonly sessionId: string;
  readonly epoch: string;
  readonly streamId: string;
  /** JetStream sequence of event seq k+1 at index k. */
  readonly pos: number[];
}

export interface FillReport {
  readonly added: number;
  readonly seconds: number;
  readonly perSec: number;
}

interface SessionPlan {
  record: Promise<SessionRecord> | undefined;
  streamsLeft: number;
}

const EMPTY = new Uint8Array(0);

/**
 * Fills a session log the way many clients would: sessions of 1-3 streams,
 * streams of 100-400 events (the last an `end` marker), `concurrency`
 * streams written at once so streams interleave in the log.
 *
 * A stream's index in `streams` is fixed when it is planned, not when its
 * writing starts, so two fills drawing from generators of the same seed hold
 * the same shapes at the same indices (the same sample plans fit both), even
 * on logs of different layouts whose appends finish in different orders.
 */
export class LogFill {
  readonly streams: FilledStream[] = [];
  /** Stream index of every stored event, in the order the log acknowledged them. */
  readonly order: number[] = [];
  readonly #log: SessionLog;
  readonly #principal: string;
  readonly #rand: { int(min: number, max: number): number };
  /** Names the log in progress lines (`N=16`), when several are filled. */
  readonly #label: string;
  #session: SessionPlan = { record: undefined, streamsLeft: 0 };
  /** Streams planned so far: the next one's index. */
  #planned = 0;

  constructor(log: SessionLog, principal: string, rand: { int(min: number, max: number): number }, label = '') {
    this.#log = log;
    this.#principal = principal;
    this.#rand = rand;
    this.#label = label === '' ? '' : ` ${label}`;
  }

  get total(): number {
    return this.order.length;
  }

  /** Appends until the log holds exactly `target` events. */
  async fillTo(target: number, concurrency: number): Promise<FillReport> {
    const from = this.total;
    let plannedEvents = from;
    const next = (): { session: Promise<SessionRecord>; length: number; index: number } | undefined => {
      if (plannedEvents >= target) return undefined;
      if (this.#session.streamsLeft === 0) this.#session = { record: undefined, streamsLeft: this.#rand.int(1, 3) };
      this.#session.streamsLeft -= 1;
      this.#session.record ??= this.#log.createSession(this.#principal);
      const length = Math.min(this.#rand.int(100, 400), target - plannedEvents);
      plannedEvents += length;
      const index = this.#planned;
      this.#planned += 1;
      return { session: this.#session.record, length, index };
    };
    const start = performance.now();
    const ticker = setInterval(() => {
      const done = this.total - from;
      progress(`fill${this.#label}: ${this.total.toLocaleString('en-US')} / ${target.toLocaleString('en-US')} events (${Math.round(done / ((performance.now() - start) / 1000))} events/s)`);
    }, 5_000);
    try {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let job = next(); job !== undefined; job = next()) await this.#writeStream(await job.session, job.length, job.index);
        }),
      );
    } finally {
      clearInterval(ticker);
    }
    const seconds = (performance.now() - start) / 1000;
    return { added: this.total - from, seconds, perSec: (this.total - from) / seconds };
  }

  async #writeStream(session: SessionRecord, length: number, index: number): Promise<void> {
    const stream: FilledStream = { sessionId: session.sessionId, epoch: session.epoch, streamId: this.#log.newStreamId(), pos: [] };
    this.streams[index] = stream;
    for (let i = 0; i < length; i += 1) {
      const end = i === length - 1;
      const payload = end ? EMPTY : progressPayload(stream.streamId, i);
      const result = await this.#log.append(session.sessionId, stream.streamId, end ? EventKind.end : EventKind.event, payload);
      stream.pos.push(result.pos);
      this.order.push(index);
    }
  }
}
