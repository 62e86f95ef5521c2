import { randomUUID } from 'node:crypto';
import type { TetherEventStore } from '@tether/sdk';
import { progress, summarize } from '../stats.js';
import type { Summary } from '../stats.js';
import { newSdkStore, notification, response } from './stores.js';
import type { BenchEventStore, StoreKind, TetherSide } from './stores.js';

/** Events a resume must deliver: the backlog after the cursor. */
export const BACKLOG = 100;
/** Streams written at once while filling the Tether store, and appends in flight per stream. */
const FILL_STREAMS = 16;
const FILL_WINDOW = 100;

export interface ResumeBudget {
  readonly warmup: number;
  readonly max: number;
  readonly min: number;
  readonly budgetMs: number;
}

export interface StoreResume {
  /** From `replayEventsAfter` to its resolution (the SDK transport answers only then), every backlog event sent. */
  readonly total: Summary;
  /** Samples that did not send exactly the 100 events stored after the cursor, in order (should be 0). */
  readonly anomalies: number;
  /** Mean events sent per sample (100 when right; server-everything's store sends every later event of the session). */
  readonly meanSent: number;
}

/** A peer store (test/bench/peers/) resumed beside the two. */
export interface PeerResume {
  readonly store: StoreKind;
  readonly resume: StoreResume;
}

/** A peer's store for the fixture's one session. */
export interface FixturePeer {
  readonly kind: StoreKind;
  readonly store: BenchEventStore;
  /** Written as the SDK store is (one stream after another, one event at a time), or 16 streams at once like Tether's. */
  readonly fill: 'sequential' | 'lanes';
  /** Waits for what a fill set off in the background (an AOF rewrite) to end before anything is timed. */
  readonly settle?: () => Promise<void>;
}

export interface ResumeLevel {
  readonly storedEvents: number;
  readonly streams: number;
  readonly tether: StoreResume;
  readonly sdk: StoreResume;
  /** The peers, in the order given to the fixture. */
  readonly peers: readonly PeerResume[];
  /** The SDK store resumed at the cursor 100 events before a stream's end *in the order stored*: what it sent. */
  readonly sdkStoredOrderProbe: OrderProbe;
}

export interface OrderProbe {
  readonly probes: number;
  /** Mean over probes: events sent, of the 100 stored after the cursor, and of them in stored order. */
  readonly meanSent: number;
  readonly meanMissing: number;
  /** Sent although stored before the cursor. */
  readonly meanExtra: number;
  /** Probes whose replay was exactly the 100 stored after the cursor, in order. */
  readonly exact: number;
}

interface FilledStream {
  readonly sdkStream: string;
  /** Ids in the order `storeEvent` returned them (the order the events were stored). */
  readonly tetherIds: string[];
  readonly sdkIds: string[];
  /** `sdkIds` in the order the SDK store replays them (`localeCompare` of the ids). */
  sdkSorted: string[] | undefined;
  /** Each peer's ids, in the order stored. */
  readonly peerIds: Partial<Record<StoreKind, string[]>>;
}

/**
 * One session holding `total` events in streams of `streamEvents` (progress
 * notifications, then the response that ends the stream), in a
 * `TetherEventStore` and in the SDK's example store, the same streams with
 * the same messages. Grown level by level.
 */
export class ResumeFixture {
  readonly streams: FilledStream[] = [];
  readonly #tether: TetherEventStore;
  readonly #sdk = newSdkStore();
  readonly #streamEvents: number;
  readonly #peers: readonly FixturePeer[];

  private constructor(tether: TetherEventStore, streamEvents: number, peers: readonly FixturePeer[]) {
    this.#tether = tether;
    this.#streamEvents = streamEvents;
    this.#peers = peers;
  }

  static async create(side: TetherSide, streamEvents: number, peers: readonly FixturePeer[] = []): Promise<ResumeFixture> {
    if (streamEvents <= BACKLOG) throw new Error(`BENCH_SDK_STREAM_EVENTS must exceed ${BACKLOG}, not ${streamEvents}`);
    return new ResumeFixture(await side.newStore(), streamEvents, peers);
  }

  get total(): number {
    return this.streams.length * this.#streamEvents;
  }

