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
import { decodeEventId } from '@tether/protocol';
import { logLayout, namespaceNames, partitionOf, resolveConfig, SessionLog } from '@tether/session-log';
import type { NatsServer } from '@tether/testing';
import { check, groupByStream, tally } from './checker.js';
import type { CheckResult, Violation } from './checker.js';
import type { WriterScan } from './writers.js';
import { defaultLoad, GATEWAY_TARGET, SDK_EXAMPLE_TARGET } from './client-context.js';
import type { ClientContext, LoadShape, RouteName, TargetShape } from './client-context.js';
import { DEFAULT_SELECTION, firstPassPending, planFaults, runFaults } from './faults.js';
import type { FaultRecord, FaultSelection } from './faults.js';
import { startLogTap } from './log-tap.js';
import { absentReadAt, isPurged, powerLossReport, unheldGone } from './power-loss.js';
import type { PowerLossReport } from './power-loss.js';
import { responseOf } from './log-tap.js';
import type { LogRecord } from './log-tap.js';
import { RawClient } from './raw-client.js';
import { describeForensics, replicaForensics } from './replica-forensics.js';
import type { StreamForensics } from './replica-forensics.js';
import { Recorder } from './record.js';
import { SdkClientRunner } from './sdk-client.js';
import { startChaosStack } from './stack.js';
import { upstreamNamesOf } from './upstreams.js';
import type { UpstreamSet } from './upstreams.js';
import type { HostNetwork } from './net/hosts.js';
import { createPlacement } from './net/placement.js';
import { TaskPart } from './task-run.js';
import type { TaskUpstreamKind } from './task-client.js';
import type { TaskReport, TasksSkipped } from './task-checker.js';
import type { LogMode, StackConfig, SyncMode, TargetName } from './stack.js';
import { createRng } from '../shared/random.js';
import { bump, digest, sleep } from './util.js';

/** How long the load goes on after the last first-pass fault ended, so its effects meet traffic. */
const EXTEND_MARGIN_MS = 3_000;

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
  /**
   * How much longer than `durationMs` the load may go on while a fault of
   * the first pass has not fired yet (queued behind a slow one on its
   * component). Default twice the duration.
   */
  readonly maxExtensionMs?: number;
  /** Longest the readPage cross-check may take. Default 30 s. */
  readonly readPageBudgetMs?: number;
  readonly gatewayLogDir?: string;
  /** Writes every recorded exchange, call and the tap's log copy here as JSON (for investigations). */
  readonly dumpPath?: string;
  /** Progress lines. Default: none. */
  readonly say?: (line: string) => void;
  /** What runs behind the balancer: the gateways (default) or the SDK example's fleet. */
  readonly target?: TargetName;
  /** The gateways' log: in-process on NATS (default) or through session-log services. */
  readonly log?: LogMode;
  /** `always`: the cluster runs with `jetstream { sync_interval: always }`. */
  readonly sync?: SyncMode;
  /** The fault kinds and weights. Default today's six (`DEFAULT_SELECTION`). */
  readonly faults?: FaultSelection;
  /**
   * 2026-07-28 task clients (`task-client.ts`) beside the others, on their own
   * route; each `gateway_sigkill` then aims at a task's runner. With the
   * gateways only, on either log (`--log grpc://`: the task records go
   * through the session-log services). Default 0.
   */
  readonly taskClients?: number;
  /**
   * The upstream of the task clients' route: `kit` (default), whose tasks
   * the gateways own; `owned`, two replicas running the Tasks extension
   * themselves, whose tasks the gateways route (`owned-replicas.ts`; the
   * `task_replica_kill` fault needs it).
   */
  readonly taskUpstream?: TaskUpstreamKind;
  /**
   * Streams the log is spread over (`--log-partitions` of every process
   * that opens it); the tap reads each, the checker keeps positions per
   * partition. Default 1: the unpartitioned log.
   */
  readonly logPartitions?: number;
  /**
   * `--net hosts`: the host network this process runs in (its `clients`
   * host; `run.ts` builds it and removes it). Every other process goes in a
   * host of its own (`net/placement.ts`). Default none: loopback, as before.
   */
  readonly net?: HostNetwork;
  /**
   * The upstreams behind the gateways (`--upstreams`): `kit` (the test
   * kit's two), `everything` (the reference server, `/everything/mcp`),
   * `v2` (an SDK v2 `createMcpHandler` server, `/v2/mcp`). Clients are dealt
   * to the routes in turn. Default `['kit']`: the run as before.
   */
  readonly upstreams?: readonly UpstreamSet[];
}

