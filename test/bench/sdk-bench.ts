/**
 * `npm run bench:sdk`: packages/sdk beside the official SDK's own in-memory
 * stores (`@modelcontextprotocol/sdk` 1.32), in one run (issue 13,
 * "Benchmark"), measured through the store interfaces directly:
 *
 * 1. resume latency: `replayEventsAfter` of a 100-event backlog, p50/p99, at
 *    a few sizes of the store, `TetherEventStore` vs the SDK's example
 *    `InMemoryEventStore` (which sorts every event it holds on each replay);
 * 2. `storeEvent` throughput: one stream awaited event by event, and 16
 *    lanes at once (16 streams of one session, 16 sessions);
 * 3. task `createTask` / `getTask` latency, `createDurableTasks` vs the SDK's
 *    `InMemoryTaskStore`;
 * 4. (not timed) what each store does with a cursor it does not hold,
 *    and with one it no longer holds (trimmed, from before a restart,
 *    unknown: peers/cursor-loss.ts).
 *
 * Beside them, the peers of DESIGN §12 through the same calls
 * (peers/sdk-peers.ts): the store of the reference server
 * `@modelcontextprotocol/server-everything` (its own class, taken from the
 * installed package), and a Redis store in two layouts (Redis Streams
 * `XADD`/`XRANGE`; IBM ContextForge's sorted set and hash), each behind a
 * Lua ring buffer, on private redis-servers started here (random loopback
 * ports, temp dirs, killed by PID at the end) without persistence and with
 * `appendfsync always`. No redis-server: the Redis peers are skipped, said
 * loudly.
 *
 * A private nats-server (random loopback ports, temp store dir, removed
 * afterwards): `NATS_SERVER_BIN`, which `npm run bench:sdk` sets to the
 * current server (`scripts/nats-server.sh current`) unless already set.
 * Prints figures (progress on stderr, results on stdout) and writes
 * bench-results/sdk-bench.json. Never asserts.
 *
 * Knobs (environment):
 * - BENCH_SDK_ONLY=resume,throughput,tasks,cursors (default all);
 * - BENCH_SDK_EVENTS: stored-event levels for figure 1 (default 10000,100000);
 * - BENCH_SDK_STREAM_EVENTS: events per stream in figure 1 (default 1000);
 * - BENCH_SDK_SAMPLES: most timed resumes per store and level (default 200),
 *   at least 10, stopping after BENCH_SDK_RESUME_BUDGET_S (default 20) per
 *   store and level;
 * - BENCH_SDK_ROUNDS: throughput rounds (default 3); BENCH_SDK_TPUT_EVENTS
 *   (sequential run, default 3000), BENCH_SDK_LANE_EVENTS (per lane of the
 *   16, default 500);
 * - BENCH_SDK_TASKS: tasks created and read per store (default 1000);
 * - BENCH_SDK_PEERS=yes|no (default yes): the peers above;
 * - BENCH_SDK_OUT: a directory for the JSON and the charts instead of
 *   bench-results/ and docs/charts/ (so a trial run leaves the committed
 *   charts alone).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { dirname, join } from 'node:path';
import { startNatsServer } from '@tether/testing';
import { writeSdkCharts } from './charts.js';
import type { CursorLossRow } from './peers/cursor-loss.js';
import { SdkPeers } from './peers/sdk-peers.js';
import { progress } from './stats.js';
import { probeCursors } from './sdk/cursors.js';
import type { CursorProbe } from './sdk/cursors.js';
import { renderReport } from './sdk/report.js';
import { ResumeFixture } from './sdk/resume.js';
import type { ResumeBudget, ResumeLevel } from './sdk/resume.js';
import { measureThroughput } from './sdk/store-throughput.js';
import type { ThroughputKnobs, ThroughputRow } from './sdk/store-throughput.js';
import { openTether } from './sdk/stores.js';
import { measureTasks } from './sdk/tasks.js';
import type { TasksRun } from './sdk/tasks.js';

const PHASES_ALL = ['resume', 'throughput', 'tasks', 'cursors'] as const;
const env = (name: string, fallback: string): string => process.env[name] ?? fallback;
const positive = (name: string, fallback: string): number => {
  const value = Number(env(name, fallback));
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, not ${JSON.stringify(process.env[name])}`);
  return value;
};
const phases = new Set(env('BENCH_SDK_ONLY', PHASES_ALL.join(',')).split(',').map((p) => p.trim()));
for (const p of phases) if (!(PHASES_ALL as readonly string[]).includes(p)) throw new Error(`BENCH_SDK_ONLY lists ${PHASES_ALL.join(', ')}, not ${p}`);
const levels = env('BENCH_SDK_EVENTS', '10000,100000').split(',').map((x) => {
  const n = Number(x);
  if (!Number.isInteger(n) || n < 1) throw new Error(`BENCH_SDK_EVENTS lists positive integers, not ${x}`);
  return n;
}).sort((a, b) => a - b);
const streamEvents = positive('BENCH_SDK_STREAM_EVENTS', '1000');
const budget: ResumeBudget = { warmup: 5, max: positive('BENCH_SDK_SAMPLES', '200'), min: 10, budgetMs: positive('BENCH_SDK_RESUME_BUDGET_S', '20') * 1000 };
const throughputKnobs: ThroughputKnobs = {
  rounds: positive('BENCH_SDK_ROUNDS', '3'),
  sequentialEvents: positive('BENCH_SDK_TPUT_EVENTS', '3000'),
  laneEvents: positive('BENCH_SDK_LANE_EVENTS', '500'),
};
const taskCount = positive('BENCH_SDK_TASKS', '1000');
const ORDER_PROBES = 5;
const peersWanted = env('BENCH_SDK_PEERS', 'yes');
if (peersWanted !== 'yes' && peersWanted !== 'no') throw new Error(`BENCH_SDK_PEERS must be yes or no, not ${peersWanted}`);
const outDir = env('BENCH_SDK_OUT', 'bench-results');
const chartDir = process.env['BENCH_SDK_OUT'] ?? 'docs/charts';

async function main(): Promise<void> {
  const started = performance.now();
  const nats = await startNatsServer();
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${type()} ${release()}`,
    node: process.version,
    natsServer: nats.version,
    natsServerBin: nats.bin,
    loadAvgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
  };
  progress(`nats-server ${nats.version} (${nats.bin}) at ${nats.url}; phases ${[...phases].join(', ')}`);
  const side = await openTether(nats.url);
  const resume: ResumeLevel[] = [];
  let throughput: ThroughputRow[] = [];
  let tasks: TasksRun | undefined;
  let cursors: CursorProbe[] = [];
  let cursorLoss: CursorLossRow[] = [];
  let restartNotes: Record<string, string> = {};
  let peers: SdkPeers | undefined;
  let failure: unknown;
  try {
    peers = await SdkPeers.open(peersWanted === 'yes');
    if (phases.has('throughput')) throughput = await measureThroughput(side, throughputKnobs, peers);
    if (phases.has('tasks')) tasks = await measureTasks(nats.url, taskCount, 20);
    if (phases.has('resume')) {
      const fixture = await ResumeFixture.create(
        side,
        streamEvents,
        peers.resumeKinds.map((kind) => ({ kind, store: (peers as SdkPeers).newStore(kind), fill: kind === 'everything' ? 'sequential' : 'lanes', settle: async () => (peers as SdkPeers).settle() })),
      );
      for (const level of levels) {
        await fixture.fillTo(level);
        progress(`resume at ${fixture.total.toLocaleString('en-US')} stored events`);
        resume.push(await fixture.measure(budget, ORDER_PROBES));
      }
    }
    // Last: the restart probes SIGKILL the redis-servers.
    if (phases.has('cursors')) {
      cursors = await probeCursors(side);
      ({ rows: cursorLoss, restartNotes } = await peers.cursorLoss(nats.url));
    }
  } catch (err) {
    failure = err;
  } finally {
    await side.close().catch(() => undefined);
    await peers?.close().catch(() => undefined);
    await nats.cleanup();
  }

  const runtimeS = (performance.now() - started) / 1000;
  const loadAvgAtEnd = loadavg().map((x) => Number(x.toFixed(2)));
  const header = [
    '# Tether SDK benchmark (`npm run bench:sdk`)',
    '',
    `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB RAM, ${machine.os}`,
    `node ${machine.node}; nats-server ${machine.natsServer} (${machine.natsServerBin}; private, single node, file storage, removed afterwards); @modelcontextprotocol/sdk in-memory stores in this process`,
    `load average (1/5/15 min) at start ${machine.loadAvgAtStart.join(' / ')}, at end ${loadAvgAtEnd.join(' / ')}, on ${machine.cpus} cores (other work on the box skews every figure)`,
  ].join('\n');
  const peerInfo = peers?.info;
  process.stdout.write(`${renderReport({ header, resume, throughput, tasks, cursors, cursorLoss, restartNotes, peers: peerInfo, streamEvents, runtimeS })}\n`);

  const jsonFile = join(outDir, 'sdk-bench.json');
  mkdirSync(dirname(jsonFile), { recursive: true });
  const error = failure === undefined ? undefined : String((failure as Error).stack ?? failure);
  const knobs = { phases: [...phases], levels, streamEvents, budget, throughput: throughputKnobs, taskCount };
  const results = { at: new Date().toISOString(), machine: { ...machine, loadAvgAtEnd }, knobs: { ...knobs, peers: peersWanted }, peers: peerInfo, resume, throughput, tasks, cursors, cursorLoss, restartNotes, runtimeS, error };
  writeFileSync(jsonFile, `${JSON.stringify(results, null, 2)}\n`);
  const charts = writeSdkCharts(results, chartDir);
  progress(`done in ${runtimeS.toFixed(0)} s; JSON in ${jsonFile}${charts.length > 0 ? `, charts in ${charts.join(', ')}` : ''}`);
  if (failure !== undefined) throw failure;
}

// The test kit unrefs its child processes: keep the loop alive while a phase waits on one.
const keepAlive = setInterval(() => undefined, 60_000);
main()
  .catch((err: unknown) => {
    process.stderr.write(`${String((err as Error).stack ?? err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => clearInterval(keepAlive));
