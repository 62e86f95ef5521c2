import { encodeSseComment } from '@tether/protocol';

/** The comment an idle stream gets (DESIGN §8). */
export const HEARTBEAT = encodeSseComment('keepalive');

/** Shortest tick, whatever the heartbeat interval. */
const MIN_TICK_MS = 50;

/** What a heartbeat is written to: a `ServerResponse`, or anything shaped like one. */
export interface HeartbeatSink {
  write(chunk: string): unknown;
  readonly writableEnded: boolean;
  readonly destroyed: boolean;
  /** Bytes are already queued for a client that is not reading: no heartbeat adds to them. */
  readonly writableNeedDrain: boolean;
}

/** One delivery's registration. */
export interface HeartbeatHandle {
  /** The delivery wrote something: it is not idle. */
  touch(): void;
  /** The delivery is over: no heartbeat after this. Idempotent. */
  remove(): void;
}

class Entry implements HeartbeatHandle {
  lastWriteAt: number;
  readonly sink: HeartbeatSink;
  readonly idleMs: number;
  readonly #leave: (e: Entry) => void;

  constructor(leave: (e: Entry) => void, sink: HeartbeatSink, idleMs: number) {
    this.#leave = leave;
    this.sink = sink;
    this.idleMs = idleMs;
    this.lastWriteAt = Date.now();
  }

  touch(): void {
    this.lastWriteAt = Date.now();
  }

  remove(): void {
    this.#leave(this);
  }
}

/**
 * The heartbeat ticker of one gateway instance: one unref'd interval for all
 * its SSE deliveries, not a timer per stream, so an idle stream costs a set
 * entry and no timer. Started when the first delivery registers, stopped
 * when the last one leaves. Each tick writes `: keepalive` to every delivery
 * idle for at least its `idleMs`, never to one whose response ended (or
 * whose socket is backed up: bytes are queued for it already).
 *
 * The tick is half the shortest `idleMs` registered (at least 50 ms), so a
 * stream idle for `idleMs` gets its heartbeat within 1.5 × `idleMs`, as with
 * a timer per stream. The tick gets shorter when a delivery with a shorter
 * `idleMs` registers; it is recomputed when the ticker restarts.
 */
export class Heartbeats {
  readonly #entries = new Set<Entry>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #tickMs = Number.POSITIVE_INFINITY;
  // One function for all entries, not a closure per delivery.
  readonly #leave = (entry: Entry): void => {
    if (!this.#entries.delete(entry)) return;
    if (this.#entries.size === 0) this.#stop();
  };

  /** Deliveries registered. */
  get size(): number {
    return this.#entries.size;
  }

  /** Whether the interval is running (exactly while deliveries are registered). */
  get running(): boolean {
    return this.#timer !== undefined;
  }

  /** Registers a delivery that wants a heartbeat after `idleMs` without writes. Call `remove()` when it ends. */
  add(sink: HeartbeatSink, idleMs: number): HeartbeatHandle {
    if (!Number.isFinite(idleMs) || idleMs <= 0) throw new TypeError(`heartbeat idleMs must be a positive number, got ${String(idleMs)}`);
    const entry = new Entry(this.#leave, sink, idleMs);
    this.#entries.add(entry);
    const tickMs = Math.max(MIN_TICK_MS, Math.floor(idleMs / 2));
    if (this.#timer === undefined || tickMs < this.#tickMs) this.#start(tickMs);
    return entry;
  }

  /** Writes the heartbeats due now; the interval calls it, tests may too. */
  tick(): void {
    const now = Date.now();
    for (const e of this.#entries) {
      const { sink } = e;
      if (now - e.lastWriteAt < e.idleMs || sink.writableEnded || sink.destroyed || sink.writableNeedDrain) continue;
      e.lastWriteAt = now;
      try {
        sink.write(HEARTBEAT);
      } catch {
        // One broken socket must not stop the heartbeats of the others; its delivery ends on its own.
      }
    }
  }

  #start(tickMs: number): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#tickMs = tickMs;
    this.#timer = setInterval(() => this.tick(), tickMs);
    this.#timer.unref();
  }

  #stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#tickMs = Number.POSITIVE_INFINITY;
  }
}

/**
 * The ticker `deliver()` uses when it is given none. One per process is one
 * per gateway instance for `tether-gateway`; a process embedding several
 * gateways may give each its own.
 */
export const defaultHeartbeats = new Heartbeats();
