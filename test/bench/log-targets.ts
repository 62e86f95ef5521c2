/**
 * DESIGN section 12's session-log targets, judged on the server's run.
 * Printed, never asserted (STYLE.md: benchmarks are commands that print figures).
 *
 * The resume targets are for the partitioned log (DESIGN section 17): they
 * are judged on the layout with the most partitions measured (N = 16 by
 * default), the unpartitioned log's figures printed beside them.
 */
import type { LayoutLevel, Level, ServerRun } from './log-server.js';
import type { PeerRun } from './peers/log-peers.js';
import { int, ms, ratio } from './stats.js';
import type { Target } from './throughput.js';

export const TARGETS = {
  resumeP50Ms: 2.5,
  resumeP99Ms: 8,
  /** Resume p50 and p99 at `flatTo` over those at `flatFrom`. */
  flat: 1.3,
  flatFrom: 10_000,
  flatTo: 1_000_000,
  /** Resume p50 over the raw batch direct get's p50 of the same events, at every level. */
  rawFactor: 1.3,
  /** Resume p50 over Redis Streams' p50 at `redisAt` stored events, same run. */
  redisFactor: 5,
  redisAt: 1_000_000,
  /** SDK in-memory store p50 over Tether p50 at `sdkAt` stored events. */
  sdkFactor: 50,
  sdkAt: 100_000,
  /** Tether `append` over raw publish-with-ack at `appendAt` streams. */
  appendShare: 0.8,
  appendAt: 64,
} as const;

export type Verdict = 'met' | 'NOT met' | 'not measured';

export interface TargetRow {
  readonly target: string;
  readonly wanted: string;
  readonly measured: string;
  readonly verdict: string;
}

export function verdict(ok: boolean | undefined): Verdict {
  return ok === undefined ? 'not measured' : ok ? 'met' : 'NOT met';
}

/** Median events/s of one throughput target at one concurrency (and partition count), NaN if not run. */
export function tput(throughput: ServerRun['throughput'], target: Target, c: number, partitions = 1): number {
  return throughput.find((t) => t.target === target && t.concurrency === c && t.partitions === partitions)?.medianPerSec ?? Number.NaN;
}

export function levelAt(run: ServerRun, events: number): Level | undefined {
  return run.levels.find((l) => l.events === events);
}

/** The layout of `partitions` at a level. */
export function layoutOf(level: Level | undefined, partitions: number): LayoutLevel | undefined {
  return level?.layouts.find((l) => l.partitions === partitions);
}

/** The partition count the resume targets are judged on: the most measured. */
export function judgedPartitions(run: ServerRun): number {
  return Math.max(...run.partitions);
}

/** `2.92 ms`, or `n/a`. */
export const msUnit = (x: number): string => (Number.isFinite(x) ? `${ms(x)} ms` : 'n/a');

export const pct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : 'n/a');

/** Definite only when both figures are finite. */
const check = (value: number, ok: (v: number) => boolean): boolean | undefined => (Number.isFinite(value) ? ok(value) : undefined);

/** Tether append over raw publish+ack at `c` streams, on the log of `partitions`. */
export const appendShare = (run: ServerRun, c: number, partitions = 1): number =>
  tput(run.throughput, partitions === 1 ? 'tether' : 'tether-partitioned', c, partitions) / tput(run.throughput, 'raw', c);
export const sdkFactor = (level: Level | undefined, l: LayoutLevel | undefined): number => (level === undefined || l === undefined ? Number.NaN : level.sdk.total.p50 / l.tether.total.p50);
/** Resume total over the raw batch direct get of the same events, at p50 and at p99. */
export const rawFactor = (l: LayoutLevel | undefined): { p50: number; p99: number } =>
  l === undefined ? { p50: Number.NaN, p99: Number.NaN } : { p50: l.tether.total.p50 / l.rawDirectBatch.p50, p99: l.tether.total.p99 / l.rawDirectBatch.p99 };

export const appendVerdict = (run: ServerRun, partitions = 1): Verdict => verdict(check(appendShare(run, TARGETS.appendAt, partitions), (v) => v >= TARGETS.appendShare));
export const p50Verdict = (l: LayoutLevel): Verdict => verdict(check(l.tether.total.p50, (v) => v <= TARGETS.resumeP50Ms));
export const p99Verdict = (l: LayoutLevel): Verdict => verdict(check(l.tether.total.p99, (v) => v <= TARGETS.resumeP99Ms));
export const rawVerdict = (l: LayoutLevel): Verdict => verdict(check(rawFactor(l).p50, (v) => v <= TARGETS.rawFactor));
export const sdkVerdict = (level: Level | undefined, l: LayoutLevel | undefined): Verdict => verdict(check(sdkFactor(level, l), (v) => v >= TARGETS.sdkFactor));