export interface ChaosReport {
  /** What ran: target, log mode and partitions, nats-server, sync, and the fault kinds with their weights. */
  readonly config: StackConfig & { readonly faults: FaultSelection; readonly taskUpstream?: TaskUpstreamKind };
  readonly seed: number;
  readonly durationMs: number;
  /** How long the load went on past `durationMs` for the first pass's faults to fire (0: none needed it). */
  readonly extendedMs: number;
  readonly wallMs: number;
  readonly clients: { readonly raw: number; readonly sdk: number };
  readonly machine: Readonly<Record<string, string | number>>;
  readonly streams: Readonly<Record<string, number>> & { readonly total: number };
  /** With `--upstreams`: per route path, its streams by class, its resumes and its tool calls (`calls`, `results`). */
  readonly routes?: Readonly<Record<string, Readonly<Record<string, number>>>>;
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
  /** The `nats_power_loss` accounting: acknowledged events lost, and how each ended for its clients. */
  readonly powerLoss: PowerLossReport;
  /** Where a client held an event the log does not: each replica's state and copy of those positions (`replica-forensics.ts`). */
  readonly replicaForensics: readonly StreamForensics[];
  /** The two-writer scan of every stream in the log. */
  readonly writers: WriterScan;
  /** Requests still open when the run's hard stop aborted them (client, request, what it had got). */
  readonly openAtHardStop: readonly string[];
  /** The task clients' tasks, judged (`task-checker.ts`), or why none ran. */
  readonly tasks: TaskReport | TasksSkipped;
  /** Per proxied NATS client process (`gateway_nats_cut`): connections and resets through its proxy. */
  readonly natsProxies: Readonly<Record<string, { connections: number; resets: number; refused: number }>>;
  /** `tapMessagesByPartition`: what the tap read from each partition stream (one entry on an unpartitioned log). */
  readonly verification: CheckResult['verification'] & { readonly tapMessages: number; readonly tapMessagesByPartition: readonly number[]; readonly tapRebuilds: number; readonly tapHolesFilled: number; readonly tapHolesPurged: number; readonly tapReplicaMismatches: number; readonly tapAbsentFoundLater: number };
}

