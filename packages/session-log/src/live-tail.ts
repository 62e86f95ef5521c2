import type { Msg, Subscription } from '@nats-io/transport-node';
import type { LogContext } from './context.js';
import type { FollowStats } from './reader.js';
import { ControlType } from './wire.js';

export type LiveSignal = 'overflow' | 'closed' | 'aborted' | 'idle';

/**
 * The live half of a reader: stored events as the server republishes them,
 * plus the session's control messages (its shared subscription). Everything here is a cache of the log.
 * The buffer is bounded: when a slow reader lets it fill, it is dropped whole
 * and the reader goes back to the log, so memory never grows with lag.
 */
export class LiveTail {
  readonly #events: Subscription;
  readonly #unlistenControl: () => void;
  readonly #max: number;
  #signal: AbortSignal | undefined;
  #stats: FollowStats;
  #queue: Msg[] = [];
  #overflow = false;
  #closed = false;
  #stopped = false;
  #wake: (() => void) | undefined;
  readonly #onAbort = (): void => this.#notify();

  constructor(ctx: LogContext, sessionId: string, stream: string, signal: AbortSignal | undefined, stats: FollowStats) {
    this.#max = ctx.config.liveBufferMax;
    this.#stats = stats;
    this.#events = ctx.nc.subscribe(ctx.subjects.live(sessionId, stream), {
      callback: (err, msg) => {
        if (err !== null || this.#overflow) return;
        if (this.#queue.length >= this.#max) {
          this.#overflow = true;
          this.#queue = [];
          this.#stats.liveOverflows += 1;
        } else {
          this.#queue.push(msg);
          if (this.#queue.length > this.#stats.liveHighWater) this.#stats.liveHighWater = this.#queue.length;
        }
        this.#notify();
      },
    });
    this.#unlistenControl = ctx.control.listen(sessionId, (message) => {
      if (message.type === ControlType.closed) {
        this.#closed = true;
        this.#notify();
      }
    });
    this.attach(signal, stats);
  }

  /** The reader's signal and counters, for a tail opened before its reader existed. */
  attach(signal: AbortSignal | undefined, stats: FollowStats): void {
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#signal = signal;
    this.#stats = stats;
    signal?.addEventListener('abort', this.#onAbort);
    this.#notify();
  }

  get closed(): boolean {
    return this.#closed;
  }

  get aborted(): boolean {
    return this.#signal?.aborted === true;
  }

  /** Accept live messages again after the reader caught up from the log. */
  rearm(): void {
    this.#overflow = false;
  }

  /** The next live message, or why there is none (`idle`: nothing within `idleMs`, when given). */
  async next(idleMs?: number): Promise<Msg | LiveSignal> {
    const deadline = idleMs === undefined ? undefined : Date.now() + idleMs;
    for (;;) {
      if (this.aborted) return 'aborted';
      if (this.#closed) return 'closed';
      if (this.#overflow) return 'overflow';
      const msg = this.#queue.shift();
      if (msg !== undefined) return msg;
      if (deadline !== undefined && Date.now() >= deadline) return 'idle';
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        if (deadline !== undefined) setTimeout(() => this.#notify(), Math.max(0, deadline - Date.now())).unref();
      });
    }
  }

  close(): void {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    this.#events.unsubscribe();
    this.#unlistenControl();
    this.#queue = [];
    this.#notify();
  }

  #notify(): void {
    const wake = this.#wake;
    this.#wake = undefined;
    wake?.();
  }
}
