/**
 * `npm run bench:charts`: turns the JSON that `npm run bench:log` wrote into
 * SVG charts under docs/charts/ (linked from docs/benchmarks.md).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { lineChartSvg } from './svg-chart.js';

interface Stats { p50: number; p99: number }
interface Level { events: number; tether: { total: Stats }; sdk: { total: Stats }; rawReplay?: { total?: Stats } }
interface Throughput { target: string; concurrency: number; medianPerSec: number }
interface LogBench { resume: { levels: Level[] }; throughput: Throughput[]; at: string }

const log = JSON.parse(readFileSync('bench-results/log-bench.json', 'utf8')) as LogBench;
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
writeFileSync('docs/charts/resume-latency.svg', resume);

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
writeFileSync('docs/charts/append-throughput.svg', throughput);
process.stdout.write(`wrote docs/charts/resume-latency.svg and docs/charts/append-throughput.svg from the run at ${log.at}\n`);
