/**
 * `npm run bench:log`: append throughput and resume latency of the session
 * log on a private nats-server, beside raw JetStream publish-with-ack and the
 * official MCP SDK's example in-memory event store. Prints figures (progress
 * on stderr, results on stdout) and writes bench-results/log-bench.json.
 * Never asserts: DESIGN section 12's targets are printed next to the figures.
 *
 * Knobs (environment): BENCH_LOG_1M=auto|yes|no (default auto: the 1M level
 * runs only if the measured fill rate says it fits in BENCH_LOG_MAX_FILL_S,
 * default 240 s), BENCH_LOG_ROUNDS (throughput rounds, default 3).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { principalDigest, SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import { LogFill } from './fill.js';
import type { FillReport } from './fill.js';
import { PAYLOAD_BYTES } from './payload.js';
import { countResumeApiCalls, measureRawReplay, measureSdkResume, measureTetherResume, planSamples } from './resume.js';
import type { SdkResumeResult, TetherResumeResult } from './resume.js';
import { createRng } from '../shared/random.js';
import { int, ms, progress, ratio, table } from './stats.js';
import type { Summary } from './stats.js';
import { measureThroughput } from './throughput.js';
import type { ThroughputResult } from './throughput.js';
import { writeLogCharts } from './charts.js';

const LEVELS = [10_000, 100_000, 1_000_000] as const;
const FILL_CONCURRENCY = 128;
const SAMPLES = 200;
const TETHER_BUDGET = { warmup: 10, max: SAMPLES, min: 30, budgetMs: 60_000 };
const SDK_BUDGET = { warmup: 2, max: SAMPLES, min: 10, budgetMs: 20_000 };
const ONE_MILLION = process.env['BENCH_LOG_1M'] ?? 'auto';
const MAX_FILL_S = Number(process.env['BENCH_LOG_MAX_FILL_S'] ?? 240);
const ROUNDS = Number(process.env['BENCH_LOG_ROUNDS'] ?? 3);

interface Level {
  readonly events: number;
  readonly fill: FillReport;
  readonly tether: TetherResumeResult;
  readonly sdk: SdkResumeResult;
  /** Diagnostic: the same events read with a bare filtered consumer. */
  readonly rawReplay: Summary;
  readonly apiCallsPerResume: Record<string, number>;
}

async function main(): Promise<void> {
  const started = performance.now();
  progress('starting a private nats-server');
  const server = await startNatsServer();
  try {
    const natsVersion = await serverVersion(server.url);
    const machine = {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      os: `${type()} ${release()}`,
      node: process.version,
      natsServer: natsVersion,
      loadAvgAtStart: loadavg().map((x) => Number(x.toFixed(2))),
    };
    const header = [
      '# Tether session log benchmark (`npm run bench:log`)',
      '',
      `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB RAM, ${machine.os}`,
      `node ${machine.node}; nats-server ${machine.natsServer} (private, single node, file storage under ${server.storeDir}), same machine`,
      `payload: ${PAYLOAD_BYTES}-byte JSON-RPC notifications/progress`,
      `load average at start (1/5/15 min): ${machine.loadAvgAtStart.join(' / ')} on ${machine.cpus} cores (other work on the box skews every figure)`,
    ].join('\n');
    progress(header.replace(/\n+/g, ' | '));

    const throughput = await measureThroughput({ url: server.url, rounds: ROUNDS, counts: new Map([[1, 5_000], [64, 20_000]]) });
    const { levels, skipped } = await measureResumeLevels(server.url);

    const runtimeS = (performance.now() - started) / 1000;
    const loadAvgAtEnd = loadavg().map((x) => Number(x.toFixed(2)));
    const report = render(`${header}\nload average at end: ${loadAvgAtEnd.join(' / ')}`, throughput, levels, skipped, runtimeS);
    process.stdout.write(`${report}\n`);
    await mkdir('bench-results', { recursive: true });
    const results = { at: new Date().toISOString(), machine: { ...machine, loadAvgAtEnd }, payloadBytes: PAYLOAD_BYTES, throughput, resume: { levels, skipped }, runtimeS };
    await writeFile('bench-results/log-bench.json', `${JSON.stringify(results, null, 2)}\n`);
    const charts = writeLogCharts(results);
    progress(`done in ${runtimeS.toFixed(0)} s; JSON in bench-results/log-bench.json, charts in ${charts.join(', ')}`);
  } finally {
    await server.cleanup();
  }
}

async function serverVersion(url: string): Promise<string> {
  const nc = await connect({ servers: url });
  const version = nc.info?.version ?? 'unknown';
  await nc.close();
  return version;
}

