/**
 * Today's session-log figures on the 2.9.10 floor, which DESIGN section 12
 * says a run on 2.9.10 must not fall behind. Copied by hand from
 * docs/benchmarks.md, "Session log (`npm run bench:log`)", before the
 * two-server harness existed (every run there was on 2.9.10):
 *
 * - append, and resume at 10k and 100k: the table of "Update: `noAsyncTraces`
 *   (`202da73`), rerun on `1465f47`" (BENCH_LOG_1M=no BENCH_LOG_ROUNDS=3, the
 *   machine otherwise idle);
 * - resume at 1M: the main table "Resume latency, 100-event backlog", the only
 *   1M figures on record (the 416 s run, before `noAsyncTraces`, box not quiet).
 *
 * Update these only from a full `npm run bench:log` on 2.9.10 written into
 * docs/benchmarks.md, and say so here.
 */
export interface FloorResume {
  readonly p50: number;
  readonly p99: number;
  /** SDK in-memory store p50 / Tether p50. */
  readonly sdkRatio?: number;
}

export interface FloorToday {
  readonly version: string;
  /** Where the figures came from, printed under the report. */
  readonly source: string;
  /** Append events/s at 64 streams, and Tether / raw at 1 and 64 streams. */
  readonly append: { readonly raw64: number; readonly shaped64: number; readonly tether64: number; readonly ratio1: number; readonly ratio64: number };
  /** Resume latency (ms) by stored events. */
  readonly resume: ReadonlyMap<number, FloorResume>;
}

export const FLOOR_TODAY: FloorToday = {
  version: '2.9.10',
  source:
    'docs/benchmarks.md, session log on 2.9.10: append and resume at 10k/100k from "Update: noAsyncTraces (202da73), rerun on 1465f47"; resume at 1M from the main table (before noAsyncTraces)',
  append: { raw64: 19_110, shaped64: 12_522, tether64: 12_323, ratio1: 0.68, ratio64: 12_323 / 19_110 },
  resume: new Map([
    [10_000, { p50: 23.4, p99: 85.6 }],
    [100_000, { p50: 13.3, p99: 86.8, sdkRatio: 8.39 }],
    [1_000_000, { p50: 24.9, p99: 295, sdkRatio: 52 }],
  ]),
};
