/**
 * `npm run bench:resume`: where a resume's time goes. On one private
 * nats-server (the current one), the log unpartitioned (N = 1) and on 16
 * partitions side by side (log-layouts.ts: the same session shapes, the
 * same cursors), at 10k and 100k stored events. At each cursor, each part
 * of a resume is timed on its own, on the log's own connection, then a
 * whole `log.resume()`:
 *
 * - the registry read alone (`log.sessions.get`);
 * - the stream head alone (direct get `last_by_subj` on the session's
 *   partition stream, as the classification asks it of a single server);
 * - the classification's first batch alone (a batch direct get of
 *   readBatch + 1 = 65 messages from the cursor's position);
 * - the raw batch direct get of the 100 events after the cursor (the floor
 *   bench:log sets beside a resume);
 * - `log.resume()`: until it returned (classification), until the first
 *   event, until the 100th (total).
 *
 * The classification runs the first three at once, so beside them is the
 * slowest of the three at each cursor: what a classification would take
 * if it cost nothing of its own. The parts run in a rotating order from
 * cursor to cursor, so none always finds the server's caches warmed by
 * another. Prints a table (progress on stderr) and writes
 * bench-results/resume-breakdown.json. Never asserts.
 *
 * Knobs (environment): BENCH_RESUME_LEVELS (default `10000,100000`),
 * BENCH_RESUME_PARTITIONS (default `1,16`), BENCH_RESUME_SAMPLES (cursors
 * per level, default 200, after 10 untimed), BENCH_RESUME_OUT (a directory
 * for the JSON instead of bench-results/).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { dirname, join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { principalDigest } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import { createRng } from '../shared/random.js';
import { assertSameShapes, closeLayouts, DEFAULT_PARTITIONS, openLayouts, parsePartitions } from './log-layouts.js';
import type { BenchLayout } from './log-layouts.js';
import { BACKLOG, planSamples, resumeOnce } from './resume.js';
import type { SamplePlan } from './resume.js';
import { directBatch, planTarget } from './raw-read.js';
import { int, ms, progress, summarize, table } from './stats.js';
import type { Summary } from './stats.js';

const env = (name: string, fallback: string): string => process.env[name] ?? fallback;
const knobs = {
  levels: env('BENCH_RESUME_LEVELS', '10000,100000').split(',').map(Number).sort((a, b) => a - b),
  partitions: parsePartitions('BENCH_RESUME_PARTITIONS', env('BENCH_RESUME_PARTITIONS', DEFAULT_PARTITIONS.join(','))),
  samples: Number(env('BENCH_RESUME_SAMPLES', '200')),
};
if (knobs.levels.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`BENCH_RESUME_LEVELS must be positive integers, comma-separated, not ${JSON.stringify(process.env['BENCH_RESUME_LEVELS'])}`);
if (!Number.isInteger(knobs.samples) || knobs.samples < 1) throw new Error(`BENCH_RESUME_SAMPLES must be a positive integer, not ${JSON.stringify(process.env['BENCH_RESUME_SAMPLES'])}`);
const outDir = process.env['BENCH_RESUME_OUT'];
const SEED = 12_345;
const WARMUP = 10;
const FILL_CONCURRENCY = 128;
/** What the log asks a batch direct get to stay under (direct-batch.ts, DIRECT_BATCH_MAX_BYTES). */
const LOG_BATCH_MAX_BYTES = 256 * 1024;

/** The parts, in the order the first cursor runs them (later cursors rotate it). */
const PARTS = ['registry', 'head', 'firstBatch', 'raw', 'resume'] as const;
type Part = (typeof PARTS)[number];

interface Breakdown {
  readonly events: number;
  readonly partitions: number;
  /** `log.sessions.get(id)`. */
  readonly registry: Summary;
  /** Direct get `last_by_subj` of the session stream, on its partition stream. */
  readonly head: Summary;
  /** Batch direct get of readBatch + 1 messages from the cursor's position. */
  readonly firstBatch: Summary;
  /** The slowest of registry, head and first batch at each cursor. */
  readonly slowestOfThree: Summary;
  /** Batch direct get of the 100 events after the cursor. */
  readonly raw: Summary;
  readonly classification: Summary;
  readonly firstEvent: Summary;
  readonly total: Summary;
  readonly firstBatchSize: number;
  /** Resumes that were not `resumed` with 100 events in order (should be 0). */
  readonly anomalies: number;
}

