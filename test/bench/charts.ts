/**
 * The session-log benchmark's charts (linked from docs/benchmarks.md):
 * resume latency against log size (one color per partition count, the raw
 * batch direct get of each beside it), and append throughput against
 * concurrency, drawn from what
 * `npm run bench:log` measured; when the run measured the peer stores
 * (peers/), also their resume latency against stored events beside
 * Tether's, their appends, and a grid of what each store does with a cursor
 * it no longer holds. The benchmark writes them at the end of
 * every run; `npm run bench:charts` redraws them from
 * bench-results/log-bench.json (both from and to BENCH_LOG_OUT if set).
 * `npm run bench:sdk` writes its own two (`writeSdkCharts`: resume latency
 * per store, the cursor-loss grid), redrawn from bench-results/sdk-bench.json
 * too when it is there (BENCH_SDK_OUT likewise).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { lineChartSvg, verdictGridSvg } from './svg-chart.js';
import type { GridCell, Series } from './svg-chart.js';

interface Stats { p50: number; p99: number }
interface LayoutLevel { partitions: number; tether: { total: Stats }; rawDirectBatch: Stats }
interface Level { events: number; layouts: readonly LayoutLevel[]; sdk: { total: Stats } }
interface Throughput { target: string; partitions?: number; concurrency: number; medianPerSec: number }
interface Server { role: string; version: string; levels: readonly Level[]; throughput: readonly Throughput[] }
interface CursorRow { store: string; case: string; outcome: { kind: string; detail: string; sent: number; missing: number; foreign: number } }
/** The part of a peers run the charts read (peers/log-peers.ts `PeerRun`). */
export interface PeerCharts {
  throughput: readonly { store: string; concurrency: number; medianPerSec: number }[];
  resume: readonly { store: string; events: number; total?: Stats | undefined }[];
  cursorLoss: readonly CursorRow[];
}
/** The part of bench-results/log-bench.json the charts read. */
export interface LogBenchResults {
  servers: readonly Server[];
  syncAlways?: { version: string; throughput: readonly Throughput[] } | undefined;
  peers?: PeerCharts | undefined;
  at: string;
}