const EXAMPLES = 40;

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const began = Date.now();
  const say = options.say ?? (() => undefined);
  const load: LoadShape = { ...defaultLoad, ...options.load };
  const rng = createRng(options.seed);
  const namespace = `chaos_${options.seed}_${randomBytes(3).toString('hex')}`;
  const { subjectPrefix } = namespaceNames(namespace);
  const logPartitions = options.logPartitions ?? 1;
  const streamNames = logLayout(resolveConfig({ namespace, partitions: logPartitions })).partitions.map((p) => p.streamName);
  const streamsText = logPartitions === 1 ? `log stream ${streamNames[0]!}` : `log on ${logPartitions} partitions, streams ${streamNames[0]!} … ${streamNames.at(-1)!}`;
  const targetName = options.target ?? 'gateway';
  const logMode = options.log ?? 'nats';
  const selection = options.faults ?? DEFAULT_SELECTION;
  const upstreamNames = targetName === 'sdk-example' ? [] : upstreamNamesOf(options.upstreams ?? ['kit']);
  const target: TargetShape = targetName === 'sdk-example' ? SDK_EXAMPLE_TARGET : { routes: Object.fromEntries(upstreamNames.map((name) => [name, GATEWAY_TARGET.routes[name]])) };
  const routes = Object.keys(target.routes) as RouteName[];
  const parts =
    targetName === 'sdk-example'
      ? '3 SDK example instances'
      : `${upstreamNames.length} upstreams${upstreamNames.length === 2 && upstreamNames[0] === 'store' ? '' : ` (${upstreamNames.join(', ')})`}, 3 gateways${logMode === 'grpc' ? ' on --log grpc:// (2 session-log services)' : ''}`;
  const tasksSkipped = taskSkipReason(options.taskClients ?? 0, targetName);
  if (options.taskUpstream === 'owned' && options.net !== undefined) throw new Error('--task-upstream owned runs its replicas in the harness\'s process: not with --net hosts');
  // Before the gateways: their tool catalog reads the task upstream's tools.
  const taskPart = tasksSkipped === undefined ? await TaskPart.start({ clients: options.taskClients!, upstream: options.taskUpstream ?? 'kit' }) : undefined;
  say(`starting: 3-node NATS cluster${options.sync === 'always' ? ' (sync_interval: always)' : ''}, ${parts}${taskPart === undefined ? '' : taskPart.upstreamKind === 'owned' ? ', two replicas running their own tasks on /tasks/mcp' : ', a task upstream on /tasks/mcp'}, balancer (namespace ${namespace}, ${streamsText})${options.net === undefined ? '' : `, each in a host of its own (network ${options.net.runId}: ${options.net.hosts.map((h) => `${h.name} ${h.address}`).join(', ')})`}`);
  const placement = options.net === undefined ? undefined : await createPlacement(options.net, taskPart?.upstreamUrl, options.seed);
  const stack = await startChaosStack({
    placement,
    taskUpstreamUrl: taskPart?.upstreamUrl,
    namespace,
    gatewayLogDir: options.gatewayLogDir,
    target: targetName,
    log: logMode,
    sync: options.sync ?? 'default',
    logPartitions,
    natsProxies: selection.some((s) => s.kind === 'gateway_nats_cut'),
    ...(options.upstreams === undefined ? {} : { upstreams: options.upstreams }),
  }).catch(async (err: unknown) => {
    await placement?.close();
    await taskPart?.close();
    throw err;
  });
  say(`nats-server ${stack.config.natsVersion} (${stack.config.natsBin})`);
  const tap = await startLogTap(stack.cluster.urls, streamNames, { subjectPrefix });
  const recorder = new Recorder();
  const hardStop = new AbortController();
  // Every call of every client listens to it.
  setMaxListeners(0, hardStop.signal);
  const faultStop = new AbortController();
  try {
    const t0 = Date.now();
    let extendedMs = 0;
    const settleMs = options.settleMs ?? 20_000;
    const ctx: ClientContext = {
      baseUrl: stack.baseUrl,
      recorder,
      stopAt: t0 + options.durationMs,
      hardStop: hardStop.signal,
      slowStreams: new Map(),
      load,
      target,
    };
    const names: string[] = [];
    /** Each client's route path, for the per-route counts. */
    const pathOf = new Map<string, string>();
    const clients: Array<{ run(): Promise<void> }> = [];
    for (let i = 0; i < options.clients; i += 1) {
      // The SDK example has one route; a gateway run deals the clients to its routes in turn (half on each of the kit's two).
      const route = routes[i % routes.length]!;
      const sdk = i % 3 === 0;
      const name = `${sdk ? 'sdk' : 'raw'}${i + 1}-${targetName === 'sdk-example' ? 'example' : route}`;
      names.push(name);
      pathOf.set(name, target.routes[route]!.path);
      clients.push(sdk ? new SdkClientRunner(ctx, name, route, rng.fork(i)) : new RawClient(ctx, name, route, rng.fork(i)));
    }
    // Faults from 10% of the run (15 s at most) to its last stretch, which stays calm so streams can finish.
    const quiet = Math.min(options.durationMs * 0.15, 8_000);
    const plan = planFaults(rng.fork(1_000_003), Math.min(options.durationMs * 0.1, 15_000), options.durationMs - quiet, options.meanFaultGapMs ?? 4_000, selection);
    say(`running ${options.durationMs / 1000}s: ${clients.length} clients, ${plan.length} faults planned (seed ${options.seed}; kinds ${selection.map((s) => `${s.kind}=${s.weight}`).join(', ')})`);
    await taskPart?.begin(stack, namespace, ctx.stopAt, rng);
    const liveFaults: FaultRecord[] = [];
    const faults = runFaults(plan, { stack, clients: names, slowStreams: ctx.slowStreams, say, tap, ...(taskPart === undefined ? {} : { taskRunner: taskPart.runnerToKill }), ...(taskPart?.replicaKill === undefined ? {} : { replicaKill: taskPart.replicaKill }) }, t0, faultStop.signal, liveFaults);
    const progress = setInterval(() => {
      const resumes = recorder.exchanges.filter((e) => e.method === 'GET' && e.cursor !== undefined).length;
      say(`  t=${((Date.now() - t0) / 1000).toFixed(0)}s calls=${recorder.calls.length} resumes=${resumes} log=${tap.stats.messages}`);
    }, 10_000);
    progress.unref();
    let hardStopAt: number | undefined;
    const armHardStop = (): NodeJS.Timeout =>
      setTimeout(() => {
        hardStopAt = Date.now();
        hardStop.abort();
      }, ctx.stopAt + settleMs - Date.now());
    let hardTimer = armHardStop();
    // Every kind of the first pass fires while clients still call, whatever
    // the machine's speed: the load goes on past its planned end while one
    // is pending (queued behind a slow fault on its component), up to
    // `maxExtensionMs`, and for EXTEND_MARGIN_MS after the last one ends.
    const maxStopAt = ctx.stopAt + (options.maxExtensionMs ?? options.durationMs * 2);
    const extender = setInterval(() => {
      if (Date.now() < ctx.stopAt - EXTEND_MARGIN_MS || ctx.stopAt >= maxStopAt) return;
      const pending = firstPassPending(plan, liveFaults);
      if (pending.length === 0) return;
      ctx.stopAt = Math.min(maxStopAt, Date.now() + EXTEND_MARGIN_MS);
      taskPart?.extend(ctx.stopAt);
      clearTimeout(hardTimer);
      hardTimer = armHardStop();
      if (extendedMs === 0) say(`  the load goes on past ${options.durationMs / 1000}s until ${pending.join(', ')} fired (at most ${((maxStopAt - t0) / 1000).toFixed(0)}s)`);
      extendedMs = ctx.stopAt - (t0 + options.durationMs);
    }, 250);
    extender.unref();
    try {
      await Promise.all(clients.map((c, i) => c.run().finally(() => say(`  client ${names[i]} done at ${((Date.now() - t0) / 1000).toFixed(1)}s`))));
    } finally {
      clearTimeout(hardTimer);
      clearInterval(extender);
      clearInterval(progress);
      faultStop.abort();
    }
    const faultLog = await faults;
    const tasks: TaskReport | TasksSkipped = taskPart === undefined ? { skipped: tasksSkipped! } : await taskPart.finish(say);
    say(`load done after ${((Date.now() - t0) / 1000).toFixed(1)}s; reading the log back`);
    // Pumps still recording after their clients left (e.g. deadline ends) land in the tap before it stops.
    await sleep(1_000);
    await tap.stop();

    // Delivered events at positions a loss's re-read found empty that the tap never held (written and served
    // while the nodes came back): judged like the tap's own lost events, purged or lost (finding 14).
    const tapHolds = Array.from({ length: logPartitions }, () => new Set<number>());
    // One merge of the partition taps' copies (the getter merges on every read); `drop` below edits its lists in place.
    const log = tap.streams;
    for (const [key, list] of log) for (const r of list) tapHolds[partitionOf(key.split('/')[0] ?? '', logPartitions)]!.add(r.pos);
    const unheld = unheldGone(tap.losses, recorder.exchanges, (session) => partitionOf(session, logPartitions), (partition, pos) => tapHolds[partition]!.has(pos));
    const lostSessions = new Set([...tap.losses.flatMap((a) => a.lost.map((l) => l.key.split('/')[0] ?? '')), ...unheld.map((u) => u.key.split('/')[0] ?? '')]);
    const { pages, closed } = await readPages(stack.cluster.urls, namespace, logPartitions, recorder, options.readPageBudgetMs ?? 30_000, say, lostSessions);
    // What a power loss took (not what a session close purged): out of the tap's copy, and a client
    // that had one is judged by what it did next. Per partition: each numbers its own positions.
    const lost = Array.from({ length: logPartitions }, () => new Map<number, LogRecord>());
    const purged = tap.purged.map((positions) => new Set(positions));
    for (const account of tap.losses) {
      for (const l of account.lost) {
        if (isPurged(l, closed, absentReadAt(account, l.record.pos))) continue;
        if (l.how === 'absent') tap.drop(l.key, l.record);
        lost[account.partition]!.set(l.record.pos, l.record);
      }
    }
    for (const u of unheld) {
      if (isPurged({ key: u.key, record: u.record, how: 'absent' }, closed, u.readAt)) purged[u.partition]!.add(u.record.pos);
      else lost[u.partition]!.set(u.record.pos, u.record);
    }
    const tools = Object.values(target.routes).map((r) => r.tool);
    const result = check({ exchanges: recorder.exchanges, calls: recorder.calls, guardViolations: recorder.violations, log, pages, partitions: logPartitions, purged, lost, tools, hardStopAt });
    const powerLoss = powerLossReport(tap.losses, recorder.exchanges, result.streams, closed, unheld);
    const counts = tally(result);
    const forensics = await readReplicas(stack.cluster.servers, streamNames, result.violations, log, say);
    if (options.dumpPath !== undefined) {
      await writeFile(options.dumpPath, JSON.stringify({ exchanges: recorder.exchanges, calls: recorder.calls, guard: recorder.violations, log: Object.fromEntries(log), purged: purged.map((positions) => [...positions]), violations: result.violations, streams: result.streams, taskCalls: taskPart?.calls ?? [] }));
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
      bump(callsByOutcome, `${call.clientKind}${call.stateless === true ? ' 2026-07-28' : ''} ${call.outcome}${code}${call.verdict === undefined ? '' : ` ${call.verdict}`}`);
    }
    const faultCounts: Record<string, number> = {};
    for (const { kind } of selection) faultCounts[kind] = 0;
    for (const f of faultLog) if (f.ok) bump(faultCounts, f.kind);
    faultCounts['client_abort'] = recorder.clientFaults['client_abort'] ?? 0;
    faultCounts['slow_stream'] = recorder.clientFaults['slow_stream'] ?? 0;
    faultCounts['cut_after_priming'] = recorder.clientFaults['cut_after_priming'] ?? 0;
    const guardReports: Record<string, number> = {};
    for (const g of recorder.violations) bump(guardReports, g.code === 'explicit_refusal' ? `explicit_refusal ${g.verdict ?? '?'}` : g.code);

    // Requests still open when the hard stop came: what a client was waiting on when its patience had no say.
    const openAtHardStop: string[] = [];
    if (hardStopAt !== undefined) {
      for (const ex of recorder.exchanges) {
        // Requests the abort itself set off (the SDK's cancellations) are not what anyone waited on.
        if ((ex.endedAt !== undefined && ex.endedAt < hardStopAt - 100) || ex.startedAt >= hardStopAt - 100) continue;
        openAtHardStop.push(
          `${ex.client} #${ex.n} ${ex.method} ${ex.rpc?.method ?? ''}${ex.cursor === undefined ? '' : ` from ${ex.cursor}`} started at ${((ex.startedAt - t0) / 1000).toFixed(1)}s, status ${ex.status ?? 'none'}, ${ex.events.length} events, ${ex.end}`.replace(/ {2,}/g, ' '),
        );
      }
    }
    const byRoute: Record<string, Record<string, number>> = {};
    if (options.upstreams !== undefined) {
      for (const shape of Object.values(target.routes)) byRoute[shape.path] = { complete: 0, explicit: 0, open: 0, unfinished: 0, violation: 0, resumes: 0, calls: 0, results: 0 };
      for (const st of result.streams) if (byRoute[st.path] !== undefined) bump(byRoute[st.path]!, st.cls);
      for (const ex of recorder.exchanges) if (ex.method === 'GET' && ex.cursor !== undefined && byRoute[ex.path] !== undefined) bump(byRoute[ex.path]!, 'resumes');
      for (const call of recorder.calls) {
        const counts = byRoute[pathOf.get(call.client) ?? ''];
        if (counts === undefined) continue;
        bump(counts, 'calls');
        if (call.outcome === 'result') bump(counts, 'results');
      }
    }
    const natsProxies: Record<string, { connections: number; resets: number; refused: number }> = {};
    for (const c of stack.natsClients) natsProxies[c.name] = { connections: c.proxy.stats.connections, resets: c.proxy.stats.resets, refused: c.proxy.stats.refused };

    return {
      config: { ...stack.config, faults: selection, ...(taskPart === undefined ? {} : { taskUpstream: taskPart.upstreamKind }) },
      seed: options.seed,
      durationMs: options.durationMs,
      extendedMs,
      wallMs: Date.now() - began,
      clients: { raw: clients.length - Math.ceil(clients.length / 3), sdk: Math.ceil(clients.length / 3) },
      machine: machine(stack.config.natsBin),
      streams: { total: result.streams.length, ...counts.streams },
      ...(options.upstreams === undefined ? {} : { routes: byRoute }),
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
      powerLoss,
      replicaForensics: forensics,
      openAtHardStop,
      writers: result.writers,
      tasks,
      natsProxies,
      verification: { ...result.verification, tapMessages: tap.stats.messages, tapMessagesByPartition: tap.byPartition.map((s) => s.messages), tapRebuilds: tap.stats.rebuilds, tapHolesFilled: tap.stats.holesFilled, tapHolesPurged: tap.stats.holesPurged, tapReplicaMismatches: tap.stats.replicaMismatches, tapAbsentFoundLater: tap.stats.absentFoundLater },
    };
  } finally {
    hardStop.abort();
    faultStop.abort();
    await tap.stop(1_000).catch(() => undefined);
    await stack.teardown();
    await placement?.close();
    await taskPart?.close();
  }
}