type Sample = Record<Part, number> & { classification: number; firstEvent: number; ok: boolean };

async function measureLayout(layout: BenchLayout, jsm: JetStreamManager, principal: string, plans: readonly SamplePlan[], events: number): Promise<Breakdown> {
  const nc = layout.log.connection;
  const firstBatchSize = layout.log.config.readBatch + 1;
  const samples: Sample[] = [];
  for (const [i, plan] of plans.entries()) {
    const stream = layout.fill.streams[plan.stream];
    if (stream === undefined) throw new Error(`no stream ${plan.stream}`);
    const target = planTarget(layout.read, layout.fill, plan);
    const sample: Sample = { registry: 0, head: 0, firstBatch: 0, raw: 0, resume: 0, classification: 0, firstEvent: 0, ok: true };
    const timed = async (run: () => Promise<unknown>): Promise<number> => {
      const start = performance.now();
      await run();
      return performance.now() - start;
    };
    const parts: Record<Part, () => Promise<void>> = {
      registry: async () => {
        sample.registry = await timed(() => layout.log.sessions.get(stream.sessionId));
      },
      head: async () => {
        sample.head = await timed(() => jsm.direct.getMessage(target.streamName, { last_by_subj: target.subject }));
      },
      firstBatch: async () => {
        let received = 0;
        sample.firstBatch = await timed(async () => {
          received = await directBatch(nc, target.streamName, { seq: target.cursorPos, next_by_subj: target.subject, batch: firstBatchSize, max_bytes: LOG_BATCH_MAX_BYTES });
        });
        if (received !== firstBatchSize) throw new Error(`the first batch answered ${received} messages, not ${firstBatchSize}`);
      },
      raw: async () => {
        let received = 0;
        sample.raw = await timed(async () => {
          received = await directBatch(nc, target.streamName, { seq: target.startSeq, next_by_subj: target.subject, batch: BACKLOG });
        });
        if (received !== BACKLOG) throw new Error(`the raw batch answered ${received} messages, not ${BACKLOG}`);
      },
      resume: async () => {
        const r = await resumeOnce(layout.log, layout.fill, principal, plan);
        sample.resume = r.totalMs;
        sample.classification = r.classifyMs;
        sample.firstEvent = r.firstMs;
        sample.ok = r.ok;
      },
    };
    for (let k = 0; k < PARTS.length; k += 1) await parts[PARTS[(i + k) % PARTS.length] as Part]();
    if (i >= WARMUP) samples.push(sample);
  }
  const of = (pick: (s: Sample) => number): Summary => summarize(samples.map(pick));
  const b: Breakdown = {
    events,
    partitions: layout.partitions,
    registry: of((s) => s.registry),
    head: of((s) => s.head),
    firstBatch: of((s) => s.firstBatch),
    slowestOfThree: of((s) => Math.max(s.registry, s.head, s.firstBatch)),
    raw: of((s) => s.raw),
    classification: of((s) => s.classification),
    firstEvent: of((s) => s.firstEvent),
    total: of((s) => s.resume),
    firstBatchSize,
    anomalies: samples.filter((s) => !s.ok).length,
  };
  progress(`${layout.label} @ ${int(events)}: registry ${ms(b.registry.p50)}, head ${ms(b.head.p50)}, first batch ${ms(b.firstBatch.p50)}, raw ${ms(b.raw.p50)}; resume classification ${ms(b.classification.p50)}, total ${ms(b.total.p50)} ms p50 (n=${b.total.n})`);
  return b;
}