export const CHART_NAMES = ['resume-latency.svg', 'append-throughput.svg'] as const;
/** Written only when the run measured the peers. */
export const PEER_CHART_NAMES = ['peers-resume-latency.svg', 'peers-append-throughput.svg', 'peers-cursor-loss.svg'] as const;
const PEER_COLORS: Readonly<Record<string, string>> = {
  sdk: '#2ca02c',
  everything: '#8c564b',
  redisStreams: '#e377c2',
  redisStreamsAof: '#e377c2',
  contextforge: '#17becf',
  contextforgeAof: '#17becf',
};
const PEER_NAMES: Readonly<Record<string, string>> = {
  sdk: 'SDK InMemoryEventStore',
  everything: 'server-everything store',
  redisStreams: 'Redis Streams',
  redisStreamsAof: 'Redis Streams, AOF always',
  contextforge: 'ContextForge layout',
  contextforgeAof: 'ContextForge, AOF always',
};
const CURSOR_COLUMNS: readonly [string, string][] = [
  ['trimmed', 'trimmed from the ring'],
  ['restart', 'from before a restart'],
  ['unknown', 'unknown (other session)'],
];
/** One per layout (partition count) of the one server measured. */
const SERVER_COLORS = ['#1f77b4', '#d62728', '#9467bd'];
const SDK_COLOR = '#2ca02c';
/** The raw batch direct get beside each layout's resume. */
const RAW_COLORS = ['#7f7f7f', '#bcbd22'];
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
  // Each layout (partition count) of each server: its resume p50 and p99, and the raw batch direct get's p50 (grey, dashed) as its floor.
  const layouts = (s: Server): number[] => [...new Set(s.levels.flatMap((l) => l.layouts.map((x) => x.partitions)))].sort((a, b) => a - b);
  const at = (l: Level, n: number): LayoutLevel | undefined => l.layouts.find((x) => x.partitions === n);
  const resumeSeries: Series[] = [
    ...log.servers.flatMap((s, si) =>
      layouts(s).flatMap((n, i) => {
        const color = colorOf(si * 2 + i);
        const name = `${label(s)} N=${n}`;
        return [
          { name: `${name}: Tether p50`, color, points: finite(s.levels.map((l) => [l.events, at(l, n)?.tether.total.p50 ?? Number.NaN] as const)) },
          { name: `${name}: Tether p99`, color, dashed: true, points: finite(s.levels.map((l) => [l.events, at(l, n)?.tether.total.p99 ?? Number.NaN] as const)) },
          { name: `${name}: raw batch get p50`, color: RAW_COLORS[i % RAW_COLORS.length] ?? '#7f7f7f', dashed: true, points: finite(s.levels.map((l) => [l.events, at(l, n)?.rawDirectBatch.p50 ?? Number.NaN] as const)) },
        ];
      }),
    ),
    { name: 'SDK store p50', color: SDK_COLOR, points: finite(sdk.map((l) => [l.events, l.sdk.total.p50] as const)) },
    { name: 'SDK store p99', color: SDK_COLOR, dashed: true, points: finite(sdk.map((l) => [l.events, l.sdk.total.p99] as const)) },
  ];
  writeFileSync(
    files[0] ?? '',
    lineChartSvg({ title: 'Resume latency, 100-event backlog', xLabel: 'events stored in the log', yLabel: 'ms (log scale)', logX: true, logY: true, series: drawn(resumeSeries) }),
  );

  const partitioned = (s: { throughput: readonly Throughput[] }): number[] => [...new Set(s.throughput.filter((t) => (t.partitions ?? 1) > 1).map((t) => t.partitions ?? 1))].sort((a, b) => a - b);
  const tputSeries: Series[] = [
    ...log.servers.flatMap((s, i) => [
      { name: `${label(s)}: Tether append`, color: colorOf(i), points: byTarget(s.throughput, 'tether') },
      ...partitioned(s).map((n, k) => ({ name: `${label(s)}: Tether append, N=${n}`, color: colorOf(i + 1 + k), points: byTarget(s.throughput, 'tether-partitioned', n) })),
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
  if (log.peers === undefined) return files;
  return [...files, ...writePeerCharts(log, log.peers, dir)];
}

/** Peer resume latency and appends beside the first server's Tether figures, and the cursor-loss grid. */
function writePeerCharts(log: LogBenchResults, peers: PeerCharts, dir: string): string[] {
  const files = PEER_CHART_NAMES.map((name) => join(dir, name));
  const first = log.servers[0];
  const stores = [...new Set(peers.resume.map((r) => r.store))];
  const resumeSeries: Series[] = [
    ...(first === undefined
      ? []
      : [
          ...[...new Set(first.levels.flatMap((l) => l.layouts.map((x) => x.partitions)))]
            .sort((a, b) => a - b)
            .map((n, i) => ({
              name: `Tether N=${n} p50 (${first.version})`,
              color: colorOf(i),
              points: finite(first.levels.map((l) => [l.events, l.layouts.find((x) => x.partitions === n)?.tether.total.p50 ?? Number.NaN] as const)),
            })),
          { name: 'SDK InMemoryEventStore p50', color: SDK_COLOR, points: finite(first.levels.map((l) => [l.events, l.sdk.total.p50] as const)) },
        ]),
    ...stores.map((store) => ({
      name: `${PEER_NAMES[store] ?? store} p50`,
      color: PEER_COLORS[store] ?? '#333',
      // The AOF variant of a layout: its color, dashed.
      dashed: store.endsWith('Aof'),
      points: finite(peers.resume.filter((r) => r.store === store && r.total !== undefined).map((r) => [r.events, r.total?.p50 ?? Number.NaN] as const)),
    })),
  ];
  writeFileSync(
    files[0] ?? '',
    lineChartSvg({ title: 'Resume latency, 100-event backlog: peers', xLabel: 'events stored', yLabel: 'ms, p50 (log scale)', logX: true, logY: true, series: drawn(resumeSeries) }),
  );

  const tputStores = [...new Set(peers.throughput.map((t) => t.store))];
  const tputSeries: Series[] = [
    ...(first === undefined ? [] : [{ name: `Tether append, N=1 (${first.version})`, color: colorOf(0), points: byTarget(first.throughput, 'tether') }]),
    ...tputStores.map((store) => ({
      name: PEER_NAMES[store] ?? store,
      color: PEER_COLORS[store] ?? '#333',
      dashed: store.endsWith('Aof'),
      points: [...finite(peers.throughput.filter((t) => t.store === store).map((t) => [t.concurrency, t.medianPerSec] as const))].sort((a, b) => a[0] - b[0]),
    })),
  ];
  writeFileSync(
    files[1] ?? '',
    lineChartSvg({ title: 'Append (storeEvent) against concurrency: peers', xLabel: 'concurrent streams', yLabel: 'events/s (log scale)', logX: true, logY: true, series: drawn(tputSeries) }),
  );

  writeFileSync(files[2] ?? '', cursorGrid(peers.cursorLoss));
  return files;
}

/** The part of bench-results/sdk-bench.json the charts read. */
export interface SdkBenchResults {
  resume: readonly { storedEvents: number; tether: { total: Stats }; sdk: { total: Stats }; peers?: readonly { store: string; resume: { total: Stats } }[] }[];
  cursorLoss?: readonly CursorRow[];
}

export const SDK_CHART_NAMES = ['sdk-resume-latency.svg', 'sdk-cursor-loss.svg'] as const;

/** `npm run bench:sdk`'s charts: each store's resume latency against stored events, and the cursor-loss grid (each only when measured). */
export function writeSdkCharts(sdk: SdkBenchResults, dir = 'docs/charts'): string[] {
  const written: string[] = [];
  mkdirSync(dir, { recursive: true });
  if (sdk.resume.length > 0) {
    const file = join(dir, SDK_CHART_NAMES[0]);
    const line = (name: string, color: string, dashed: boolean, pick: (l: SdkBenchResults['resume'][number]) => number | undefined): Series => ({
      name,
      color,
      dashed,
      points: finite(sdk.resume.map((l) => [l.storedEvents, pick(l) ?? Number.NaN] as const)),
    });
    const stores = [...new Set(sdk.resume.flatMap((l) => (l.peers ?? []).map((p) => p.store)))];
    const series: Series[] = [
      line('TetherEventStore p50', colorOf(0), false, (l) => l.tether.total.p50),
      line('TetherEventStore p99', colorOf(0), true, (l) => l.tether.total.p99),
      line('SDK InMemoryEventStore p50', SDK_COLOR, false, (l) => l.sdk.total.p50),
      ...stores.map((store) => line(`${PEER_NAMES[store] ?? store} p50`, PEER_COLORS[store] ?? '#333', store.endsWith('Aof'), (l) => l.peers?.find((p) => p.store === store)?.resume.total.p50)),
    ];
    writeFileSync(file, lineChartSvg({ title: 'replayEventsAfter, 100-event backlog', xLabel: 'events stored in the session', yLabel: 'ms (log scale)', logX: true, logY: true, series: drawn(series) }));
    written.push(file);
  }
  const rows = sdk.cursorLoss ?? [];
  if (rows.length > 0) {
    const file = join(dir, SDK_CHART_NAMES[1]);
    writeFileSync(file, cursorGrid(rows));
    written.push(file);
  }
  return written;
}

function cursorGrid(rows: readonly CursorRow[]): string {
  const stores = [...new Set(rows.map((r) => r.store))];
  return verdictGridSvg({
    title: 'What each store does with a cursor it no longer holds',
    columns: CURSOR_COLUMNS.map(([, name]) => name),
    rows: stores.map((store) => ({ name: store, cells: CURSOR_COLUMNS.map(([c]) => cursorCell(rows.find((r) => r.store === store && r.case === c))) })),
    legend: 'green: explicit error, or the cursor still held and resumed exactly; red: silent (success with nothing, a gap or other events); grey: never trims',
  });
}

function cursorCell(row: CursorRow | undefined): GridCell {
  if (row === undefined) return { text: 'not run', tone: 'neutral' };
  const o = row.outcome;
  // `threw: resume_refused (truncated) (the SDK answers 500)` → `explicit: truncated`.
  if (o.kind === 'explicit') return { text: `explicit: ${/\(([a-z_]+)\)/.exec(o.detail)?.[1] ?? o.detail.replace(/^threw: /, '')}`, tone: 'good' };
  if (o.kind === 'held') return { text: 'held: resumed exactly', tone: 'good' };
  if (o.kind === 'silent') {
    const what = o.sent === 0 ? 'nothing sent' : o.foreign > 0 ? `${o.foreign} other events sent` : `gap, ${o.missing} skipped`;
    return { text: `silent: ${what}`, tone: 'bad' };
  }
  return { text: `${o.kind}: never trims`, tone: 'neutral' };
}

function byTarget(throughput: readonly Throughput[], target: string, partitions = 1): Points {
  return [...finite(throughput.filter((t) => t.target === target && (t.partitions ?? 1) === partitions).map((t) => [t.concurrency, t.medianPerSec] as const))].sort((a, b) => a[0] - b[0]);
}

/** Series with no points would make the scales NaN. */
function drawn(series: readonly Series[]): Series[] {
  return series.filter((s) => s.points.length > 0);
}

// Run as a command: redraw from the last run's JSON (the SDK bench's too, when there is one).
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  // BENCH_LOG_OUT as in log-bench.ts: the JSON read from, and the charts written to, that directory.
  const dir = process.env['BENCH_LOG_OUT'];
  const file = join(dir ?? 'bench-results', 'log-bench.json');
  const log = JSON.parse(readFileSync(file, 'utf8')) as LogBenchResults;
  if (!Array.isArray(log.servers)) throw new Error(`${file} is from the one-server bench: run \`npm run bench:log\` again`);
  if (log.servers.some((s: Server) => s.levels.some((l: Level) => !Array.isArray(l.layouts)))) throw new Error(`${file} is from before partitioned layouts (issue 24): run \`npm run bench:log\` again`);
  process.stdout.write(`wrote ${writeLogCharts(log, dir).join(' and ')} from the run at ${log.at}\n`);
  // BENCH_SDK_OUT as in sdk-bench.ts.
  const sdkDir = process.env['BENCH_SDK_OUT'];
  const sdkFile = join(sdkDir ?? 'bench-results', 'sdk-bench.json');
  if (existsSync(sdkFile)) {
    const sdk = JSON.parse(readFileSync(sdkFile, 'utf8')) as SdkBenchResults & { at?: string };
    process.stdout.write(`wrote ${writeSdkCharts(sdk, sdkDir).join(' and ') || 'no chart'} from the SDK run at ${sdk.at ?? '?'}\n`);
  }
}
