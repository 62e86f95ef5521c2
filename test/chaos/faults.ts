/**
 * The fault schedule: planned up front from the seed (kinds, times, targets),
 * so a run can be repeated, then executed against the stack. The first pass
 * fires every selected kind once, in a seeded order, early enough that even
 * a short run sees all of them; later faults are drawn at random with
 * weights. Faults on one component run one at a time (one gateway down at a
 * time, one NATS fault at a time); different components overlap freely.
 * Every fault ends by itself: a stopped node is continued and a frozen proxy
 * thawed in a `finally`, also when the run aborts.
 */
import type { NatsNodes } from '@tether/testing';
import type { LogTap } from './log-tap.js';
import type { PowerLossAccount } from './power-loss.js';
import type { ChaosStack, UpstreamName } from './stack.js';
import { executeNetFault, isNetKind, NET_KINDS } from './net/net-faults.js';
import { sleep } from './util.js';
import type { Rng } from '../shared/random.js';

export const FaultKind = {
  gatewaySigkill: 'gateway_sigkill',
  gatewayDrain: 'gateway_sigterm_drain',
  natsNodeKill: 'nats_node_kill',
  upstreamRestart: 'upstream_restart',
  connectionCut: 'connection_cut_all',
  slowClient: 'slow_client',
  /** SIGKILL of every NATS node at once, then all restarted on their store dirs (Jepsen's power loss, as far as a process kill goes). */
  natsPowerLoss: 'nats_power_loss',
  /** One NATS client process (gateway, session-log service or SDK instance) cut off from NATS by its proxy: frozen, or reset. */
  gatewayNatsCut: 'gateway_nats_cut',
  /** SIGSTOP of one NATS node, SIGCONT after a seeded time. */
  natsNodeStop: 'nats_node_stop',
  /** With `--task-upstream owned` only: one upstream replica holding tasks stopped, then started again empty (`owned-replicas.ts`). */
  taskReplicaKill: 'task_replica_kill',
  // Only with `--net hosts` (net/net-faults.ts says what each does).
  netLatency: 'net_latency',
  linkLossDup: 'link_loss_dup',
  natsNodeIsolated: 'nats_node_isolated',
  gatewayNatsPartition: 'gateway_nats_partition',
  gatewayUpstreamPartition: 'gateway_upstream_partition',
  netAsymmetric: 'net_asymmetric',
  partitionHealResume: 'partition_heal_resume',
  linkStall: 'link_stall',
  routeReset: 'route_reset',
} as const;
export type FaultKind = (typeof FaultKind)[keyof typeof FaultKind];

/** The kinds a run has without `--faults`, in the order the first pass shuffles them (today's schedule, draw for draw). */
export const DEFAULT_KINDS: readonly FaultKind[] = ['gateway_sigkill', 'gateway_sigterm_drain', 'nats_node_kill', 'upstream_restart', 'connection_cut_all', 'slow_client'];
/** Spacing of the first pass (every kind once) in a long run. */
const FIRST_PASS_STEP_MS = 8_000;
/** How often each kind is drawn after the first pass, unless a run says otherwise. */
export const DEFAULT_WEIGHTS: Readonly<Record<FaultKind, number>> = {
  gateway_sigkill: 3,
  gateway_sigterm_drain: 1,
  nats_node_kill: 1,
  upstream_restart: 1,
  connection_cut_all: 3,
  slow_client: 3,
  nats_power_loss: 0.5,
  gateway_nats_cut: 2,
  nats_node_stop: 1,
  task_replica_kill: 2,
  net_latency: 1,
  link_loss_dup: 1,
  nats_node_isolated: 1,
  gateway_nats_partition: 1,
  gateway_upstream_partition: 1,
  net_asymmetric: 1,
  partition_heal_resume: 1,
  link_stall: 1,
  route_reset: 0.5,
};

/** The kinds of a run, with their weights, in schedule order. */
export type FaultSelection = ReadonlyArray<{ readonly kind: FaultKind; readonly weight: number }>;

/**
 * Kinds that need a configuration few runs have, so `all` leaves them out
 * (it means what it did before they existed) and only naming one asks for
 * it: `task_replica_kill` needs `--task-upstream owned`.
 */
export const OPT_IN_KINDS: ReadonlySet<FaultKind> = new Set(['task_replica_kill']);

