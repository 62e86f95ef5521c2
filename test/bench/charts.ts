/**
 * The session-log benchmark's charts (linked from docs/benchmarks.md):
 * resume latency against log size, and append throughput against
 * concurrency, drawn from what `npm run bench:log` measured. The benchmark
 * writes them at the end of every run; `npm run bench:charts` redraws them
 * from bench-results/log-bench.json.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { lineChartSvg } from './svg-chart.js';

interface Stats { p50: number; p99: number }
interface Level { events: number; tether: { total: Stats }; sdk: { total: Stats } }
interface Throughput { target: string; concurrency: number; medianPerSec: number }
/** The part of bench-results/log-bench.json the charts read. */
export interface LogBenchResults { resume: { levels: readonly Level[] }; throughput: readonly Throughput[]; at: string }

export const CHART_FILES = ['docs/charts/resume-latency.svg', 'docs/charts/append-throughput.svg'] as const;

/** Writes both SVG charts from one run's results; returns the files written. */
export function writeLogCharts(log: LogBenchResults): readonly string[] {
  const levels = log.resume.levels;
  const resume = lineChartSvg({
    title: 'Resume latency, 100-event backlog',
    xLabel: 'events stored in the log',
    yLabel: 'ms (log scale)',
    logX: true,
    logY: true,
    series: [
      { name: 'Tether p50', points: levels.map((l) => [l.events, l.tether.total.p50] as const) },
      { name: 'Tether p99', points: levels.map((l) => [l.events, l.tether.total.p99] as const) },
      { name: 'SDK store p50', points: levels.map((l) => [l.events, l.sdk.total.p50] as const) },
      { name: 'SDK store p99', points: levels.map((l) => [l.events, l.sdk.total.p99] as const) },
    ],
  });
  writeFileSync(CHART_FILES[0], resume);

  const byTarget = (target: string) =>
    log.throughput.filter((t) => t.target === target).map((t) => [t.concurrency, t.medianPerSec] as const).sort((a, b) => a[0] - b[0]);
  const throughput = lineChartSvg({
    title: 'Append throughput against concurrency',
    xLabel: 'concurrent streams',
    yLabel: 'events/s',
    logX: true,
    series: [
      { name: 'raw publish+ack', points: byTarget('raw') },
      { name: 'raw, Tether headers', points: byTarget('raw-shaped') },
      { name: 'Tether append', points: byTarget('tether') },
    ],
  });
  writeFileSync(CHART_FILES[1], throughput);
  return CHART_FILES;
}

// Run as a command: redraw from the last run's JSON.
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const log = JSON.parse(readFileSync('bench-results/log-bench.json', 'utf8')) as LogBenchResults;
  process.stdout.write(`wrote ${writeLogCharts(log).join(' and ')} from the run at ${log.at}\n`);
}
