/**
 * The session-log benchmark's charts (linked from docs/benchmarks.md):
 * resume latency against log size, and append throughput against
 * concurrency, one color per server measured, drawn from what
 * `npm run bench:log` measured. The benchmark writes them at the end of
 * every run; `npm run bench:charts` redraws them from
 * bench-results/log-bench.json (both from and to BENCH_LOG_OUT if set).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lineChartSvg } from './svg-chart.js';
import type { Series } from './svg-chart.js';

interface Stats { p50: number; p99: number }
interface Level { events: number; tether: { total: Stats }; sdk: { total: Stats } }
interface Throughput { target: string; concurrency: number; medianPerSec: number }
interface Server { role: string; version: string; levels: readonly Level[]; throughput: readonly Throughput[] }
/** The part of bench-results/log-bench.json the charts read. */
export interface LogBenchResults {
  servers: readonly Server[];
  syncAlways?: { version: string; throughput: readonly Throughput[] } | undefined;
  at: string;
}

export const CHART_NAMES = ['resume-latency.svg', 'append-throughput.svg'] as const;
const SERVER_COLORS = ['#1f77b4', '#d62728', '#9467bd'];
const SDK_COLOR = '#2ca02c';
const SYNC_COLOR = '#ff7f0e';

const colorOf = (i: number): string => SERVER_COLORS[i % SERVER_COLORS.length] ?? '#1f77b4';

type Points = readonly (readonly [number, number])[];
const finite = (points: Points): Points => points.filter((p) => Number.isFinite(p[0]) && Number.isFinite(p[1]) && p[1] > 0);

/** Writes both SVG charts from one run's results into `dir` (default docs/charts); returns the files written. */
export function writeLogCharts(log: LogBenchResults, dir = 'docs/charts'): readonly string[] {
  mkdirSync(dir, { recursive: true });
  const files = CHART_NAMES.map((name) => join(dir, name));
  // The version names the server; the role only when two runs share a version.
  const label = (s: Server): string => (log.servers.filter((o) => o.version === s.version).length > 1 ? `${s.version} ${s.role}` : s.version);

  // The SDK store does not depend on the server: draw the first server's run of it.
  const sdk = log.servers[0]?.levels ?? [];
  const resumeSeries: Series[] = [
    ...log.servers.flatMap((s, i) => [
      { name: `${label(s)}: Tether p50`, color: colorOf(i), points: finite(s.levels.map((l) => [l.events, l.tether.total.p50] as const)) },
      { name: `${label(s)}: Tether p99`, color: colorOf(i), dashed: true, points: finite(s.levels.map((l) => [l.events, l.tether.total.p99] as const)) },
    ]),
    { name: 'SDK store p50', color: SDK_COLOR, points: finite(sdk.map((l) => [l.events, l.sdk.total.p50] as const)) },
    { name: 'SDK store p99', color: SDK_COLOR, dashed: true, points: finite(sdk.map((l) => [l.events, l.sdk.total.p99] as const)) },
  ];
  writeFileSync(
    files[0] ?? '',
    lineChartSvg({ title: 'Resume latency, 100-event backlog', xLabel: 'events stored in the log', yLabel: 'ms (log scale)', logX: true, logY: true, series: drawn(resumeSeries) }),
  );

  const byTarget = (throughput: readonly Throughput[], target: string): Points =>
    [...finite(throughput.filter((t) => t.target === target).map((t) => [t.concurrency, t.medianPerSec] as const))].sort((a, b) => a[0] - b[0]);
  const tputSeries: Series[] = [
    ...log.servers.flatMap((s, i) => [
      { name: `${label(s)}: Tether append`, color: colorOf(i), points: byTarget(s.throughput, 'tether') },
      { name: `${label(s)}: raw publish+ack`, color: colorOf(i), dashed: true, points: byTarget(s.throughput, 'raw') },
    ]),
    ...(log.syncAlways === undefined
      ? []
      : [
          { name: `${log.syncAlways.version} sync always: Tether`, color: SYNC_COLOR, points: byTarget(log.syncAlways.throughput, 'tether') },
          { name: `${log.syncAlways.version} sync always: raw`, color: SYNC_COLOR, dashed: true, points: byTarget(log.syncAlways.throughput, 'raw') },
        ]),
  ];
  writeFileSync(
    files[1] ?? '',
    lineChartSvg({ title: 'Append throughput against concurrency', xLabel: 'concurrent streams', yLabel: 'events/s', logX: true, series: drawn(tputSeries) }),
  );
  return files;
}

/** Series with no points would make the scales NaN. */
function drawn(series: readonly Series[]): Series[] {
  return series.filter((s) => s.points.length > 0);
}

// Run as a command: redraw from the last run's JSON.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  // BENCH_LOG_OUT as in log-bench.ts: the JSON read from, and the charts written to, that directory.
  const dir = process.env['BENCH_LOG_OUT'];
  const file = join(dir ?? 'bench-results', 'log-bench.json');
  const log = JSON.parse(readFileSync(file, 'utf8')) as LogBenchResults;
  if (!Array.isArray(log.servers)) throw new Error(`${file} is from the one-server bench: run \`npm run bench:log\` again`);
  process.stdout.write(`wrote ${writeLogCharts(log, dir).join(' and ')} from the run at ${log.at}\n`);
}
