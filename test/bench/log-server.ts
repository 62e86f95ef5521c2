/**
 * The server's part of `npm run bench:log`. Each call starts its own private
 * server (single node, file storage, fresh store dir) and removes it
 * afterwards. On it, the log is measured at every partition count of the
 * run (log-layouts.ts) side by side.
 */
import { loadavg } from 'node:os';
import { connect } from '@nats-io/transport-node';
import { principalDigest } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import { createRng } from '../shared/random.js';
import { countResumeApiCalls } from './api-calls.js';
import type { FillReport, LogFill } from './fill.js';
import { assertSameShapes, closeLayouts, openLayouts } from './log-layouts.js';
import { measureRawDirectBatch } from './raw-read.js';
import { measureSdkResume, measureTetherResume, planSamples } from './resume.js';
import type { SampleBudget, SamplePlan, SdkResumeResult, TetherResumeResult } from './resume.js';
import { int, ms, progress } from './stats.js';
import type { Summary } from './stats.js';
import { measureThroughput } from './throughput.js';
import type { ThroughputResult } from './throughput.js';

/**
 * The one server measured, the one the targets are for. The field stays in
 * the results (and the charts' labels) as it was when a second, older
 * server was measured beside it.
 */
export type ServerRole = 'current';

export interface RunKnobs {
  /** Stored-event levels of the resume measurement, ascending. */
  readonly levels: readonly number[];
  /** Levels of 1M and more: `auto` runs them only if the fill rate measured so far says they fit in `maxFillS`. */
  readonly oneMillion: 'auto' | 'yes' | 'no';
  readonly maxFillS: number;
  readonly rounds: number;
  /** Events per throughput run, by concurrency. */
  readonly tputCounts: ReadonlyMap<number, number>;
  /** Timed resumes per level. */
  readonly samples: number;
  /** Partition counts of the log measured side by side (BENCH_LOG_PARTITIONS), ascending. */
  readonly partitions: readonly number[];
}

/** One layout of the log (a partition count) at one level. */
export interface LayoutLevel {
  readonly partitions: number;
  readonly fill: FillReport;
  readonly tether: TetherResumeResult;
  /** The server's floor: the same events read with one batch direct get, from the session's partition stream. */
  readonly rawDirectBatch: Summary;
  readonly apiCallsPerResume: Record<string, number>;
}

export interface Level {
  readonly events: number;
  /**
   * One per partition count, in `RunKnobs.partitions` order: each layout
   * holds `events` events of the same session shapes and is resumed at the
   * same cursors.
   */
  readonly layouts: readonly LayoutLevel[];
  /** The SDK store, holding the first layout's events. */
  readonly sdk: SdkResumeResult;
}

/** What `SessionLog` says about the server and the paths it picked, when it says it (`log.server`). */
export interface LogServerInfo {
  readonly version: string;
  readonly replay: string;
  readonly classify: string;
}

export interface ServerRun {
  readonly role: ServerRole;
  readonly version: string;
  readonly bin: string;
  /** Partition counts measured (each level has a layout of each). */
  readonly partitions: readonly number[];
  readonly logServer: LogServerInfo | undefined;
  readonly throughput: readonly ThroughputResult[];
  readonly levels: readonly Level[];
  readonly skipped: string | undefined;
  readonly seconds: number;
  readonly loadAvg: { readonly start: readonly number[]; readonly end: readonly number[] };
}

/** Stores measured beside the log at each of its levels, on the same events and cursors (peers/log-peers.ts). */
export interface LevelPeers {
  atLevel(fill: LogFill, events: number, plans: readonly SamplePlan[], budget: SampleBudget): Promise<void>;
}

/** Append throughput on a server started with `jetstream { sync_interval: always }`. */
export interface SyncAlwaysRun {
  readonly version: string;
  readonly bin: string;
  /** `jetstream.config.sync_always` as the server's /varz reports it; undefined if it could not be read. */
  readonly confirmed: boolean | undefined;
  readonly throughput: readonly ThroughputResult[];
  readonly seconds: number;
}

const FILL_CONCURRENCY = 128;
/** The same seed on every run: the same session shapes and sample cursors. */
const SEED = 12_345;
/** The partitioned throughput runs at this many streams only. */
const PARTITIONED_TPUT_AT = 64;

