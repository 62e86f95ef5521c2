/**
 * One chaos run: start the stack and the log tap, run the clients under the
 * seeded fault schedule, let in-flight calls settle, read the log back, and
 * check every stream. `run.ts` (the CLI) and the e2e test both call
 * `runChaos`.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { writeFile } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { namespaceNames, SessionLog } from '@tether/session-log';
import { findNatsServerBinary } from '@tether/testing';
import { check, groupByStream, tally } from './checker.js';
import type { CheckResult, Violation } from './checker.js';
import { defaultLoad } from './client-context.js';
import type { ClientContext, LoadShape, RouteName } from './client-context.js';
import { FaultKind, planFaults, runFaults } from './faults.js';
import type { FaultRecord } from './faults.js';
import { startLogTap } from './log-tap.js';
import { responseOf } from './log-tap.js';
import type { LogRecord } from './log-tap.js';
import { RawClient } from './raw-client.js';
import { Recorder } from './record.js';
import { SdkClientRunner } from './sdk-client.js';
import { startChaosStack } from './stack.js';
import { createRng } from '../shared/random.js';
import { bump, digest, sleep } from './util.js';

export interface ChaosOptions {
  readonly durationMs: number;
  /** Clients in all: every third is an SDK client with the resume guard, the rest raw SSE clients. */
  readonly clients: number;
  readonly seed: number;
  readonly load?: Partial<LoadShape>;
  /** After the duration, how long in-flight calls may take to finish. Default 20 s. */
  readonly settleMs?: number;
  /** Mean gap between faults after the first pass. Default 4 s. */
  readonly meanFaultGapMs?: number;
  /** Longest the readPage cross-check may take. Default 30 s. */
  readonly readPageBudgetMs?: number;
  readonly gatewayLogDir?: string;
  /** Writes every recorded exchange, call and the tap's log copy here as JSON (for investigations). */
  readonly dumpPath?: string;
  /** Progress lines. Default: none. */
  readonly say?: (line: string) => void;
}

export interface ChaosReport {
  readonly seed: number;
  readonly durationMs: number;
  readonly wallMs: number;
  readonly clients: { readonly raw: number; readonly sdk: number };
  readonly machine: Readonly<Record<string, string | number>>;
  readonly streams: Readonly<Record<string, number>> & { readonly total: number };
  readonly events: { readonly delivered: number; readonly logged: number };
  /** GETs with Last-Event-ID; `delivering`: those that delivered at least one event after the cursor. */
  readonly resumes: { readonly total: number; readonly delivering: number; readonly byClient: Readonly<Record<string, number>>; readonly byOutcome: Readonly<Record<string, number>> };
  readonly calls: { readonly total: number; readonly byOutcome: Readonly<Record<string, number>> };
  readonly faults: Readonly<Record<string, number>>;
  readonly faultLog: readonly FaultRecord[];
  readonly explicitVerdicts: Readonly<Record<string, number>>;
  readonly unfinished: Readonly<Record<string, number>>;
  readonly silentViolations: { readonly total: number; readonly byKind: Readonly<Record<string, number>>; readonly examples: readonly Violation[] };
  readonly guardReports: Readonly<Record<string, number>>;
  /** SDK resumes whose cursor was lost (the guard held back the priming echo), by consequence. */
  readonly cursorLosses: Readonly<Record<string, number>>;
  readonly logAnomalies: { readonly total: number; readonly byKind: Readonly<Record<string, number>>; readonly examples: readonly Violation[] };
  readonly verification: CheckResult['verification'] & { readonly tapMessages: number; readonly tapRebuilds: number; readonly tapHolesFilled: number; readonly tapHolesPurged: number; readonly tapReplicaMismatches: number };
}