/** p50 and p99 at the largest level over the smallest (of one layout), and whether that spans the target's 10k to 1M. */
export function flatness(run: ServerRun, partitions: number): { p50: number; p99: number; from: number; to: number; verdict: Verdict } {
  const firstLevel = levelAt(run, TARGETS.flatFrom) ?? run.levels[0];
  const lastLevel = run.levels[run.levels.length - 1];
  const first = layoutOf(firstLevel, partitions);
  const last = layoutOf(lastLevel, partitions);
  if (firstLevel === undefined || lastLevel === undefined || first === undefined || last === undefined) return { p50: Number.NaN, p99: Number.NaN, from: 0, to: 0, verdict: 'not measured' };
  const p50 = last.tether.total.p50 / first.tether.total.p50;
  const p99 = last.tether.total.p99 / first.tether.total.p99;
  const spans = firstLevel.events === TARGETS.flatFrom && lastLevel.events === TARGETS.flatTo;
  return { p50, p99, from: firstLevel.events, to: lastLevel.events, verdict: spans ? verdict(p50 <= TARGETS.flat && p99 <= TARGETS.flat) : 'not measured' };
}

/** Tether p50 over Redis Streams' (without persistence, and with AOF fsync always) at `redisAt`; NaN where not measured. */
export function redisFactor(run: ServerRun, peers: PeerRun | undefined, partitions: number): { none: number; aof: number } {
  const l = layoutOf(levelAt(run, TARGETS.redisAt), partitions);
  const peer = (store: string): number => peers?.resume.find((r) => r.store === store && r.events === TARGETS.redisAt)?.total?.p50 ?? Number.NaN;
  const tether = l?.tether.total.p50 ?? Number.NaN;
  return { none: tether / peer('redisStreams'), aof: tether / peer('redisStreamsAof') };
}

/**
 * The targets on the server's run, one row each: the resume targets on the
 * layout with the most partitions, the append target on the unpartitioned
 * log and (a row of its own) the partitioned one.
 */
export function currentTargets(run: ServerRun, peers?: PeerRun): TargetRow[] {
  const n = judgedPartitions(run);
  const on = `N=${n}`;
  const rows: TargetRow[] = [];
  for (const events of [10_000, 100_000, 1_000_000]) {
    const l = layoutOf(levelAt(run, events), n);
    rows.push({ target: `${on}: resume p50 @ ${int(events)}`, wanted: `≤ ${TARGETS.resumeP50Ms} ms`, measured: msUnit(l?.tether.total.p50 ?? Number.NaN), verdict: l ? p50Verdict(l) : 'not measured' });
    rows.push({ target: `${on}: resume p99 @ ${int(events)}`, wanted: `≤ ${TARGETS.resumeP99Ms} ms`, measured: msUnit(l?.tether.total.p99 ?? Number.NaN), verdict: l ? p99Verdict(l) : 'not measured' });
    const r = rawFactor(l);
    rows.push({
      target: `${on}: resume / raw batch direct get @ ${int(events)} (p50; p99)`,
      wanted: `≤ ${TARGETS.rawFactor}× at p50`,
      measured: `${ratio(r.p50)}; ${ratio(r.p99)}`,
      verdict: l ? rawVerdict(l) : 'not measured',
    });
  }
  const f = flatness(run, n);
  rows.push({
    target: `${on}: resume flat, ${int(TARGETS.flatFrom)} → ${int(TARGETS.flatTo)} (p50 / p99)`,
    wanted: `≤ ${TARGETS.flat}×`,
    measured: `${ratio(f.p50)} / ${ratio(f.p99)}${f.to === TARGETS.flatTo ? '' : ` (${int(f.from)} → ${int(f.to)} only)`}`,
    verdict: f.verdict,
  });
  const redis = redisFactor(run, peers, n);
  rows.push({
    target: `${on}: resume p50 / Redis Streams' @ ${int(TARGETS.redisAt)} (no persistence; AOF always)`,
    wanted: `≤ ${TARGETS.redisFactor}× (judged on the faster)`,
    measured: `${ratio(redis.none)}; ${ratio(redis.aof)}`,
    verdict: verdict(Number.isFinite(redis.none) || Number.isFinite(redis.aof) ? Math.max(...[redis.none, redis.aof].filter(Number.isFinite)) <= TARGETS.redisFactor : undefined),
  });
  const sdkLevel = levelAt(run, TARGETS.sdkAt);
  const sdkLayout = layoutOf(sdkLevel, n);
  rows.push({ target: `${on}: vs SDK in-memory store @ ${int(TARGETS.sdkAt)} (p50)`, wanted: `≥ ${TARGETS.sdkFactor}× faster`, measured: ratio(sdkFactor(sdkLevel, sdkLayout)), verdict: sdkVerdict(sdkLevel, sdkLayout) });
  for (const partitions of [...new Set([1, n])]) {
    rows.push({
      target: `N=${partitions}: append @ ${TARGETS.appendAt} streams / raw publish+ack`,
      wanted: `≥ ${pct(TARGETS.appendShare)}`,
      measured: pct(appendShare(run, TARGETS.appendAt, partitions)),
      verdict: appendVerdict(run, partitions),
    });
  }
  return rows;
}
