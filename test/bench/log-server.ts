/**
 * The server's part of `npm run bench:log`. Each call starts its own private
 * server (single node, file storage, fresh store dir) and removes it
 * afterwards.
 */
import { loadavg } from 'node:os';
import { connect } from '@nats-io/transport-node';
import { principalDigest, SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import { createRng } from '../shared/random.js';
import { countResumeApiCalls } from './api-calls.js';
import { LogFill } from './fill.js';
import type { FillReport } from './fill.js';
import { measureRawDirectBatch } from './raw-read.js';
import type { LogLayout } from './raw-read.js';
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
}

export interface Level {
  readonly events: number;
  readonly fill: FillReport;
  readonly tether: TetherResumeResult;
  readonly sdk: SdkResumeResult;
  /** Diagnostic: the same events read with one batch direct get. */
  readonly rawDirectBatch: Summary;
  readonly apiCallsPerResume: Record<string, number>;
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
const LAYOUT: LogLayout = { streamName: 'BENCH_RESUME', subjectOf: (session, stream) => `resume.log.${session}.${stream}` };

/** Throughput, then resume latency at every level, on a private server running `bin`; `peers`, if given, are measured at each level too. */
export async function measureServer(bin: string, knobs: RunKnobs, peers?: LevelPeers): Promise<ServerRun> {
  const started = performance.now();
  const start = loadNow();
  const server = await startNatsServer({ bin });
  try {
    progress(`nats-server ${server.version} (${bin}), store ${server.storeDir}`);
    const throughput = await measureThroughput({ url: server.url, rounds: knobs.rounds, counts: knobs.tputCounts });
    const resume = await measureResumeLevels(server.url, knobs, peers);
    return { role: 'current', version: server.version, bin, ...resume, throughput, seconds: (performance.now() - started) / 1000, loadAvg: { start, end: loadNow() } };
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

async function measureResumeLevels(
  url: string,
  knobs: RunKnobs,
  peers: LevelPeers | undefined,
): Promise<{ levels: Level[]; skipped: string | undefined; logServer: LogServerInfo | undefined }> {
  const principal = principalDigest('bench');
  // The same seed on every server: the same session shapes and sample cursors.
  const rand = createRng(12_345);
  const log = await SessionLog.create({
    servers: url,
    streamName: LAYOUT.streamName,
    subjectPrefix: 'resume',
    sessionsBucket: 'bench_resume_sessions',
    leasesBucket: 'bench_resume_leases',
    maxMsgsPerStream: -1,
  });
  const logServer = logServerInfo(log);
  progress(logServer === undefined ? 'log.server: not exposed by this build' : `log.server: ${logServer.version}, replay ${logServer.replay}, classify ${logServer.classify}`);
  const monitor = await connect({ servers: url, noAsyncTraces: true });
  const fill = new LogFill(log, principal, rand);
  const budget = { warmup: 10, max: knobs.samples, min: Math.min(30, knobs.samples), budgetMs: 60_000 };
  const sdkBudget = { warmup: 2, max: knobs.samples, min: Math.min(10, knobs.samples), budgetMs: 20_000 };
  const levels: Level[] = [];
  let skipped: string | undefined;
  try {
    for (const events of knobs.levels) {
      if (events >= 1_000_000) {
        const rate = levels[levels.length - 1]?.fill.perSec ?? 0;
        const estimateS = (events - fill.total) / Math.max(1, rate);
        const go = knobs.oneMillion === 'yes' || (knobs.oneMillion === 'auto' && estimateS <= knobs.maxFillS);
        if (!go) {
          skipped =
            knobs.oneMillion === 'no'
              ? `${int(events)} level skipped: BENCH_LOG_1M=no`
              : `${int(events)} level skipped: filling ${int(events - fill.total)} more events at the measured ${int(rate)} events/s would take ~${estimateS.toFixed(0)} s, over the ${knobs.maxFillS} s budget (BENCH_LOG_1M=yes forces it)`;
          progress(skipped);
          break;
        }
        progress(`${int(events)} level: ~${estimateS.toFixed(0)} s of filling at ${int(rate)} events/s (budget ${knobs.maxFillS} s)`);
      }
      progress(`fill to ${int(events)} events (${FILL_CONCURRENCY} streams at once)`);
      const report = await fill.fillTo(events, FILL_CONCURRENCY);
      progress(`filled ${int(report.added)} events in ${report.seconds.toFixed(1)} s (${int(report.perSec)} events/s); ${int(fill.streams.length)} streams`);
      const plans = planSamples(fill, knobs.samples + budget.warmup, rand);
      const tether = await measureTetherResume(log, fill, principal, plans, budget);
      progress(`tether resume p50 ${ms(tether.total.p50)} ms, p99 ${ms(tether.total.p99)} ms (n=${tether.total.n})`);
      const rawDirectBatch = await measureRawDirectBatch(monitor, LAYOUT, fill, plans, budget);
      progress(`raw batch direct get p50 ${ms(rawDirectBatch.p50)} ms, p99 ${ms(rawDirectBatch.p99)} ms`);
      const apiCallsPerResume = await countResumeApiCalls(monitor, log, fill, principal, plans[0] ?? { stream: 0, cursor: 0 });
      const sdk = await measureSdkResume(fill, events, plans, sdkBudget);
      progress(`sdk store p50 ${ms(sdk.total.p50)} ms, p99 ${ms(sdk.total.p99)} ms (n=${sdk.total.n})`);
      if (peers !== undefined) await peers.atLevel(fill, events, plans, sdkBudget);
      levels.push({ events, fill: report, tether, sdk, rawDirectBatch, apiCallsPerResume });
    }
  } finally {
    await monitor.close();
    await log.close();
  }
  return { levels, skipped, logServer };
}

/**
 * `log.server` (`{ version, paths: { replay, classify } }`) if this build of
 * `SessionLog` has it; read defensively so the bench runs on builds with and without.
 */
function logServerInfo(log: SessionLog): LogServerInfo | undefined {
  if (!('server' in log)) return undefined;
  const server = log.server as { version?: unknown; paths?: { replay?: unknown; classify?: unknown } } | undefined;
  if (server === undefined || server === null) return undefined;
  return { version: String(server.version ?? '?'), replay: String(server.paths?.replay ?? '?'), classify: String(server.paths?.classify ?? '?') };
}

function loadNow(): number[] {
  return loadavg().map((x) => Number(x.toFixed(2)));
}
