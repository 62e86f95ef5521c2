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
 */
export class LogFill {
  readonly streams: FilledStream[] = [];
  /** Stream index of every stored event, in the order the log acknowledged them. */
  readonly order: number[] = [];
  readonly #log: SessionLog;
  readonly #principal: string;
  readonly #rand: { int(min: number, max: number): number };
  #session: SessionPlan = { record: undefined, streamsLeft: 0 };

  constructor(log: SessionLog, principal: string, rand: { int(min: number, max: number): number }) {
    this.#log = log;
    this.#principal = principal;
    this.#rand = rand;
  }

  get total(): number {
    return this.order.length;
  }

  /** Appends until the log holds exactly `target` events. */
  async fillTo(target: number, concurrency: number): Promise<FillReport> {
    const from = this.total;
    let planned = from;
    const next = (): { session: Promise<SessionRecord>; length: number } | undefined => {
      if (planned >= target) return undefined;
      if (this.#session.streamsLeft === 0) this.#session = { record: undefined, streamsLeft: this.#rand.int(1, 3) };
      this.#session.streamsLeft -= 1;
      this.#session.record ??= this.#log.createSession(this.#principal);
      const length = Math.min(this.#rand.int(100, 400), target - planned);
      planned += length;
      return { session: this.#session.record, length };
    };
    const start = performance.now();
    const ticker = setInterval(() => {
      const done = this.total - from;
      progress(`fill: ${this.total.toLocaleString('en-US')} / ${target.toLocaleString('en-US')} events (${Math.round(done / ((performance.now() - start) / 1000))} events/s)`);
    }, 5_000);
    try {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let job = next(); job !== undefined; job = next()) await this.#writeStream(await job.session, job.length);
        }),
      );
    } finally {
      clearInterval(ticker);
    }
    const seconds = (performance.now() - start) / 1000;
    return { added: this.total - from, seconds, perSec: (this.total - from) / seconds };
  }

  async #writeStream(session: SessionRecord, length: number): Promise<void> {
    const stream: FilledStream = { sessionId: session.sessionId, epoch: session.epoch, streamId: this.#log.newStreamId(), pos: [] };
    const index = this.streams.push(stream) - 1;
    for (let i = 0; i < length; i += 1) {
      const end = i === length - 1;
      const payload = end ? EMPTY : progressPayload(stream.streamId, i);
      const result = await this.#log.append(session.sessionId, stream.streamId, end ? EventKind.end : EventKind.event, payload);
      stream.pos.push(result.pos);
      this.order.push(index);
    }
  }
}