  /** Adds whole streams until the stores hold at least `target` events. */
  async fillTo(target: number): Promise<void> {
    const streams = Math.ceil((target - this.total) / this.#streamEvents);
    if (streams <= 0) return;
    const fresh: FilledStream[] = Array.from({ length: streams }, () => ({ sdkStream: randomUUID(), tetherIds: [], sdkIds: [], sdkSorted: undefined, peerIds: {} }));
    const started = performance.now();
    let next = 0;
    const lane = async (): Promise<void> => {
      for (let i = next++; i < fresh.length; i = next++) await this.#fillTether(fresh[i] as FilledStream, this.streams.length + i);
    };
    await Promise.all(Array.from({ length: FILL_STREAMS }, lane));
    const tetherS = (performance.now() - started) / 1000;
    const sdkStarted = performance.now();
    for (const [i, stream] of fresh.entries()) {
      for (let k = 0; k < this.#streamEvents; k += 1) stream.sdkIds.push(await this.#sdk.storeEvent(stream.sdkStream, this.#message(stream, this.streams.length + i, k)));
    }
    const sdkMs = performance.now() - sdkStarted;
    const peerMs: string[] = [];
    for (const peer of this.#peers) {
      const peerStarted = performance.now();
      const write = async (stream: FilledStream, index: number): Promise<void> => {
        const ids = (stream.peerIds[peer.kind] = [] as string[]);
        for (let k = 0; k < this.#streamEvents; k += 1) ids.push(await peer.store.storeEvent(stream.sdkStream, this.#message(stream, index, k)));
      };
      if (peer.fill === 'sequential') {
        for (const [i, stream] of fresh.entries()) await write(stream, this.streams.length + i);
      } else {
        let nextPeer = 0;
        const peerLane = async (): Promise<void> => {
          for (let i = nextPeer++; i < fresh.length; i = nextPeer++) await write(fresh[i] as FilledStream, this.streams.length + i);
        };
        await Promise.all(Array.from({ length: FILL_STREAMS }, peerLane));
      }
      peerMs.push(`${peer.kind} ${Math.round(performance.now() - peerStarted)} ms`);
      await peer.settle?.();
    }
    this.streams.push(...fresh);
    const added = streams * this.#streamEvents;
    progress(`fill: +${added.toLocaleString('en-US')} events (${streams} streams) to ${this.total.toLocaleString('en-US')}: Tether ${tetherS.toFixed(1)} s (${Math.round(added / tetherS)}/s, ${FILL_STREAMS} streams at once), SDK store ${Math.round(sdkMs)} ms${peerMs.length > 0 ? `; ${peerMs.join(', ')}` : ''}`);
  }

  /** Resume latency of both stores at the current size, at cursors 100 events before a random stream's end. */
  async measure(budget: ResumeBudget, probes: number): Promise<ResumeLevel> {
    const pick = (): FilledStream => this.streams[Math.floor(Math.random() * this.streams.length)] as FilledStream;
    const tether = await this.#measureStore(budget, pick, (s) => s.tetherIds, this.#tether);
    const sdk = await this.#measureStore(budget, pick, (s) => (s.sdkSorted ??= [...s.sdkIds].sort((a, b) => a.localeCompare(b))), this.#sdk);
    const peers: PeerResume[] = [];
    for (const peer of this.#peers) {
      const resume = await this.#measureStore(budget, pick, (s) => s.peerIds[peer.kind] ?? [], peer.store);
      progress(`resume ${peer.kind}: p50 ${resume.total.p50.toFixed(3)} ms, p99 ${resume.total.p99.toFixed(3)} ms (n=${resume.total.n}), ${resume.meanSent.toFixed(0)} events sent per resume`);
      peers.push({ store: peer.kind, resume });
    }
    const sdkStoredOrderProbe = await this.#probeStoredOrder(probes, pick);
    return { storedEvents: this.total, streams: this.streams.length, tether, sdk, peers, sdkStoredOrderProbe };
  }

  async #fillTether(stream: FilledStream, streamIndex: number): Promise<void> {
    for (let from = 0; from < this.#streamEvents; from += FILL_WINDOW) {
      // Issued without an await in between: the store appends them in call order.
      const window = Array.from({ length: Math.min(FILL_WINDOW, this.#streamEvents - from) }, (_, j) =>
        this.#tether.storeEvent(stream.sdkStream, this.#message(stream, streamIndex, from + j)),
      );
      stream.tetherIds.push(...(await Promise.all(window)));
    }
  }

  #message(stream: FilledStream, streamIndex: number, k: number) {
    return k === this.#streamEvents - 1 ? response(streamIndex) : notification(stream.sdkStream, k);
  }

  async #measureStore(budget: ResumeBudget, pick: () => FilledStream, order: (s: FilledStream) => string[], store: BenchEventStore): Promise<StoreResume> {
    let anomalies = 0;
    let sentTotal = 0;
    const once = async (): Promise<number> => {
      const ids = order(pick());
      const expected = ids.slice(-BACKLOG);
      const cursor = ids[ids.length - BACKLOG - 1] as string;
      const sent: string[] = [];
      const start = performance.now();
      await store.replayEventsAfter(cursor, { send: async (id) => void sent.push(id) });
      const elapsed = performance.now() - start;
      if (sent.length !== BACKLOG || sent.some((id, i) => id !== expected[i])) anomalies += 1;
      sentTotal += sent.length;
      return elapsed;
    };
    for (let i = 0; i < budget.warmup; i += 1) await once();
    anomalies = 0;
    sentTotal = 0;
    const samples: number[] = [];
    const start = performance.now();
    while (samples.length < budget.max && (samples.length < budget.min || performance.now() - start < budget.budgetMs)) samples.push(await once());
    return { total: summarize(samples), anomalies, meanSent: sentTotal / Math.max(1, samples.length) };
  }

  /**
   * The SDK store orders a replay by `localeCompare` of its ids
   * (`<stream>_<Date.now()>_<random>`), so events stored in the same
   * millisecond replay in random order, and a cursor skips or repeats its
   * same-millisecond neighbours. Measured here, never timed.
   */
  async #probeStoredOrder(probes: number, pick: () => FilledStream): Promise<OrderProbe> {
    let sent = 0;
    let missing = 0;
    let extra = 0;
    let exact = 0;
    for (let p = 0; p < probes; p += 1) {
      const ids = pick().sdkIds;
      const after = ids.slice(-BACKLOG);
      const expected = new Set(after);
      const got: string[] = [];
      await this.#sdk.replayEventsAfter(ids[ids.length - BACKLOG - 1] as string, { send: async (id) => void got.push(id) });
      sent += got.length;
      missing += after.filter((id) => !got.includes(id)).length;
      extra += got.filter((id) => !expected.has(id)).length;
      if (got.length === BACKLOG && got.every((id, i) => id === after[i])) exact += 1;
    }
    const n = Math.max(1, probes);
    return { probes, meanSent: sent / n, meanMissing: missing / n, meanExtra: extra / n, exact };
  }
}