/**
 * Each replica's copy where clients held events the log does not
 * (`not_in_log`): the positions they held, and the positions of the same
 * stream's events around them, read on every node before the teardown.
 */
async function readReplicas(
  servers: readonly NatsServer[],
  streamNames: readonly string[],
  violations: readonly Violation[],
  log: ReadonlyMap<string, readonly LogRecord[]>,
  say: (line: string) => void,
): Promise<StreamForensics[]> {
  const positions = new Map<string, number[]>();
  for (const v of violations) {
    if (v.kind !== 'not_in_log' || v.eventId === undefined) continue;
    const id = decodeEventId(v.eventId);
    if (!id.ok) continue;
    const stream = streamNames[partitionOf(v.session, streamNames.length)]!;
    const list = positions.get(stream) ?? [];
    if (list.length === 0) positions.set(stream, list);
    list.push(id.value.pos);
    for (const r of log.get(`${v.session}/${v.stream}`) ?? []) if (Math.abs(r.pos - id.value.pos) <= 200) list.push(r.pos);
  }
  if (positions.size === 0) return [];
  try {
    const found = await replicaForensics(servers, positions);
    for (const line of describeForensics(found)) say(line);
    return found;
  } catch (err) {
    say(`replica forensics failed: ${(err as Error).message}`);
    return [];
  }
}