async function measureResumeLevels(url: string): Promise<{ levels: Level[]; skipped: string | undefined }> {
  const principal = principalDigest('bench');
  const rand = createRng(12_345);
  const log = await SessionLog.create({
    servers: url,
    streamName: 'BENCH_RESUME',
    subjectPrefix: 'resume',
    sessionsBucket: 'bench_resume_sessions',
    leasesBucket: 'bench_resume_leases',
    maxMsgsPerStream: -1,
  });
  const monitor = await connect({ servers: url });
  const jsm = await jetstreamManager(monitor);
  const js = jetstream(monitor);
  const fill = new LogFill(log, principal, rand);
  const levels: Level[] = [];
  let skipped: string | undefined;
  try {
    for (const events of LEVELS) {
      if (events === 1_000_000) {
        const rate = levels[levels.length - 1]?.fill.perSec ?? 0;
        const estimateS = (events - fill.total) / Math.max(1, rate);
        const go = ONE_MILLION === 'yes' || (ONE_MILLION === 'auto' && estimateS <= MAX_FILL_S);
        if (!go) {
          skipped =
            ONE_MILLION === 'no'
              ? '1M level skipped: BENCH_LOG_1M=no'
              : `1M level skipped: filling ${int(events - fill.total)} more events at the measured ${int(rate)} events/s would take ~${estimateS.toFixed(0)} s, over the ${MAX_FILL_S} s budget (BENCH_LOG_1M=yes forces it)`;
          progress(skipped);
          break;
        }
        progress(`1M level: ~${estimateS.toFixed(0)} s of filling at ${int(rate)} events/s (budget ${MAX_FILL_S} s)`);
      }
      progress(`fill to ${int(events)} events (${FILL_CONCURRENCY} streams at once)`);
      const report = await fill.fillTo(events, FILL_CONCURRENCY);
      progress(`filled ${int(report.added)} events in ${report.seconds.toFixed(1)} s (${int(report.perSec)} events/s); ${int(fill.streams.length)} streams`);
      const plans = planSamples(fill, SAMPLES + TETHER_BUDGET.warmup, rand);
      progress(`tether resume at ${int(events)} events`);
      const tether = await measureTetherResume(log, fill, principal, plans, TETHER_BUDGET);
      progress(`tether resume p50 ${ms(tether.total.p50)} ms, p99 ${ms(tether.total.p99)} ms (n=${tether.total.n})`);
      const rawReplay = await measureRawReplay(jsm, js, 'BENCH_RESUME', (session, stream) => `resume.log.${session}.${stream}`, fill, plans, TETHER_BUDGET);
      progress(`raw filtered-consumer read p50 ${ms(rawReplay.p50)} ms, p99 ${ms(rawReplay.p99)} ms`);
      const apiCallsPerResume = await countResumeApiCalls(monitor, log, fill, principal, plans[0] ?? { stream: 0, cursor: 0 });
      progress(`sdk in-memory store at ${int(events)} events`);
      const sdk = await measureSdkResume(fill, events, plans, SDK_BUDGET);
      progress(`sdk store p50 ${ms(sdk.total.p50)} ms, p99 ${ms(sdk.total.p99)} ms (n=${sdk.total.n})`);
      levels.push({ events, fill: report, tether, sdk, rawReplay, apiCallsPerResume });
    }
  } finally {
    await monitor.close();
    await log.close();
  }
  return { levels, skipped };
}