export const DEFAULT_SELECTION: FaultSelection = DEFAULT_KINDS.map((kind) => ({ kind, weight: DEFAULT_WEIGHTS[kind] }));

/**
 * `--faults`: comma-separated `kind[=weight]`; `default` stands for today's
 * six kinds with their weights, `all` for every kind. A kind named twice
 * keeps its last weight; weight 0 keeps it out of the random draws but in
 * the first pass. `unavailable` kinds (e.g. `upstream_restart` without
 * upstreams) are dropped from `default` and `all` and refused when named.
 * The network kinds (`NET_KINDS`) need `net` (`--net hosts`): without it
 * `all` leaves them out (it means what it did before they existed) and
 * naming one is refused.
 *
 * @throws Error naming the bad part
 */
export function parseFaultSelection(spec: string, unavailable: ReadonlySet<FaultKind> = new Set(), net = false): FaultSelection {
  const out = new Map<FaultKind, number>();
  const kinds = new Set<string>(Object.values(FaultKind));
  for (const part of spec.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const [name = '', weightText] = part.split('=');
    if (name === 'default' || name === 'all') {
      if (weightText !== undefined) throw new Error(`--faults: ${name} takes no weight`);
      for (const kind of name === 'default' ? DEFAULT_KINDS : (Object.values(FaultKind) as FaultKind[])) if (!unavailable.has(kind) && !OPT_IN_KINDS.has(kind) && (net || !isNetKind(kind))) out.set(kind, DEFAULT_WEIGHTS[kind]);
      continue;
    }
    if (!kinds.has(name)) throw new Error(`--faults: unknown fault kind ${JSON.stringify(name)}; kinds: ${[...kinds].join(', ')}, or default, all`);
    const kind = name as FaultKind;
    if (unavailable.has(kind)) throw new Error(`--faults: ${kind} is not available with this target`);
    if (!net && isNetKind(kind)) throw new Error(`--faults: ${kind} needs --net hosts (network faults between hosts; kinds: ${NET_KINDS.join(', ')})`);
    const weight = weightText === undefined ? DEFAULT_WEIGHTS[kind] : Number(weightText);
    if (!(Number.isFinite(weight) && weight >= 0 && weight <= 100)) throw new Error(`--faults: the weight of ${kind} must be a number from 0 to 100, got ${JSON.stringify(weightText)}`);
    out.set(kind, weight);
  }
  if (out.size === 0) throw new Error('--faults: no fault kind selected');
  return [...out].map(([kind, weight]) => ({ kind, weight }));
}

export interface PlannedFault {
  readonly atMs: number;
  readonly kind: FaultKind;
  /** Picks the gateway slot, NATS node, upstream or client (modulo their count). */
  readonly target: number;
  /** How long the component stays down before its restart. */
  readonly downMs: number;
  /** One of the first pass (every selected kind once): the run goes on until each of these has fired. */
  readonly firstPass?: true;
}

export interface FaultRecord {
  readonly kind: FaultKind;
  readonly plannedAtMs: number;
  startedAtMs: number;
  endedAtMs: number | undefined;
  readonly target: string;
  ok: boolean;
  detail: string;
}

/**
 * Plans faults over `[startMs, endMs]` of the run: every selected kind
 * once, about 8 s apart (closer in a short run: within the first 60% of the
 * window), then one every `meanGapMs` on average until the end, drawn by
 * weight. The default selection plans exactly what it did before `--faults`.
 */