const EXAMPLES = 40;

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const began = Date.now();
  const say = options.say ?? (() => undefined);
  const load: LoadShape = { ...defaultLoad, ...options.load };
  const rng = createRng(options.seed);
  const namespace = `chaos_${options.seed}_${randomBytes(3).toString('hex')}`;
  const { streamName, subjectPrefix } = namespaceNames(namespace);
  say(`starting: 3-node NATS cluster, 2 upstreams, 3 gateways, balancer (namespace ${namespace}, log stream ${streamName})`);
  const stack = await startChaosStack({ namespace, gatewayLogDir: options.gatewayLogDir });
  const tap = await startLogTap(stack.cluster.urls, streamName, subjectPrefix);
  const recorder = new Recorder();
  const hardStop = new AbortController();
  // Every call of every client listens to it.
  setMaxListeners(0, hardStop.signal);
  const faultStop = new AbortController();
  try {
    const t0 = Date.now();
    const settleMs = options.settleMs ?? 20_000;
    const ctx: ClientContext = {
      baseUrl: stack.baseUrl,
      recorder,
      stopAt: t0 + options.durationMs,
      hardStop: hardStop.signal,
      slowStreams: new Map(),
      load,
    };
    const names: string[] = [];
    const clients: Array<{ run(): Promise<void> }> = [];
    for (let i = 0; i < options.clients; i += 1) {
      const route: RouteName = i % 2 === 0 ? 'store' : 'plain';
      const sdk = i % 3 === 0;
      const name = `${sdk ? 'sdk' : 'raw'}${i + 1}-${route}`;
      names.push(name);
      clients.push(sdk ? new SdkClientRunner(ctx, name, route, rng.fork(i)) : new RawClient(ctx, name, route, rng.fork(i)));
    }
    // Faults from 10% of the run (15 s at most) to its last stretch, which stays calm so streams can finish.
    const quiet = Math.min(options.durationMs * 0.15, 8_000);
    const plan = planFaults(rng.fork(1_000_003), Math.min(options.durationMs * 0.1, 15_000), options.durationMs - quiet, options.meanFaultGapMs ?? 4_000);
    say(`running ${options.durationMs / 1000}s: ${clients.length} clients, ${plan.length} faults planned (seed ${options.seed})`);
    const faults = runFaults(plan, { stack, clients: names, slowStreams: ctx.slowStreams, say }, t0, faultStop.signal);
    const progress = setInterval(() => {
      const resumes = recorder.exchanges.filter((e) => e.method === 'GET' && e.cursor !== undefined).length;
      say(`  t=${((Date.now() - t0) / 1000).toFixed(0)}s calls=${recorder.calls.length} resumes=${resumes} log=${tap.stats.messages}`);
    }, 10_000);
    progress.unref();
    const hardTimer = setTimeout(() => hardStop.abort(), options.durationMs + settleMs);
    try {
      await Promise.all(clients.map((c, i) => c.run().finally(() => say(`  client ${names[i]} done at ${((Date.now() - t0) / 1000).toFixed(1)}s`))));
    } finally {
      clearTimeout(hardTimer);
      clearInterval(progress);
      faultStop.abort();
    }
    const faultLog = await faults;
    say(`load done after ${((Date.now() - t0) / 1000).toFixed(1)}s; reading the log back`);
    // Pumps still recording after their clients left (e.g. deadline ends) land in the tap before it stops.
    await sleep(1_000);
    await tap.stop();

    const pages = await readPages(stack.cluster.urls, namespace, recorder, options.readPageBudgetMs ?? 30_000, say);
    const result = check({ exchanges: recorder.exchanges, calls: recorder.calls, guardViolations: recorder.violations, log: tap.streams, pages, purged: tap.purged });
    const counts = tally(result);
    if (options.dumpPath !== undefined) {
      await writeFile(options.dumpPath, JSON.stringify({ exchanges: recorder.exchanges, calls: recorder.calls, guard: recorder.violations, log: Object.fromEntries(tap.streams), purged: [...tap.purged], violations: result.violations, streams: result.streams }));
      say(`dump written to ${options.dumpPath}`);
    }

    const resumes: Record<string, number> = {};
    let resumeTotal = 0;
    let resumesDelivering = 0;
    const resumesByClient: Record<string, number> = {};
    let delivered = 0;
    for (const ex of recorder.exchanges) {
      delivered += ex.events.filter((e) => e.id !== undefined).length;
      if (ex.method !== 'GET' || ex.cursor === undefined) continue;
      resumeTotal += 1;
      bump(resumes, resumeOutcome(ex.status, ex.verdict ?? ex.bodyError?.verdict));
      bump(resumesByClient, ex.clientKind);
      if (ex.events.some((e) => e.id !== ex.cursor)) resumesDelivering += 1;
    }
    const callsByOutcome: Record<string, number> = {};
    for (const call of recorder.calls) {
      const code = call.outcome === 'http' || call.outcome === 'refused' ? ` ${call.code ?? ''}` : '';
      bump(callsByOutcome, `${call.clientKind} ${call.outcome}${code}${call.verdict === undefined ? '' : ` ${call.verdict}`}`);
    }
    const faultCounts: Record<string, number> = {};
    for (const kind of Object.values(FaultKind)) faultCounts[kind] = 0;
    for (const f of faultLog) if (f.ok) bump(faultCounts, f.kind);
    faultCounts['client_abort'] = recorder.clientFaults['client_abort'] ?? 0;
    faultCounts['slow_stream'] = recorder.clientFaults['slow_stream'] ?? 0;
    faultCounts['cut_after_priming'] = recorder.clientFaults['cut_after_priming'] ?? 0;
    const guardReports: Record<string, number> = {};
    for (const g of recorder.violations) bump(guardReports, g.code === 'explicit_refusal' ? `explicit_refusal ${g.verdict ?? '?'}` : g.code);

    return {
      seed: options.seed,
      durationMs: options.durationMs,
      wallMs: Date.now() - began,
      clients: { raw: clients.length - Math.ceil(clients.length / 3), sdk: Math.ceil(clients.length / 3) },
      machine: machine(),
      streams: { total: result.streams.length, ...counts.streams },
      events: { delivered, logged: tap.stats.messages },
      resumes: { total: resumeTotal, delivering: resumesDelivering, byClient: resumesByClient, byOutcome: resumes },
      calls: { total: recorder.calls.length, byOutcome: callsByOutcome },
      faults: faultCounts,
      faultLog,
      explicitVerdicts: counts.explicit,
      unfinished: counts.unfinished,
      silentViolations: { total: result.violations.length, byKind: counts.violations, examples: result.violations.slice(0, EXAMPLES) },
      guardReports,
      cursorLosses: result.cursorLosses,
      logAnomalies: { total: result.logAnomalies.length, byKind: counts.logAnomalies, examples: result.logAnomalies.slice(0, EXAMPLES) },
      verification: { ...result.verification, tapMessages: tap.stats.messages, tapRebuilds: tap.stats.rebuilds, tapHolesFilled: tap.stats.holesFilled, tapHolesPurged: tap.stats.holesPurged, tapReplicaMismatches: tap.stats.replicaMismatches },
    };
  } finally {
    hardStop.abort();
    faultStop.abort();
    await tap.stop(1_000).catch(() => undefined);
    await stack.teardown();
  }
}