function render(header: string, rows: readonly Breakdown[], runtimeS: number): string {
  const pair = (s: Summary): string => `${ms(s.p50)} / ${ms(s.p99)}`;
  const size = rows[0]?.firstBatchSize ?? 65;
  return [
    header,
    '',
    '## The parts of a resume, each timed alone at the same cursors (ms, p50 / p99)',
    '',
    table(
      ['stored', 'log', 'registry get', 'stream head (last_by_subj)', `first batch (${size} from the cursor)`, 'slowest of the three', `raw batch (${BACKLOG})`, 'resume: classification', 'resume: 1st event', 'resume: total', 'samples; anomalies'],
      rows.map((b) => [
        int(b.events),
        `N=${b.partitions}`,
        pair(b.registry),
        pair(b.head),
        pair(b.firstBatch),
        pair(b.slowestOfThree),
        pair(b.raw),
        pair(b.classification),
        pair(b.firstEvent),
        pair(b.total),
        `${b.total.n}; ${b.anomalies}`,
      ]),
    ),
    '',
    "The classification asks the first three at once (one round trip): 'slowest of the three' is, per cursor, what it would take if it cost nothing of its own. The raw batch is bench:log's floor for the whole resume.",
    'All on the log\'s own connection; each part in a rotating order from cursor to cursor.',
    '',
    `total bench runtime: ${runtimeS.toFixed(0)} s`,
  ].join('\n');
}

async function main(): Promise<void> {
  const started = performance.now();
  const loadAvgAtStart = loadavg().map((x) => Number(x.toFixed(2)));
  const server = await startNatsServer();
  const principal = principalDigest('bench');
  let layouts: BenchLayout[] = [];
  try {
    progress(`nats-server ${server.version} (${server.bin}); levels ${knobs.levels.join(', ')}; partitions ${knobs.partitions.join(', ')}; ${knobs.samples} cursors per level`);
    layouts = await openLayouts(server.url, 'breakdown', knobs.partitions, principal, SEED);
    const first = layouts[0];
    if (first === undefined) throw new Error('no partition count to measure');
    const jsms = new Map<number, JetStreamManager>();
    for (const layout of layouts) jsms.set(layout.partitions, await jetstreamManager(layout.log.connection));
    const planRand = createRng(SEED).fork(2);
    const rows: Breakdown[] = [];
    for (const events of knobs.levels) {
      for (const layout of layouts) {
        const report = await layout.fill.fillTo(events, FILL_CONCURRENCY);
        progress(`${layout.label}: filled to ${int(events)} (${int(report.perSec)} events/s)`);
      }
      assertSameShapes(layouts);
      const plans = planSamples(first.fill, knobs.samples + WARMUP, planRand);
      for (const layout of layouts) rows.push(await measureLayout(layout, jsms.get(layout.partitions) as JetStreamManager, principal, plans, events));
    }
    const runtimeS = (performance.now() - started) / 1000;
    const machine = {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      os: `${type()} ${release()}`,
      node: process.version,
      loadAvgAtStart,
      loadAvgAtEnd: loadavg().map((x) => Number(x.toFixed(2))),
    };
    const header = [
      '# Where a resume\'s time goes (`npm run bench:resume`)',
      '',
      `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB RAM, ${machine.os}; node ${machine.node}`,
      `server: private nats-server ${server.version} (${server.bin}), single node, file storage, removed afterwards`,
      `log layouts on it: ${knobs.partitions.map((n) => `N=${n}`).join(', ')} partitions, the same session shapes (sessions of 1-3 streams of 100-400 events, 128 streams written at once), ${knobs.samples} cursors per level with ${BACKLOG} events after each`,
      `load average (1/5/15 min) at start ${machine.loadAvgAtStart.join(' / ')}, at end ${machine.loadAvgAtEnd.join(' / ')}, on ${machine.cpus} cores`,
    ].join('\n');
    process.stdout.write(`${render(header, rows, runtimeS)}\n`);
    const file = join(outDir ?? 'bench-results', 'resume-breakdown.json');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${JSON.stringify({ at: new Date().toISOString(), machine, server: { version: server.version, bin: server.bin }, knobs, rows, runtimeS }, null, 2)}\n`);
    progress(`done in ${runtimeS.toFixed(0)} s; JSON in ${file}`);
  } finally {
    await closeLayouts(layouts);
    await server.cleanup();
  }
}

await main();
