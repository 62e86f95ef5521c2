/**
 * DESIGN section 12's session-log targets, judged on the server's run.
 * Printed, never asserted (STYLE.md: benchmarks are commands that print figures).
 */
import type { Level, ServerRun } from './log-server.js';
import { int, ms, ratio } from './stats.js';
import type { Target } from './throughput.js';

export const TARGETS = {
  resumeP50Ms: 2,
  resumeP99Ms: 8,
  /** Resume p50 and p99 at `flatTo` over those at `flatFrom`. */
  flat: 1.2,
  flatFrom: 10_000,
  flatTo: 1_000_000,
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

/** Median events/s of one throughput target at one concurrency, NaN if not run. */
export function tput(throughput: ServerRun['throughput'], target: Target, c: number): number {
  return throughput.find((t) => t.target === target && t.concurrency === c)?.medianPerSec ?? Number.NaN;
}

export function levelAt(run: ServerRun, events: number): Level | undefined {
  return run.levels.find((l) => l.events === events);
}

/** `2.92 ms`, or `n/a`. */
export const msUnit = (x: number): string => (Number.isFinite(x) ? `${ms(x)} ms` : 'n/a');

export const pct = (x: number): string => (Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : 'n/a');

/** Definite only when both figures are finite. */
const check = (value: number, ok: (v: number) => boolean): boolean | undefined => (Number.isFinite(value) ? ok(value) : undefined);

export const appendShare = (run: ServerRun, c: number): number => tput(run.throughput, 'tether', c) / tput(run.throughput, 'raw', c);
export const sdkFactor = (l: Level | undefined): number => (l === undefined ? Number.NaN : l.sdk.total.p50 / l.tether.total.p50);

export const appendVerdict = (run: ServerRun): Verdict => verdict(check(appendShare(run, TARGETS.appendAt), (v) => v >= TARGETS.appendShare));
export const p50Verdict = (l: Level): Verdict => verdict(check(l.tether.total.p50, (v) => v <= TARGETS.resumeP50Ms));
export const p99Verdict = (l: Level): Verdict => verdict(check(l.tether.total.p99, (v) => v <= TARGETS.resumeP99Ms));
export const sdkVerdict = (l: Level | undefined): Verdict => verdict(check(sdkFactor(l), (v) => v >= TARGETS.sdkFactor));

/** p50 and p99 at the largest level over the smallest, and whether that spans the target's 10k to 1M. */
export function flatness(run: ServerRun): { p50: number; p99: number; from: number; to: number; verdict: Verdict } {
  const first = levelAt(run, TARGETS.flatFrom) ?? run.levels[0];
  const last = run.levels[run.levels.length - 1];
  if (first === undefined || last === undefined) return { p50: Number.NaN, p99: Number.NaN, from: 0, to: 0, verdict: 'not measured' };
  const p50 = last.tether.total.p50 / first.tether.total.p50;
  const p99 = last.tether.total.p99 / first.tether.total.p99;
  const spans = first.events === TARGETS.flatFrom && last.events === TARGETS.flatTo;
  return { p50, p99, from: first.events, to: last.events, verdict: spans ? verdict(p50 <= TARGETS.flat && p99 <= TARGETS.flat) : 'not measured' };
}

/** The targets for the current server, one row each. */
export function currentTargets(run: ServerRun): TargetRow[] {
  const rows: TargetRow[] = [];
  for (const events of [10_000, 100_000, 1_000_000]) {
    const l = levelAt(run, events);
    rows.push({ target: `resume p50 @ ${int(events)}`, wanted: `≤ ${TARGETS.resumeP50Ms} ms`, measured: msUnit(l?.tether.total.p50 ?? Number.NaN), verdict: l ? p50Verdict(l) : 'not measured' });
    rows.push({ target: `resume p99 @ ${int(events)}`, wanted: `≤ ${TARGETS.resumeP99Ms} ms`, measured: msUnit(l?.tether.total.p99 ?? Number.NaN), verdict: l ? p99Verdict(l) : 'not measured' });
  }
  const f = flatness(run);
  rows.push({
    target: `resume flat, ${int(TARGETS.flatFrom)} → ${int(TARGETS.flatTo)} (p50 / p99)`,
    wanted: `≤ ${TARGETS.flat}×`,
    measured: `${ratio(f.p50)} / ${ratio(f.p99)}${f.to === TARGETS.flatTo ? '' : ` (${int(f.from)} → ${int(f.to)} only)`}`,
    verdict: f.verdict,
  });
  const at = levelAt(run, TARGETS.sdkAt);
  rows.push({ target: `vs SDK in-memory store @ ${int(TARGETS.sdkAt)} (p50)`, wanted: `≥ ${TARGETS.sdkFactor}× faster`, measured: ratio(sdkFactor(at)), verdict: sdkVerdict(at) });
  rows.push({
    target: `append @ ${TARGETS.appendAt} streams / raw publish+ack`,
    wanted: `≥ ${pct(TARGETS.appendShare)}`,
    measured: pct(appendShare(run, TARGETS.appendAt)),
    verdict: appendVerdict(run),
  });
  return rows;
}