function resumeOutcome(status: number | undefined, verdict: string | undefined): string {
  if (status === undefined) return 'no answer (connection failed or cut)';
  if (status === 200) return '200 resumed';
  if (status === 204) return '204 resumed, nothing left';
  return `${status} ${verdict ?? ''}`.trim();
}

/**
 * `SessionLog.readPage` for every stream a client touched whose session is
 * still alive: the log as the library reads it, to cross-check the tap and
 * to find any event the tap missed. Bounded by `budgetMs`.
 */
async function readPages(servers: readonly string[], namespace: string, recorder: Recorder, budgetMs: number, say: (line: string) => void): Promise<Map<string, LogRecord[]>> {
  const pages = new Map<string, LogRecord[]>();
  const until = Date.now() + budgetMs;
  let log: SessionLog;
  try {
    log = await SessionLog.create({ servers, namespace, replicas: 3 });
  } catch (err) {
    say(`readPage cross-check skipped: ${(err as Error).message}`);
    return pages;
  }
  try {
    const groups = [...groupByStream(recorder.exchanges).values()];
    const alive = new Map<string, boolean>();
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < groups.length && Date.now() < until) {
        const group = groups[next++]!;
        try {
          let live = alive.get(group.session);
          if (live === undefined) {
            live = (await log.getSession(group.session))?.state === 'active';
            alive.set(group.session, live);
          }
          if (!live) continue;
          const events = await log.readPage(group.session, group.stream, 0, 10_000);
          pages.set(
            group.key,
            events.map((e) => ({ pos: e.pos, seq: e.seq, prev: e.prev, epoch: e.epoch, kind: e.kind, digest: digest(e.payload), endReason: e.endReason, upstreamId: e.upstreamId, response: responseOf(e.payload) })),
          );
        } catch {
          // A session closed meanwhile, or a read that failed: the tap still has it.
        }
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
    say(`readPage cross-check: ${pages.size} of ${groups.length} streams (sessions still alive${Date.now() >= until ? ', budget reached' : ''})`);
  } finally {
    await log.close();
  }
  return pages;
}

function machine(): Record<string, string | number> {
  let nats = 'unknown';
  try {
    nats = execFileSync(findNatsServerBinary(), ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // Reported as unknown.
  }
  const cpu = cpus();
  return { cpus: cpu.length, cpuModel: cpu[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, natsServer: nats, platform: `${process.platform} ${process.arch}` };
}