/** Why a run has no task clients, or undefined when it has some. */
function taskSkipReason(clients: number, target: TargetName): string | undefined {
  if (clients <= 0) return 'no task clients asked for (--task-clients 0)';
  if (target !== 'gateway') return 'the SDK example fleet is not the gateways: task clients run against the gateways only';
  return undefined;
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
async function readPages(
  servers: readonly string[],
  namespace: string,
  partitions: number,
  recorder: Recorder,
  budgetMs: number,
  say: (line: string) => void,
  lostSessions: ReadonlySet<string>,
): Promise<{ pages: Map<string, LogRecord[]>; closed: Map<string, number> }> {
  const pages = new Map<string, LogRecord[]>();
  /** Closed sessions, each with when it was closed (its closed record's touchedAtMs). */
  const closed = new Map<string, number>();
  const until = Date.now() + budgetMs;
  let log: SessionLog;
  try {
    log = await SessionLog.create({ servers, namespace, partitions, replicas: 3 });
  } catch (err) {
    say(`readPage cross-check skipped: ${(err as Error).message}`);
    return { pages, closed };
  }
  try {
    // Sessions that held events a power loss took: those closed before the loss's re-check were purged.
    for (const session of lostSessions) {
      try {
        const record = await log.getSession(session);
        if (record !== undefined && record.state !== 'active') closed.set(session, record.touchedAtMs);
      } catch {
        // Unknown: counted as lost, the stricter reading.
      }
    }
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
            events.map((e) => ({ pos: e.pos, seq: e.seq, prev: e.prev, epoch: e.epoch, kind: e.kind, digest: digest(e.payload), endReason: e.endReason, upstreamId: e.upstreamId, writer: e.writer ?? '', response: responseOf(e.payload) })),
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
  return { pages, closed };
}

function machine(natsBin: string): Record<string, string | number> {
  let nats = 'unknown';
  try {
    nats = execFileSync(natsBin, ['--version'], { encoding: 'utf8' }).trim();
  } catch {
    // Reported as unknown.
  }
  const cpu = cpus();
  return { cpus: cpu.length, cpuModel: cpu[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, natsServer: nats, platform: `${process.platform} ${process.arch}` };
}