export function planFaults(rng: Rng, startMs: number, endMs: number, meanGapMs: number, selection: FaultSelection = DEFAULT_SELECTION): PlannedFault[] {
  const plan: PlannedFault[] = [];
  const selected = selection.map((s) => s.kind);
  const weights = new Map(selection.map((s) => [s.kind, s.weight]));
  const firstPassEnd = startMs + Math.min((endMs - startMs) * 0.6, selected.length * FIRST_PASS_STEP_MS);
  const kinds = [...selected];
  for (let i = kinds.length - 1; i > 0; i -= 1) {
    const j = rng.int(0, i);
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  const step = (firstPassEnd - startMs) / kinds.length;
  for (const [i, kind] of kinds.entries()) {
    plan.push({ atMs: Math.round(startMs + step * i + rng.next() * step * 0.5), kind, target: rng.int(0, 1_000), downMs: downTime(rng, kind), firstPass: true });
  }
  let t = firstPassEnd;
  const total = selected.reduce((sum, k) => sum + (weights.get(k) ?? 0), 0);
  for (;;) {
    if (total <= 0) break;
    t += -Math.log(1 - rng.next()) * meanGapMs;
    if (t >= endMs) break;
    let draw = rng.next() * total;
    let kind: FaultKind = selected.find((k) => (weights.get(k) ?? 0) > 0)!;
    for (const k of selected) {
      draw -= weights.get(k) ?? 0;
      if (draw < 0) {
        kind = k;
        break;
      }
    }
    plan.push({ atMs: Math.round(t), kind, target: rng.int(0, 1_000), downMs: downTime(rng, kind) });
  }
  return plan;
}

function downTime(rng: Rng, kind: FaultKind): number {
  switch (kind) {
    case 'gateway_sigkill':
      return rng.int(300, 2_000);
    case 'nats_node_kill':
      return rng.int(1_000, 4_000);
    case 'upstream_restart':
      return rng.int(100, 1_000);
    case 'nats_power_loss':
      return rng.int(500, 3_000);
    case 'gateway_nats_cut':
      // Below and above --writer-silence (3 s): a short cut is waited out, a long one loses its streams.
      return rng.int(1_000, 8_000);
    case 'nats_node_stop':
      return rng.int(1_000, 6_000);
    case 'net_latency':
      return rng.int(5_000, 15_000);
    case 'nats_node_isolated':
      // Past NATS's lost-quorum step-down too: an isolated leader was seen still leading its streams after 8 s.
      return rng.int(2_000, 15_000);
    case 'link_loss_dup':
    case 'net_asymmetric':
      return rng.int(2_000, 8_000);
    case 'gateway_nats_partition':
      // Like gateway_nats_cut: below and above --writer-silence.
      return rng.int(1_000, 8_000);
    case 'gateway_upstream_partition':
    case 'partition_heal_resume':
      return rng.int(2_000, 6_000);
    case 'link_stall':
      return rng.int(1_000, 5_000);
    case 'task_replica_kill':
      // A task read while nothing listens is replica_gone, one first read after the restart replica_forgot:
      // one kill in three restarts at once (within a client's 100 ms poll), so both are met.
      return rng.int(0, 2) === 0 ? 0 : rng.int(300, 3_000);
    case 'route_reset':
      return rng.int(500, 3_000);
    default:
      return 0;
  }
}

export interface FaultTargets {
  readonly stack: ChaosStack;
  /** Client names, for `slow_client`. */
  readonly clients: readonly string[];
  /** Streams a client must read slowly. */
  readonly slowStreams: Map<string, number>;
  /** Progress lines (the CLI prints them). */
  readonly say: (line: string) => void;
  /** The checker's log tap: a power loss asks it what was acknowledged, and to re-check the log after the restart. */
  readonly tap?: LogTap;
  /**
   * With task clients (`task-run.ts`): a `gateway_sigkill` asks it first for
   * the slot of a gateway running a task (a victim it just created); when it
   * names one, that gateway is killed instead of the planned one.
   */
  readonly taskRunner?: () => Promise<{ slot: number; detail: string } | undefined>;
  /** With `--task-upstream owned`: `task_replica_kill` stops a replica and starts it again empty (`OwnedReplicas.kill`). */
  readonly replicaKill?: (target: number, downMs: number) => Promise<{ target: string; detail: string }>;
}

/** How far back a power loss's accounting re-checks the log: the default `sync_interval` (2 min), at most this many positions. */
const LOSS_WINDOW_MS = 120_000;
const LOSS_WINDOW_POSITIONS = 200_000;
const LOSS_RESYNC_TIMEOUT_MS = 30_000;

/** Runs the plan from `t0` until it is done or `signal` aborts; every restart is finished before it resolves. */
export async function runFaults(plan: readonly PlannedFault[], targets: FaultTargets, t0: number, signal: AbortSignal, records: FaultRecord[] = []): Promise<FaultRecord[]> {
  const locks = new Map<string, Promise<void>>();
  const running: Promise<void>[] = [];
  const exclusive = (lock: string, fn: () => Promise<void>): Promise<void> => {
    const before = locks.get(lock) ?? Promise.resolve();
    const next = before.then(fn, fn);
    locks.set(lock, next.catch(() => undefined));
    return next;
  };
  for (const fault of plan) {
    await sleep(t0 + fault.atMs - Date.now(), signal);
    if (signal.aborted) break;
    const record: FaultRecord = { kind: fault.kind, plannedAtMs: fault.atMs, startedAtMs: 0, endedAtMs: undefined, target: '', ok: false, detail: '' };
    records.push(record);
    const lock = lockOf(fault, records.length, targets.stack);
    running.push(
      exclusive(lock, async () => {
        record.startedAtMs = Date.now() - t0;
        try {
          await execute(fault, record, targets, signal);
          record.ok = true;
        } catch (err) {
          record.detail = `${record.detail} failed: ${(err as Error).message}`.trim();
        } finally {
          record.endedAtMs = Date.now() - t0;
          targets.say(`fault ${record.kind} ${record.target} at ${(record.startedAtMs / 1000).toFixed(1)}s: ${record.ok ? 'ok' : 'FAILED'} ${record.detail}`);
        }
      }),
    );
  }
  await Promise.all(running);
  return records;
}

/**
 * The first-pass faults of `plan` that have not yet ended, judged from the
 * live `records` of `runFaults` (in plan order, one per fault started). A
 * slow fault (a power loss, a stopped node) holds its component's lock, so
 * on a slow machine the ones queued behind it may not have fired when the
 * planned load ends: the run waits for them (bounded) rather than leave a
 * kind untested and its assertion to the machine's speed.
 */
export function firstPassPending(plan: readonly PlannedFault[], records: readonly FaultRecord[]): FaultKind[] {
  return plan.flatMap((fault, i) => (fault.firstPass === true && records[i]?.endedAtMs === undefined ? [fault.kind] : []));
}

/** The upstream an `upstream_restart` aims at: the stack's (`store`, `plain`, then any of `--upstreams`), by the fault's target. */
function upstreamOf(stack: ChaosStack, target: number): UpstreamName {
  return stack.upstreamNames[target % Math.max(1, stack.upstreamNames.length)] ?? 'store';
}

/** Faults on one component run one at a time: gateways (and their NATS cuts), NATS, each upstream. */
function lockOf(fault: PlannedFault, n: number, stack: ChaosStack): string {
  switch (fault.kind) {
    case 'gateway_sigkill':
    case 'gateway_sigterm_drain':
    case 'gateway_nats_cut':
    case 'gateway_nats_partition':
    case 'gateway_upstream_partition':
    case 'partition_heal_resume':
      return 'gateway';
    case 'nats_node_kill':
    case 'nats_power_loss':
    case 'nats_node_stop':
    case 'nats_node_isolated':
    case 'net_asymmetric':
    case 'link_stall':
    case 'route_reset':
      return 'nats';
    case 'net_latency':
    case 'link_loss_dup':
      return fault.kind;
    case 'upstream_restart':
      return `upstream-${upstreamOf(stack, fault.target)}`;
    case 'task_replica_kill':
      // One replica down at a time: the other keeps taking new tasks.
      return 'task-replica';
    default:
      return `free-${n}`;
  }
}

async function execute(fault: PlannedFault, record: FaultRecord, { stack, clients, slowStreams, tap, taskRunner, replicaKill }: FaultTargets, signal: AbortSignal): Promise<void> {
  if (isNetKind(fault.kind)) {
    const done = await executeNetFault(fault.kind, fault.target, fault.downMs, stack, signal);
    (record as { target: string }).target = done.target;
    record.detail = done.detail;
    return;
  }
  switch (fault.kind) {
    case 'gateway_sigkill': {
      const runner = await taskRunner?.().catch(() => undefined);
      const slot = runner?.slot ?? fault.target % stack.gateways.length;
      (record as { target: string }).target = stack.gateways[slot]!.name;
      await stack.killGateway(slot);
      await sleep(fault.downMs);
      const tries = await stack.startGateway(slot, signal);
      record.detail = `down ${fault.downMs}ms${tries > 1 ? ` (started on try ${tries})` : ''}${runner === undefined ? '' : `; ${runner.detail}`}`;
      return;
    }
    case 'task_replica_kill': {
      if (replicaKill === undefined) throw new Error('task_replica_kill needs --task-upstream owned');
      const done = await replicaKill(fault.target, fault.downMs);
      (record as { target: string }).target = done.target;
      record.detail = done.detail;
      return;
    }
    case 'gateway_sigterm_drain': {
      const slot = fault.target % stack.gateways.length;
      (record as { target: string }).target = stack.gateways[slot]!.name;
      const exit = await stack.drainGateway(slot);
      record.detail = `drained in ${exit.ms}ms (exit ${exit.code ?? exit.signal})`;
      const tries = await stack.startGateway(slot, signal);
      if (tries > 1) record.detail += ` (started on try ${tries})`;
      return;
    }
    case 'nats_node_kill': {
      // Two kills in three take a log stream's leader (an election stalls appends
      // and resumes for seconds); the third a node at random.
      const leader = fault.target % 3 === 0 ? undefined : await logLeader(stack, fault.target);
      const index = leader?.index ?? fault.target % stack.cluster.servers.length;
      const node = stack.cluster.servers[index]!;
      const role = await roleOf(stack.cluster, index, stack.streamNames);
      (record as { target: string }).target = `nats${index + 1}`;
      await node.kill();
      await sleep(fault.downMs);
      const began = Date.now();
      await node.restart();
      record.detail = `${role}${leader?.aim ?? ''}, down ${fault.downMs}ms, caught up in ${Date.now() - began}ms`;
      return;
    }
    case 'upstream_restart': {
      const name = upstreamOf(stack, fault.target);
      (record as { target: string }).target = `upstream-${name}`;
      const began = Date.now();
      await stack.restartUpstream(name, fault.downMs);
      record.detail = `down ${fault.downMs}ms, serving again after ${Date.now() - began}ms`;
      return;
    }
    case 'connection_cut_all': {
      (record as { target: string }).target = 'balancer';
      record.detail = `${stack.proxy.cutAll()} requests cut`;
      return;
    }
    case 'slow_client': {
      const client = clients[fault.target % clients.length]!;
      (record as { target: string }).target = client;
      slowStreams.set(client, (slowStreams.get(client) ?? 0) + 2);
      record.detail = 'next 2 calls at 1/20 of the producer rate';
      return;
    }
    case 'nats_node_stop': {
      // Like the kills: two in three stop a log stream's leader.
      const leader = fault.target % 3 === 0 ? undefined : await logLeader(stack, fault.target);
      const index = leader?.index ?? fault.target % stack.cluster.servers.length;
      const node = stack.cluster.servers[index]!;
      const role = await roleOf(stack.cluster, index, stack.streamNames);
      (record as { target: string }).target = `nats${index + 1}`;
      const began = Date.now();
      try {
        await node.freeze();
        await sleep(fault.downMs, signal);
      } finally {
        // Always continued: on an abort, an error, or a stop that half happened.
        await node.thaw();
      }
      record.detail = `${role}${leader?.aim ?? ''}, SIGSTOP for ${Date.now() - began}ms (planned ${fault.downMs}ms), then SIGCONT`;
      return;
    }
    case 'nats_power_loss': {
      (record as { target: string }).target = 'all nats nodes';
      const marks = tap?.markBeforeLoss(LOSS_WINDOW_MS, LOSS_WINDOW_POSITIONS);
      await Promise.all(stack.cluster.servers.map((node) => node.kill()));
      await sleep(fault.downMs);
      const began = Date.now();
      await Promise.all(stack.cluster.servers.map((node) => node.restart()));
      const back = Date.now() - began;
      let accounts: PowerLossAccount[] | undefined;
      if (marks !== undefined && tap !== undefined) accounts = await tap.resyncAfterLoss(marks, LOSS_RESYNC_TIMEOUT_MS);
      record.detail = `${stack.cluster.servers.length} nodes SIGKILLed at once, down ${fault.downMs}ms, all back in ${back}ms${accounts === undefined ? '' : `; ${describeAccounts(accounts)}`}`;
      return;
    }
    case 'gateway_nats_cut': {
      const slots = stack.natsClients;
      if (slots.length === 0) throw new Error('no NATS proxies in this stack (the harness starts them when gateway_nats_cut is selected)');
      const slot = slots[fault.target % slots.length]!;
      (record as { target: string }).target = slot.name;
      // One in four resets the connections (the client sees them die and reconnects), the others freeze them.
      if (Math.floor(fault.target / slots.length) % 4 === 3) {
        const n = slot.proxy.reset(fault.downMs);
        await sleep(fault.downMs, signal);
        record.detail = `reset ${n} connections, refused new ones for ${fault.downMs}ms`;
        return;
      }
      const began = Date.now();
      const open = slot.proxy.open;
      try {
        slot.proxy.freeze();
        await sleep(fault.downMs, signal);
      } finally {
        slot.proxy.thaw();
      }
      record.detail = `froze ${open} connections for ${Date.now() - began}ms (planned ${fault.downMs}ms), then forwarded again`;
      return;
    }
  }
}

function describeAccount(a: PowerLossAccount): string {
  const overwritten = a.lost.filter((l) => l.how === 'overwritten').length;
  return `log: ${a.acked} acknowledged events in positions ${a.mark.fromPos}-${a.mark.lastPos}, ${a.survived} found again, ${a.lost.length} not (${overwritten} overwritten; ${a.lost.length - overwritten} absent, each lost or purged with its session: the report tells which), ${a.unchecked} unchecked; last position after the restart ${a.lastPosAfterRestart ?? '?'}`;
}

/** One power loss's accounts, one per partition: the unpartitioned log's as before, a partitioned log's summed, with each partition's window. */
function describeAccounts(accounts: readonly PowerLossAccount[]): string {
  if (accounts.length === 1) return describeAccount(accounts[0]!);
  const sum = (f: (a: PowerLossAccount) => number): number => accounts.reduce((n, a) => n + f(a), 0);
  const lost = sum((a) => a.lost.length);
  const overwritten = sum((a) => a.lost.filter((l) => l.how === 'overwritten').length);
  // A partition with nothing acknowledged yet has an empty window, and is not re-read.
  const empty = accounts.filter((a) => a.mark.lastPos < a.mark.fromPos).map((a) => a.partition);
  const windows = accounts.filter((a) => a.mark.lastPos >= a.mark.fromPos).map((a) => `${a.partition}: ${a.mark.fromPos}-${a.mark.lastPos} -> ${a.lastPosAfterRestart ?? '?'}`);
  if (empty.length > 0) windows.push(`${empty.join(', ')}: nothing acknowledged`);
  return `log on ${accounts.length} partitions: ${sum((a) => a.acked)} acknowledged events, ${sum((a) => a.survived)} found again, ${lost} not (${overwritten} overwritten; ${lost - overwritten} absent, each lost or purged with its session: the report tells which), ${sum((a) => a.unchecked)} unchecked; per partition, positions re-checked -> last position after the restart: ${windows.join(', ')}`;
}

/**
 * The node a NATS fault aims at: the leader of one log stream, partition
 * `floor(target / 3) mod N` (seeded by the plan; the only one when the log
 * is unpartitioned). `aim` names that partition on a partitioned log.
 * Undefined while that stream has no leader.
 */
async function logLeader(stack: ChaosStack, target: number): Promise<{ index: number; aim: string } | undefined> {
  const partition = Math.floor(target / 3) % stack.streamNames.length;
  const streamName = stack.streamNames[partition]!;
  const index = await streamLeaderIndex(stack.cluster, streamName);
  if (index === undefined) return undefined;
  return { index, aim: stack.streamNames.length === 1 ? '' : ` (aimed at the leader of partition ${partition}, ${streamName})` };
}

/**
 * Which JetStream roles a node holds right now (meta leader, leader of a log
 * stream or a bucket), from its monitor port. On a partitioned log, the log
 * streams it leads are named with their partitions, and other streams that
 * come one per partition (the buckets' `…-<k>_<namespace>`) are grouped.
 */
export async function roleOf(cluster: NatsNodes, index: number, streamNames: readonly string[]): Promise<string> {
  const node = cluster.servers[index]!;
  try {
    const varz = (await (await fetch(`${monitorBase(node)}/varz`, { signal: AbortSignal.timeout(2_000) })).json()) as { server_name?: string };
    const res = await fetch(`${monitorBase(node)}/jsz?streams=true`, { signal: AbortSignal.timeout(2_000) });
    const jsz = (await res.json()) as {
      meta_cluster?: { leader?: string };
      account_details?: Array<{ stream_detail?: Array<{ name?: string; cluster?: { leader?: string } }> }>;
    };
    const me = varz.server_name;
    const roles: string[] = [];
    if (me !== undefined && jsz.meta_cluster?.leader === me) roles.push('meta leader');
    const led: string[] = [];
    for (const account of jsz.account_details ?? []) {
      for (const s of account.stream_detail ?? []) {
        if (me !== undefined && s.cluster?.leader === me) led.push(s.name ?? '?');
      }
    }
    if (streamNames.length === 1) {
      for (const name of led) roles.push(name === streamNames[0] ? 'log stream leader' : `${name} leader`);
    } else {
      roles.push(...partitionedRoles(led, streamNames));
    }
    return roles.length === 0 ? 'follower' : roles.join(' + ');
  } catch {
    return 'role unknown';
  }
}

/**
 * The streams a node leads, on a log of `streamNames.length` partitions:
 * `log stream leader of partitions 0, 3 of 8 (TETHER_LOG-0_ns, TETHER_LOG-3_ns)`,
 * then streams named `<base>-<k>[_<namespace>]` grouped as
 * `<base>-*[_<namespace>] leader (partitions 1, 5)`, then the others.
 * Exported for its test.
 */
export function partitionedRoles(led: readonly string[], streamNames: readonly string[]): string[] {
  const roles: string[] = [];
  const partitionOfStream = new Map(streamNames.map((name, k) => [name, k]));
  const logLed = led.filter((name) => partitionOfStream.has(name)).sort((a, b) => partitionOfStream.get(a)! - partitionOfStream.get(b)!);
  if (logLed.length > 0) roles.push(`log stream leader of partitions ${logLed.map((name) => partitionOfStream.get(name)).join(', ')} of ${streamNames.length} (${logLed.join(', ')})`);
  const groups = new Map<string, number[]>();
  const others: string[] = [];
  for (const name of led) {
    if (partitionOfStream.has(name)) continue;
    const m = /^(.+?)-(\d+)(_[A-Za-z0-9_-]*)?$/.exec(name);
    if (m === null || Number(m[2]) >= streamNames.length) {
      others.push(`${name} leader`);
      continue;
    }
    const template = `${m[1]!}-*${m[3] ?? ''}`;
    const list = groups.get(template) ?? [];
    if (list.length === 0) groups.set(template, list);
    list.push(Number(m[2]));
  }
  for (const [template, ks] of groups) roles.push(`${template} leader (partitions ${ks.sort((a, b) => a - b).join(', ')})`);
  return [...roles, ...others];
}

/** A node's monitor, on its client URL's host: `http://127.0.0.1:<port>` on loopback, its host's address with `--net hosts`. */
export function monitorBase(node: { readonly url: string; readonly monitorPort: number }): string {
  return `http://${new URL(node.url).hostname}:${node.monitorPort}`;
}

/** Index of the node leading the log stream, from any node's monitor port. */
export async function streamLeaderIndex(cluster: NatsNodes, streamName: string): Promise<number | undefined> {
  for (const node of cluster.servers) {
    try {
      const res = await fetch(`${monitorBase(node)}/jsz?streams=true`, { signal: AbortSignal.timeout(2_000) });
      const jsz = (await res.json()) as { account_details?: Array<{ stream_detail?: Array<{ name?: string; cluster?: { leader?: string } }> }> };
      for (const account of jsz.account_details ?? []) {
        for (const s of account.stream_detail ?? []) {
          if (s.name !== streamName || s.cluster?.leader === undefined) continue;
          const index = await indexOfServer(cluster, s.cluster.leader);
          if (index !== undefined) return index;
        }
      }
    } catch {
      // Try the next node.
    }
  }
  return undefined;
}

async function indexOfServer(cluster: NatsNodes, serverName: string): Promise<number | undefined> {
  for (const [i, node] of cluster.servers.entries()) {
    try {
      const res = await fetch(`${monitorBase(node)}/varz`, { signal: AbortSignal.timeout(2_000) });
      if (((await res.json()) as { server_name?: string }).server_name === serverName) return i;
    } catch {
      // A node that does not answer is not the leader we are looking for.
    }
  }
  return undefined;
}