/** Throughput, then resume latency at every level, on a private server running `bin`; `peers`, if given, are measured at each level too. */
export async function measureServer(bin: string, knobs: RunKnobs, peers?: LevelPeers): Promise<ServerRun> {
  const started = performance.now();
  const start = loadNow();
  const server = await startNatsServer({ bin });
  try {
    progress(`nats-server ${server.version} (${bin}), store ${server.storeDir}`);
    const partitioned = knobs.partitions.filter((n) => n > 1);
    const throughput = await measureThroughput({ url: server.url, rounds: knobs.rounds, counts: knobs.tputCounts, partitioned, partitionedConcurrency: PARTITIONED_TPUT_AT });
    const resume = await measureResumeLevels(server.url, knobs, peers);
    return {
      role: 'current',
      version: server.version,
      bin,
      partitions: knobs.partitions,
      ...resume,
      throughput,
      seconds: (performance.now() - started) / 1000,
      loadAvg: { start, end: loadNow() },
    };
  } finally {
    await server.cleanup();
  }
}

/** Append throughput only, on a private server with `sync_interval: always`, checked on /varz. */
export async function measureSyncAlways(bin: string, knobs: RunKnobs): Promise<SyncAlwaysRun> {
  const started = performance.now();
  const server = await startNatsServer({ bin, configLines: ['jetstream { sync_interval: always }'] });
  try {
    const confirmed = await syncAlwaysOnVarz(server.monitorPort);
    progress(`nats-server ${server.version} with sync_interval: always (/varz sync_always: ${String(confirmed)})`);
    const throughput = await measureThroughput({ url: server.url, rounds: knobs.rounds, counts: knobs.tputCounts });
    return { version: server.version, bin, confirmed, throughput, seconds: (performance.now() - started) / 1000 };
  } finally {
    await server.cleanup();
  }
}

