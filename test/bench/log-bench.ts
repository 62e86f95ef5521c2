/**
 * `npm run bench:log`: append throughput and resume latency of the session
 * log, unpartitioned and partitioned side by side on one server, beside raw
 * JetStream publish-with-ack, the raw batch direct get of the same events,
 * and the official MCP SDK's example in-memory event store, on the current nats-server
 * (`scripts/nats-server.sh current`: NATS_SERVER_BIN, else the newest it can
 * find or fetch; never older than 2.11). Then append throughput again on a
 * server of the same binary started with `sync_interval: always`. Prints the
 * figures (progress on stderr, results on stdout) and writes
 * bench-results/log-bench.json and the charts. Never asserts: DESIGN section
 * 12's targets are printed next to the figures.
 *
 * Knobs (environment):
 * - BENCH_LOG_PARTITIONS (default `1,16`): the partition counts of the log
 *   measured side by side; at every level each layout holds the same
 *   session shapes and is resumed at the same cursors, and each N > 1 is
 *   also appended to at 64 streams. DESIGN §12's resume targets are judged
 *   on the largest;
 * - BENCH_LOG_1M=auto|yes|no (default auto: levels of 1M and more run only
 *   if each layout's fill rate measured so far says its fill fits in
 *   BENCH_LOG_MAX_FILL_S, default 240 s per layout);
 * - BENCH_LOG_ROUNDS (throughput rounds, default 3);
 * - BENCH_LOG_SYNC_ALWAYS=yes|no (default yes);
 * - BENCH_LOG_PEERS=yes|no (default yes): the peer stores of DESIGN §12
 *   (peers/log-peers.ts): server-everything's store and a Redis store in two
 *   layouts (Redis Streams; ContextForge's sorted set and hash) on private
 *   redis-servers, resumed at the first server's levels on the same events
 *   and cursors (the 1M rule applies to each Redis peer's own fill rate),
 *   their appends without persistence and with `appendfsync always`, and
 *   every store's answer to a cursor it no longer holds;
 * - for short runs while developing: BENCH_LOG_LEVELS (default
 *   `10000,100000,1000000`), BENCH_LOG_SAMPLES (timed resumes per level,
 *   default 200), BENCH_LOG_TPUT_SCALE (times the 5,000 / 20,000 events per
 *   throughput run at 1 / 64 streams, default 1);
 * - BENCH_LOG_OUT: a directory for the JSON and the charts instead of
 *   bench-results/ and docs/charts/ (so a trial run leaves the committed
 *   charts alone).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeLogCharts } from './charts.js';
import { measureServer, measureSyncAlways } from './log-server.js';
import { LogPeers } from './peers/log-peers.js';
import type { PeerRun } from './peers/log-peers.js';
import type { RunKnobs, ServerRun, SyncAlwaysRun } from './log-server.js';
import { DEFAULT_PARTITIONS, parsePartitions } from './log-layouts.js';
import { renderReport, serverLabel } from './log-report.js';
import { currentTargets } from './log-targets.js';
import { PAYLOAD_BYTES } from './payload.js';
import { progress, setProgressTag } from './stats.js';

const env = (name: string, fallback: string): string => process.env[name] ?? fallback;
const oneMillion = env('BENCH_LOG_1M', 'auto');
if (oneMillion !== 'auto' && oneMillion !== 'yes' && oneMillion !== 'no') throw new Error(`BENCH_LOG_1M must be auto, yes or no, not ${oneMillion}`);
const scale = Number(env('BENCH_LOG_TPUT_SCALE', '1'));
const knobs: RunKnobs = {
  levels: env('BENCH_LOG_LEVELS', '10000,100000,1000000').split(',').map(Number).sort((a, b) => a - b),
  oneMillion,
  maxFillS: Number(env('BENCH_LOG_MAX_FILL_S', '240')),
  rounds: Number(env('BENCH_LOG_ROUNDS', '3')),
  tputCounts: new Map([[1, Math.round(5_000 * scale)], [64, Math.round(20_000 * scale)]]),
  samples: Number(env('BENCH_LOG_SAMPLES', '200')),
  partitions: parsePartitions('BENCH_LOG_PARTITIONS', env('BENCH_LOG_PARTITIONS', DEFAULT_PARTITIONS.join(','))),
};
// Issue 24 took the 2.9.10 floor out of the bench: one server is measured.
if ((process.env['BENCH_LOG_SERVERS'] ?? 'current') !== 'current') throw new Error('BENCH_LOG_SERVERS is gone: bench:log measures the current nats-server only (NATS_SERVER_BIN picks another, 2.11 or later)');
const syncAlwaysWanted = env('BENCH_LOG_SYNC_ALWAYS', 'yes') === 'yes';
const peersWanted = env('BENCH_LOG_PEERS', 'yes');
if (peersWanted !== 'yes' && peersWanted !== 'no') throw new Error(`BENCH_LOG_PEERS must be yes or no, not ${peersWanted}`);
const outDir = process.env['BENCH_LOG_OUT'];
const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** `scripts/nats-server.sh current`: the binary's path (it may fetch one first; it refuses one older than 2.11, saying why). */
function serverBin(): string {
  return execFileSync(join(root, 'scripts', 'nats-server.sh'), ['current'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
}

async function main(): Promise<void> {
  const started = performance.now();
  const bin = serverBin();
  const machine = {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    os: `${type()} ${release()}`,
    node: process.version,
    loadAvgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
  };
  progress(`server: ${bin}; levels ${knobs.levels.join(', ')} (BENCH_LOG_1M=${knobs.oneMillion}); partitions ${knobs.partitions.join(', ')}`);

  setProgressTag('peers');
  const peers = peersWanted === 'yes' ? await LogPeers.start(knobs) : undefined;
  const runs: ServerRun[] = [];
  let syncAlways: SyncAlwaysRun | undefined;
  try {
    setProgressTag('current');
    const run = await measureServer(bin, knobs, peers);
    if (run.skipped !== undefined) peers?.noteSkipped(knobs.levels.filter((e) => !run.levels.some((l) => l.events === e)), run.skipped);
    // Their levels are done: their redis-servers (and any AOF rewrite) must not run beside the sync-always figures.
    await peers?.close();
    runs.push(run);
    if (syncAlwaysWanted) {
      setProgressTag('sync-always');
      syncAlways = await measureSyncAlways(bin, knobs);
    }
  } catch (err) {
    await peers?.close().catch(() => undefined);
    throw err;
  }
  let peerRun: PeerRun | undefined;
  if (peers !== undefined) {
    setProgressTag('peers');
    peerRun = await peers.finish(bin);
  }
  setProgressTag('');

  const runtimeS = (performance.now() - started) / 1000;
  const loadAvgAtEnd = loadavg().map((x) => Number(x.toFixed(2)));
  const header = [
    '# Tether session log benchmark (`npm run bench:log`)',
    '',
    `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB RAM, ${machine.os}; node ${machine.node}`,
    `server: private (single node, file storage, removed afterwards) on the same machine: ${runs.map((r) => `${serverLabel(r)} (${r.bin})`).join('; ')}`,
    `payload: ${PAYLOAD_BYTES}-byte JSON-RPC notifications/progress; levels ${knobs.levels.join(', ')} (BENCH_LOG_1M=${knobs.oneMillion}), ${knobs.samples} resumes per level and layout, ${knobs.rounds} throughput rounds`,
    `log layouts side by side on the same server: ${knobs.partitions.map((n) => `N=${n}`).join(', ')} partitions (BENCH_LOG_PARTITIONS), each filled with the same session shapes, resumed at the same cursors`,
    `load average (1/5/15 min) at start ${machine.loadAvgAtStart.join(' / ')}, at end ${loadAvgAtEnd.join(' / ')}, on ${machine.cpus} cores (other work on the box skews every figure)`,
  ].join('\n');
  process.stdout.write(`${renderReport({ header, runs, syncAlways, peers: peerRun, runtimeS })}\n`);

  const currentRun = runs.find((r) => r.role === 'current');
  const results = {
    at: new Date().toISOString(),
    machine: { ...machine, loadAvgAtEnd },
    payloadBytes: PAYLOAD_BYTES,
    knobs: { ...knobs, tputCounts: Object.fromEntries(knobs.tputCounts) },
    servers: runs,
    syncAlways,
    targets: currentRun ? currentTargets(currentRun, peerRun) : undefined,
    peers: peerRun,
    runtimeS,
  };
  const jsonFile = join(outDir ?? 'bench-results', 'log-bench.json');
  mkdirSync(dirname(jsonFile), { recursive: true });
  writeFileSync(jsonFile, `${JSON.stringify(results, null, 2)}\n`);
  const charts = writeLogCharts(results, outDir);
  progress(`done in ${runtimeS.toFixed(0)} s; JSON in ${jsonFile}, charts in ${charts.join(', ')}`);
}

await main();