function render(header: string, throughput: readonly ThroughputResult[], levels: readonly Level[], skipped: string | undefined, runtimeS: number): string {
  const find = (target: string, c: number) => throughput.find((t) => t.target === target && t.concurrency === c);
  const concurrencies = [...new Set(throughput.map((t) => t.concurrency))];
  const tputRows = concurrencies.map((c) => {
    const raw = find('raw', c);
    const shaped = find('raw-shaped', c);
    const tether = find('tether', c);
    const r = (tether?.medianPerSec ?? Number.NaN) / (raw?.medianPerSec ?? Number.NaN);
    return [
      String(c),
      int(tether?.count ?? Number.NaN),
      int(raw?.medianPerSec ?? Number.NaN),
      int(shaped?.medianPerSec ?? Number.NaN),
      int(tether?.medianPerSec ?? Number.NaN),
      `${(r * 100).toFixed(0)}%`,
      c > 1 ? '≥ 70%' : '—',
    ];
  });
  const first = levels[0];
  const resumeRows = levels.map((l) => [
    int(l.events),
    ms(l.tether.total.p50),
    ms(l.tether.total.p99),
    `${ms(l.tether.classify.p50)} / ${ms(l.tether.firstEvent.p50)}`,
    `${ms(l.rawReplay.p50)} / ${ms(l.rawReplay.p99)}`,
    ms(l.sdk.total.p50),
    ms(l.sdk.total.p99),
    ratio(l.sdk.total.p50 / l.tether.total.p50),
    first === undefined ? 'n/a' : ratio(l.tether.total.p50 / first.tether.total.p50),
    `${l.tether.total.n} / ${l.sdk.total.n}`,
    `${l.tether.anomalies} / ${l.sdk.anomalies}`,
  ]);
  const last = levels[levels.length - 1];
  const at100k = levels.find((l) => l.events === 100_000);
  const apiRows = Object.entries(last?.apiCallsPerResume ?? {}).sort().map(([k, v]) => [k, String(v)]);
  const fillRows = levels.map((l) => [int(l.events), int(l.fill.added), l.fill.seconds.toFixed(1), int(l.fill.perSec)]);
  const verdict = (ok: boolean | undefined): string => (ok === undefined ? 'not measured' : ok ? 'met' : 'NOT met');
  const shaped64 = find('tether', 64);
  const raw64 = find('raw', 64);
  const flat = last !== undefined && first !== undefined ? last.tether.total.p50 / first.tether.total.p50 : Number.NaN;
  const flat99 = last !== undefined && first !== undefined ? last.tether.total.p99 / first.tether.total.p99 : Number.NaN;
  const targets = [
    [
      'recording throughput, 64 streams',
      '≥ 70% of raw',
      `${(((shaped64?.medianPerSec ?? Number.NaN) / (raw64?.medianPerSec ?? Number.NaN)) * 100).toFixed(0)}%`,
      verdict(shaped64 && raw64 ? shaped64.medianPerSec >= 0.7 * raw64.medianPerSec : undefined),
    ],
    ...levels.flatMap((l) => [
      [`resume p50 @ ${int(l.events)}`, '≤ 5 ms', `${ms(l.tether.total.p50)} ms`, verdict(l.tether.total.p50 <= 5)],
      [`resume p99 @ ${int(l.events)}`, '≤ 20 ms', `${ms(l.tether.total.p99)} ms`, verdict(l.tether.total.p99 <= 20)],
    ]),
    [
      `flat from 10k to ${last === undefined ? '?' : int(last.events)} (p50 / p99)`,
      '≤ 1.2× (to 1M)',
      `${ratio(flat)} / ${ratio(flat99)}`,
      `${verdict(flat <= 1.2 && flat99 <= 1.2)}${last?.events === 1_000_000 ? '' : ' (1M not reached)'}`,
    ],
    [
      'vs SDK in-memory store @ 100,000 (p50)',
      '≥ 10× faster',
      at100k === undefined ? 'n/a' : ratio(at100k.sdk.total.p50 / at100k.tether.total.p50),
      verdict(at100k === undefined ? undefined : at100k.sdk.total.p50 >= 10 * at100k.tether.total.p50),
    ],
  ];
  return [
    header,
    '',
    '## Append throughput (events/s, median of rounds; 1 untimed append per stream first, so writers are open)',
    '',
    table(['streams', 'events/run', 'raw publish+ack', 'raw, tether-shaped*', 'tether append', 'tether/raw', 'target'], tputRows),
    '',
    '* diagnostic: raw publishes with Tether\'s 4 headers, msg id and expected-last-subject-seq, to a stream with the same republish rule.',
    `rounds: ${throughput.map((t) => `${t.target} c=${t.concurrency}: ${t.roundsPerSec.map((x) => Math.round(x)).join(', ')}`).join('; ')}`,
    '',
    `## Resume latency, ${100}-event backlog (ms; from the call until the 100th event is in hand)`,
    '',
    table(
      ['stored events', 'tether p50', 'tether p99', 'tether classify / 1st event p50', 'raw consumer read p50 / p99*', 'SDK store p50', 'SDK store p99', 'SDK/tether p50', 'tether p50 vs 10k', 'samples (tether / SDK)', 'anomalies'],
      resumeRows,
    ),
    '',
    '* diagnostic: the same 100 events read with a bare ephemeral filtered consumer (create + fetch), no classification or checks.',
    '',
    ...(skipped === undefined ? [] : [skipped, '']),
    'Log fill (128 streams at once; sessions of 1-3 streams of 100-400 events, last one an end marker):',
    '',
    table(['level', 'events added', 'seconds', 'events/s'], fillRows),
    '',
    `JetStream API requests of one resume at ${last === undefined ? '?' : int(last.events)} events (counted on $JS.API.>):`,
    '',
    table(['request', 'count'], apiRows),
    '',
    '## DESIGN §12 targets',
    '',
    table(['target', 'wanted', 'measured', 'verdict'], targets),
    '',
    `total bench runtime: ${runtimeS.toFixed(0)} s`,
  ].join('\n');
}

await main();
