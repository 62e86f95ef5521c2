/**
 * The layouts of the session log a benchmark measures side by side on one
 * server: the same log unpartitioned (N = 1, `TETHER_LOG`'s shape) and
 * spread over N partitions (DESIGN section 17), each under names of its own
 * so they never meet, filled from generators of the same seed (the same
 * session shapes at the same indices) and resumed at the same cursors.
 */
import { createSubjects, MAX_PARTITIONS, SessionLog } from '@tether/session-log';
import { createRng } from '../shared/random.js';
import { LogFill } from './fill.js';
import type { ReadLayout } from './raw-read.js';

/** `1,16`: the partition counts measured when a knob names none. */
export const DEFAULT_PARTITIONS: readonly number[] = [1, 16];

/** A knob's list of partition counts (`1,16`), ascending and distinct, each 1 to MAX_PARTITIONS; names the knob when it is wrong. */
export function parsePartitions(knob: string, text: string): number[] {
  const counts = text.split(',').map((part) => Number(part.trim()));
  const bad = counts.find((n) => !Number.isInteger(n) || n < 1 || n > MAX_PARTITIONS);
  if (bad !== undefined || counts.length === 0) throw new Error(`${knob} must be partition counts from 1 to ${MAX_PARTITIONS}, comma-separated (e.g. 1,16), not ${JSON.stringify(text)}`);
  return [...new Set(counts)].sort((a, b) => a - b);
}

/** `N=16`. */
export const layoutLabel = (partitions: number): string => `N=${partitions}`;

/**
 * The log's names for `base` at `partitions`: `BENCH_RESUME` and `resume.…`
 * with one partition (as the bench always named it), `BENCH_RESUME_P16-<k>`
 * and `resume_p16.…` with 16.
 */
export function layoutNames(base: string, partitions: number): { streamName: string; subjectPrefix: string; sessionsBucket: string; leasesBucket: string; principalsBucket: string } {
  const tag = partitions === 1 ? base : `${base}_p${partitions}`;
  return {
    streamName: `BENCH_${tag.toUpperCase()}`,
    subjectPrefix: tag,
    sessionsBucket: `bench_${tag}_sessions`,
    leasesBucket: `bench_${tag}_leases`,
    principalsBucket: `bench_${tag}_principals`,
  };
}

/** One layout of the log on the server, with its fill and where a raw read finds a session stream's events. */
export interface BenchLayout {
  readonly partitions: number;
  readonly label: string;
  readonly log: SessionLog;
  readonly fill: LogFill;
  readonly read: ReadLayout;
}

/**
 * Opens the log at each partition count on the server at `url` (its own
 * connection each), with a fill per layout from a generator seeded `seed`.
 */
export async function openLayouts(url: string, base: string, partitions: readonly number[], principal: string, seed: number): Promise<BenchLayout[]> {
  const layouts: BenchLayout[] = [];
  try {
    for (const n of partitions) {
      const names = layoutNames(base, n);
      const log = await SessionLog.create({ servers: url, ...names, partitions: n, maxMsgsPerStream: -1 });
      const subjects = createSubjects(names.subjectPrefix, n);
      layouts.push({
        partitions: n,
        label: layoutLabel(n),
        log,
        fill: new LogFill(log, principal, createRng(seed), layoutLabel(n)),
        read: { streamOf: (sessionId) => log.partitionOf(sessionId).streamName, subjectOf: (sessionId, stream) => subjects.log(sessionId, stream) },
      });
    }
  } catch (err) {
    await closeLayouts(layouts);
    throw err;
  }
  return layouts;
}

export async function closeLayouts(layouts: readonly BenchLayout[]): Promise<void> {
  for (const layout of layouts) await layout.log.close();
}

/** Throws unless every layout holds streams of the same lengths at the same indices (so one set of sample plans fits all). */
export function assertSameShapes(layouts: readonly BenchLayout[]): void {
  const [first, ...rest] = layouts;
  if (first === undefined) return;
  const shape = (l: BenchLayout): string => l.fill.streams.map((s) => s.pos.length).join(',');
  const want = shape(first);
  for (const other of rest) {
    if (shape(other) !== want) throw new Error(`the ${other.label} fill holds other stream shapes than the ${first.label} fill: the same seed must give the same sessions`);
  }
}