async function syncAlwaysOnVarz(monitorPort: number): Promise<boolean | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${monitorPort}/varz`);
    const varz = (await res.json()) as { jetstream?: { config?: { sync_always?: boolean } } };
    return varz.jetstream?.config?.sync_always === true;
  } catch {
    return undefined;
  }
}

/**
 * Resume latency at each level, for every layout side by side: each level
 * fills every layout to the same size (the same session shapes, from the
 * same seed), then resumes each at the same cursors, its raw batch direct
 * get beside it. The SDK store and the peers hold the first layout's events.
 */
async function measureResumeLevels(
  url: string,
  knobs: RunKnobs,
  peers: LevelPeers | undefined,
): Promise<{ levels: Level[]; skipped: string | undefined; logServer: LogServerInfo | undefined }> {
  const principal = principalDigest('bench');
  const planRand = createRng(SEED).fork(2);
  const layouts = await openLayouts(url, 'resume', knobs.partitions, principal, SEED);
  const first = layouts[0];
  if (first === undefined) throw new Error('no partition count to measure (BENCH_LOG_PARTITIONS)');
  const logServer = logServerInfo(first.log);
  progress(logServer === undefined ? 'log.server: not exposed by this build' : `log.server: ${logServer.version}, replay ${logServer.replay}, classify ${logServer.classify}`);
  progress(`layouts: ${layouts.map((l) => `${l.label} (${l.log.layout.partitions.map((p) => p.streamName).slice(0, 2).join(', ')}${l.partitions > 2 ? ', …' : ''})`).join('; ')}`);
  const monitor = await connect({ servers: url, noAsyncTraces: true });
  const budget = { warmup: 10, max: knobs.samples, min: Math.min(30, knobs.samples), budgetMs: 60_000 };
  const sdkBudget = { warmup: 2, max: knobs.samples, min: Math.min(10, knobs.samples), budgetMs: 20_000 };
  const levels: Level[] = [];
  let skipped: string | undefined;
  try {
    for (const events of knobs.levels) {
      if (events >= 1_000_000) {
        // Each layout by its own fill rate so far; the budget is per layout.
        const estimates = layouts.map((l) => {
          const rate = levels[levels.length - 1]?.layouts.find((x) => x.partitions === l.partitions)?.fill.perSec ?? 0;
          return { label: l.label, more: events - l.fill.total, rate, seconds: (events - l.fill.total) / Math.max(1, rate) };
        });
        const worst = estimates.reduce((a, b) => (b.seconds > a.seconds ? b : a));
        const go = knobs.oneMillion === 'yes' || (knobs.oneMillion === 'auto' && worst.seconds <= knobs.maxFillS);
        const said = estimates.map((e) => `${e.label} ~${e.seconds.toFixed(0)} s at ${int(e.rate)} events/s`).join(', ');
        if (!go) {
          skipped =
            knobs.oneMillion === 'no'
              ? `${int(events)} level skipped: BENCH_LOG_1M=no`
              : `${int(events)} level skipped: filling ${int(worst.more)} more events of ${worst.label} at the measured ${int(worst.rate)} events/s would take ~${worst.seconds.toFixed(0)} s, over the ${knobs.maxFillS} s budget per layout (BENCH_LOG_1M=yes forces it)`;
          progress(skipped);
          break;
        }
        progress(`${int(events)} level: filling ${said} (budget ${knobs.maxFillS} s per layout)`);
      }
      const fills = new Map<number, FillReport>();
      for (const layout of layouts) {
        progress(`${layout.label}: fill to ${int(events)} events (${FILL_CONCURRENCY} streams at once)`);
        const report = await layout.fill.fillTo(events, FILL_CONCURRENCY);
        fills.set(layout.partitions, report);
        progress(`${layout.label}: filled ${int(report.added)} events in ${report.seconds.toFixed(1)} s (${int(report.perSec)} events/s); ${int(layout.fill.streams.length)} streams`);
      }
      assertSameShapes(layouts);
      const plans = planSamples(first.fill, knobs.samples + budget.warmup, planRand);
      const measured: LayoutLevel[] = [];
      for (const layout of layouts) {
        const tether = await measureTetherResume(layout.log, layout.fill, principal, plans, budget);
        progress(`${layout.label}: tether resume p50 ${ms(tether.total.p50)} ms, p99 ${ms(tether.total.p99)} ms (n=${tether.total.n})`);
        const rawDirectBatch = await measureRawDirectBatch(monitor, layout.read, layout.fill, plans, budget);
        progress(`${layout.label}: raw batch direct get p50 ${ms(rawDirectBatch.p50)} ms, p99 ${ms(rawDirectBatch.p99)} ms`);
        const apiCallsPerResume = await countResumeApiCalls(monitor, layout.log, layout.fill, principal, plans[0] ?? { stream: 0, cursor: 0 });
        measured.push({ partitions: layout.partitions, fill: fills.get(layout.partitions) as FillReport, tether, rawDirectBatch, apiCallsPerResume });
      }
      const sdk = await measureSdkResume(first.fill, events, plans, sdkBudget);
      progress(`sdk store p50 ${ms(sdk.total.p50)} ms, p99 ${ms(sdk.total.p99)} ms (n=${sdk.total.n})`);
      if (peers !== undefined) await peers.atLevel(first.fill, events, plans, sdkBudget);
      levels.push({ events, layouts: measured, sdk });
    }
  } finally {
    await monitor.close();
    await closeLayouts(layouts);
  }
  return { levels, skipped, logServer };
}

/**
 * `log.server` and the read paths. Builds that name their paths
 * (`{ version, paths: { replay, classify } }`) are read as they say; since
 * nats-server 2.11 became the floor (issue 24) the log has one read path,
 * batch direct gets, and names none, so that is what is reported.
 */
function logServerInfo(log: SessionLog): LogServerInfo | undefined {
  if (!('server' in log)) return undefined;
  const server = log.server as { version?: unknown; paths?: { replay?: unknown; classify?: unknown } } | undefined;
  if (server === undefined || server === null) return undefined;
  const only = 'direct-batch (the only path on 2.11+)';
  return { version: String(server.version ?? '?'), replay: String(server.paths?.replay ?? only), classify: String(server.paths?.classify ?? only) };
}

function loadNow(): number[] {
  return loadavg().map((x) => Number(x.toFixed(2)));
}
