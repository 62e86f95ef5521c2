import { randomUUID } from 'node:crypto';
import { median, progress } from '../stats.js';
import { newSdkStore, notification } from './stores.js';
import type { BenchEventStore, StoreKind, TetherSide } from './stores.js';

/** The stores besides Tether's: their kinds in table order, and a store of a fresh session of each. */
export interface OtherStores {
  readonly kinds: readonly StoreKind[];
  newStore(kind: StoreKind): BenchEventStore;
}

const SDK_ONLY: OtherStores = { kinds: ['sdk'], newStore: () => newSdkStore() };

/** How the writes are spread: one stream awaited event by event, or lanes writing at once. */
export const ThroughputMode = {
  sequential: 'sequential, 1 stream',
  streams: '16 streams, 1 session',
  sessions: '16 sessions, 1 stream each',
} as const;
export type ThroughputMode = keyof typeof ThroughputMode;
export const LANES = 16;

export interface ThroughputRow {
  readonly mode: ThroughputMode;
  readonly store: StoreKind;
  readonly events: number;
  /** events/s of each round, and their median. */
  readonly rounds: number[];
  readonly medianPerSec: number;
}

export interface ThroughputKnobs {
  readonly rounds: number;
  /** Events of the sequential run. */
  readonly sequentialEvents: number;
  /** Events per lane of the concurrent runs. */
  readonly laneEvents: number;
}

/**
 * `storeEvent` throughput: every lane awaits each `storeEvent` before the
 * next, as the SDK transport does per stream (it writes the event to its
 * client only once stored). Fresh streams (and sessions) every round, so
 * each stream's opening prime is part of the cost; progress notifications
 * only, so no stream ends.
 */
export async function measureThroughput(side: TetherSide, knobs: ThroughputKnobs, others: OtherStores = SDK_ONLY): Promise<ThroughputRow[]> {
  const rows: ThroughputRow[] = [];
  for (const mode of Object.keys(ThroughputMode) as ThroughputMode[]) {
    for (const store of ['tether', ...others.kinds] as const) {
      const rounds: number[] = [];
      const events = mode === 'sequential' ? knobs.sequentialEvents : LANES * knobs.laneEvents;
      for (let r = 0; r < knobs.rounds; r += 1) rounds.push(await oneRound(side, mode, store, knobs, others));
      const medianPerSec = median(rounds);
      progress(`storeEvent ${store}, ${ThroughputMode[mode]}: ${Math.round(medianPerSec)}/s (median of ${rounds.length})`);
      rows.push({ mode, store, events, rounds, medianPerSec });
    }
  }
  return rows;
}

async function oneRound(side: TetherSide, mode: ThroughputMode, kind: StoreKind, knobs: ThroughputKnobs, others: OtherStores): Promise<number> {
  const lanes = mode === 'sequential' ? 1 : LANES;
  const perLane = mode === 'sequential' ? knobs.sequentialEvents : knobs.laneEvents;
  const newStore = async (): Promise<BenchEventStore> => (kind === 'tether' ? side.newStore() : others.newStore(kind));
  // Sessions are created before the clock starts: `createSession` is not `storeEvent`.
  const shared = mode === 'sessions' ? undefined : await newStore();
  const stores = await Promise.all(Array.from({ length: lanes }, async () => shared ?? newStore()));
  const start = performance.now();
  await Promise.all(
    stores.map(async (store) => {
      const stream = randomUUID();
      for (let k = 0; k < perLane; k += 1) await store.storeEvent(stream, notification(stream, k));
    }),
  );
  return (lanes * perLane) / ((performance.now() - start) / 1000);
}
