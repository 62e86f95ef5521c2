/**
 * `npm run bench:cluster`: append throughput of the session log at 64
 * concurrent streams on a 3-node R3 cluster (`startNatsCluster`, the
 * current nats-server), with the log on N = 1, 3 and 9 partitions (DESIGN
 * §12: "on a cluster, write throughput grows with the number of partition
 * leaders").
 *
 * Every layout is set up first, side by side on the one cluster: its own
 * names (log-layouts.ts), every group of partition k (its stream and both
 * its buckets) led by node k mod 3 (a step-down naming that node as the
 * preferred successor, cluster-leaders.ts). Then rounds: in each, every
 * layout appends once (the order rotating from round to round), each of
 * the 64 streams in a session of its own, each stream's appends one after
 * another, every append awaited and timed. Lane i's session is in
 * partition i mod N, so each partition gets the same share of the streams,
 * and its appends go through the connection to node ⌊i / N⌋ mod 3, so
 * each partition's streams come in through every node alike (the log's
 * clients are spread over the nodes, as gateways behind a balancer would
 * be). Each run reads every node's CPU time (/proc/<pid>/stat, utime +
 * stime) before and after, and counts the partition stream leaders and the
 * Raft groups each node holds, so the CPU per partition leader can be
 * derived. The leaders are checked (and moved back) before every run.
 *
 * Prints the figures (progress on stderr, results on stdout) and writes
 * bench-results/cluster-throughput.json. Never asserts.
 *
 * Knobs (environment):
 * - BENCH_CLUSTER_PARTITIONS (default `1,3,9`);
 * - BENCH_CLUSTER_ROUNDS (default 3);
 * - BENCH_CLUSTER_EVENTS (events per run, default 20,000);
 * - BENCH_CLUSTER_STREAMS (concurrent streams, default 64);
 * - BENCH_CLUSTER_OUT: a directory for the JSON instead of bench-results/.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, type } from 'node:os';
import { dirname, join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { EventKind } from '@tether/protocol';
import { principalDigest, SessionLog } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { lead, leaderOf, metaLeader, serverName } from './cluster-leaders.js';
import { layoutLabel, layoutNames, parsePartitions } from './log-layouts.js';
import { progressPayload } from './payload.js';
import { int, median, ms, progress, summarize, table } from './stats.js';
import type { Summary } from './stats.js';

const env = (name: string, fallback: string): string => process.env[name] ?? fallback;
const positive = (name: string, fallback: string): number => {
  const value = Number(env(name, fallback));
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, not ${JSON.stringify(process.env[name])}`);
  return value;
};
const knobs = {
  partitions: parsePartitions('BENCH_CLUSTER_PARTITIONS', env('BENCH_CLUSTER_PARTITIONS', '1,3,9')),
  rounds: positive('BENCH_CLUSTER_ROUNDS', '3'),
  events: positive('BENCH_CLUSTER_EVENTS', '20000'),
  streams: positive('BENCH_CLUSTER_STREAMS', '64'),
};
const outDir = process.env['BENCH_CLUSTER_OUT'];
const NODES = 3;
const WARMUP_EVENTS = 2_000;
const principal = principalDigest('bench');

/** One layout on the cluster: a log per node's connection (the same log), its partitions' groups and where they should lead, one session per lane. */
interface ClusterLayout {
  readonly partitions: number;
  readonly logs: readonly SessionLog[];
  readonly groups: readonly { readonly partition: number; readonly stream: string; readonly names: readonly string[]; readonly leader: string }[];
  readonly sessions: readonly SessionRecord[];
}

interface NodeFigures {
  readonly name: string;
  readonly pid: number;
  /** CPU seconds (user + system) during the timed appends. */
  readonly cpuS: number;
  /** cpuS over the run's wall time: 100 = one core. */
  readonly cpuPctOfCore: number;
  /** Partition streams this node leads. */
  readonly streamLeaders: number;
  /** Raft groups of the layout it leads (streams and buckets). */
  readonly groupsLed: number;
  readonly metaLeader: boolean;
}

interface ClusterRun {
  readonly partitions: number;
  readonly round: number;
  readonly events: number;
  readonly seconds: number;
  readonly perSec: number;
  readonly append: Summary;
  readonly nodes: readonly NodeFigures[];
  /** This process (the log's client side, all lanes), CPU seconds during the run. */
  readonly clientCpuS: number;
  /** Groups whose leader had moved from its node since the last run and was moved back first. */
  readonly leadersMovedBack: number;
}

/** Clock ticks per second of /proc/<pid>/stat's times. */
function clockTicks(): number {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isFinite(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
}
const CLK_TCK = clockTicks();

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // After the command name (which may hold spaces) come field 3 (state) onwards: utime is field 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
}

function pidOf(cluster: NatsCluster, node: number): number {
  const pid = cluster.servers[node]?.pid;
  if (pid === undefined) throw new Error(`node ${node} has no process`);
  return pid;
}

async function setUpLayout(partitions: number, ncs: readonly NatsConnection[], jsm: JetStreamManager, names: readonly string[]): Promise<ClusterLayout> {
  const logNames = layoutNames('cluster', partitions);
  const logs: SessionLog[] = [];
  // One after another: the first creates the streams and buckets, the others find them.
  for (const nc of ncs) logs.push(await SessionLog.create({ nc, ...logNames, partitions, replicas: 3, maxMsgsPerStream: -1 }));
  const first = logs[0] as SessionLog;
  const groups = first.layout.partitions.map((p) => ({
    partition: p.index,
    stream: p.streamName,
    names: [p.streamName, `KV_${p.sessionsBucket}`, `KV_${p.leasesBucket}`],
    leader: names[p.index % NODES] as string,
  }));
  await spreadLeaders(ncs[0] as NatsConnection, jsm, groups);
  // One session per lane, lane i's in partition i mod N: sessions are made until each partition has its share (a session's partition is a hash of its random id).
  const perPartition = Math.ceil(knobs.streams / partitions);
  const pools: SessionRecord[][] = Array.from({ length: partitions }, () => []);
  for (let made = 0; pools.some((pool) => pool.length < perPartition); made += 1) {
    if (made > knobs.streams * partitions * 20) throw new Error(`N=${partitions}: no even spread of sessions after ${made} sessions`);
    const session = await first.createSession(principal);
    const pool = pools[first.partitionOf(session.sessionId).index] as SessionRecord[];
    if (pool.length < perPartition) pool.push(session);
  }
  const sessions = Array.from({ length: knobs.streams }, (_, i) => pools[i % partitions]?.[Math.floor(i / partitions)] as SessionRecord);
  progress(`${layoutLabel(partitions)}: ${groups.length} partition(s) (${groups.map((g) => g.stream).join(', ')}), each partition's stream and buckets led by node k mod ${NODES}; ${knobs.streams} sessions, ${perPartition} per partition`);
  return { partitions, logs, groups, sessions };
}

/** Every group of partition k to node k mod 3; returns how many had to move. */
async function spreadLeaders(nc: NatsConnection, jsm: JetStreamManager, groups: ClusterLayout['groups']): Promise<number> {
  let moved = 0;
  for (const g of groups) {
    for (const group of g.names) {
      if ((await leaderOf(jsm, group)) === g.leader) continue;
      moved += 1;
      await lead(nc, jsm, group, g.leader);
    }
  }
  return moved;
}

/** Stream leaders and groups led by each node, and the meta leader. */
async function leaderCounts(jsm: JetStreamManager, layout: ClusterLayout, names: readonly string[], meta: string | undefined): Promise<{ streamLeaders: number[]; groupsLed: number[]; meta: string | undefined }> {
  const streamLeaders = names.map(() => 0);
  const groupsLed = names.map(() => 0);
  for (const g of layout.groups) {
    for (const group of g.names) {
      const at = names.indexOf((await leaderOf(jsm, group)) ?? '');
      if (at < 0) continue;
      groupsLed[at] = (groupsLed[at] ?? 0) + 1;
      if (group === g.stream) streamLeaders[at] = (streamLeaders[at] ?? 0) + 1;
    }
  }
  return { streamLeaders, groupsLed, meta };
}

/** Fresh streams in the layout's sessions; one untimed append each (it opens the writer); then `count` appends spread over the lanes, timed. */
async function appendRun(layout: ClusterLayout, count: number, onTimed: () => void): Promise<{ seconds: number; latencies: number[] }> {
  const n = layout.partitions;
  const lanes = layout.sessions.map((session, i) => {
    const log = layout.logs[Math.floor(i / n) % layout.logs.length] as SessionLog;
    return { log, session, stream: log.newStreamId(), token: `lane-${i}`, next: 0 };
  });
  const append = (lane: (typeof lanes)[number]): Promise<unknown> => lane.log.append(lane.session.sessionId, lane.stream, EventKind.event, progressPayload(lane.token, lane.next++));
  await Promise.all(lanes.map(append));
  const latencies: number[] = [];
  onTimed();
  const start = performance.now();
  await Promise.all(
    lanes.map(async (lane, i) => {
      const k = Math.floor(count / lanes.length) + (i < count % lanes.length ? 1 : 0);
      for (let j = 0; j < k; j += 1) {
        const t0 = performance.now();
        await append(lane);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  return { seconds: (performance.now() - start) / 1000, latencies };
}

async function measureRun(cluster: NatsCluster, jsm: JetStreamManager, layout: ClusterLayout, names: readonly string[], round: number): Promise<ClusterRun> {
  const leadersMovedBack = await spreadLeaders(layout.logs[0]?.connection as NatsConnection, jsm, layout.groups);
  const meta = await metaLeader(cluster.servers[0]?.monitorPort ?? 0);
  const pids = names.map((_, i) => pidOf(cluster, i));
  let cpuBefore: number[] = [];
  let clientBefore = process.cpuUsage();
  const { seconds, latencies } = await appendRun(layout, knobs.events, () => {
    cpuBefore = pids.map(cpuSeconds);
    clientBefore = process.cpuUsage();
  });
  const cpuAfter = pids.map(cpuSeconds);
  const client = process.cpuUsage(clientBefore);
  const leaders = await leaderCounts(jsm, layout, names, meta);
  const nodes = names.map((name, i) => {
    const cpuS = (cpuAfter[i] ?? 0) - (cpuBefore[i] ?? 0);
    return {
      name,
      pid: pids[i] ?? 0,
      cpuS,
      cpuPctOfCore: (cpuS / seconds) * 100,
      streamLeaders: leaders.streamLeaders[i] ?? 0,
      groupsLed: leaders.groupsLed[i] ?? 0,
      metaLeader: leaders.meta === name,
    };
  });
  const append = summarize(latencies);
  const run = {
    partitions: layout.partitions,
    round,
    events: latencies.length,
    seconds,
    perSec: latencies.length / seconds,
    append,
    nodes,
    clientCpuS: (client.user + client.system) / 1e6,
    leadersMovedBack,
  };
  progress(
    `round ${round}/${knobs.rounds} ${layoutLabel(layout.partitions)}: ${int(run.perSec)} events/s, append p50 ${ms(append.p50)} ms, p99 ${ms(append.p99)} ms; ` +
      `CPU ${nodes.map((n) => `${shortName(n.name)} ${n.cpuPctOfCore.toFixed(0)}% (${n.streamLeaders} led)`).join(', ')}, client ${((run.clientCpuS / seconds) * 100).toFixed(0)}%` +
      (leadersMovedBack > 0 ? `; ${leadersMovedBack} group leader(s) had moved and were moved back first` : ''),
  );
  return run;
}

/** `tether-test-1a2b3c4d-n2` → `n2`. */
function shortName(name: string): string {
  return /-(n\d+)$/.exec(name)?.[1] ?? name;
}

function render(header: string, runs: readonly ClusterRun[], names: readonly string[], runtimeS: number): string {
  const nodeCell = (n: NodeFigures | undefined): string => (n === undefined ? 'n/a' : `${n.cpuPctOfCore.toFixed(0)}% (${n.streamLeaders}; ${n.groupsLed})${n.metaLeader ? ' meta' : ''}`);
  const out = [header, ''];
  out.push('## Each run', '');
  out.push(
    table(
      ['log', 'round', 'events/s', 'append p50 / p99 ms', ...names.map((n) => `${shortName(n)} CPU % of a core (stream leaders; groups led)`), 'client CPU %', 'leaders moved back'],
      runs.map((r) => [
        layoutLabel(r.partitions),
        String(r.round),
        int(r.perSec),
        `${ms(r.append.p50)} / ${ms(r.append.p99)}`,
        ...names.map((_, i) => nodeCell(r.nodes[i])),
        ((r.clientCpuS / r.seconds) * 100).toFixed(0),
        String(r.leadersMovedBack),
      ]),
    ),
    '',
  );
  out.push('## Median of the rounds, per layout', '');
  const layouts = [...new Set(runs.map((r) => r.partitions))];
  const rows = layouts.map((n) => {
    const mine = runs.filter((r) => r.partitions === n);
    const med = (pick: (r: ClusterRun) => number): number => median(mine.map(pick));
    const serverCpu = (r: ClusterRun): number => r.nodes.reduce((s, x) => s + x.cpuS, 0);
    const last = mine[mine.length - 1];
    return [
      layoutLabel(n),
      int(med((r) => r.perSec)),
      `${ms(med((r) => r.append.p50))} / ${ms(med((r) => r.append.p99))}`,
      ...names.map((_, i) => `${med((r) => r.nodes[i]?.cpuPctOfCore ?? Number.NaN).toFixed(0)}% (${last?.nodes[i]?.streamLeaders ?? 0})`),
      `${med((r) => (serverCpu(r) / r.seconds) * 100).toFixed(0)}%`,
      med((r) => (serverCpu(r) / r.events) * 1e6).toFixed(0),
      ((med((r) => r.perSec) / median(runs.filter((r) => r.partitions === layouts[0]).map((r) => r.perSec))) * 100).toFixed(0) + '%',
    ];
  });
  out.push(
    table(
      ['log', 'events/s', 'append p50 / p99 ms', ...names.map((n) => `${shortName(n)} CPU % (stream leaders)`), 'all nodes CPU %', 'server CPU µs per event', `events/s vs ${layoutLabel(layouts[0] ?? 1)}`],
      rows,
    ),
    '',
  );
  out.push(
    `CPU % is of one core over the timed appends (utime + stime from /proc/<pid>/stat at ${CLK_TCK} ticks/s); 'stream leaders' counts the partition streams a node leads, 'groups led' those and their two buckets each; 'meta' marks the JetStream meta leader.`,
    'CPU per partition leader: compare a node\'s CPU % with the partition streams it leads; with N=1 the two nodes that lead none show what following alone costs.',
    `NOTE: all ${NODES} nats-server nodes and this client (the log's ${knobs.streams} streams, one connection per node) share this machine's ${cpus().length} cores. Throughput here is bounded by those cores, not by any one leader: the figures show how the work spreads over the nodes as leaders are added, not how a cluster of ${NODES} hosts scales.`,
    '',
    `total bench runtime: ${runtimeS.toFixed(0)} s`,
  );
  return out.join('\n');
}

async function main(): Promise<void> {
  const started = performance.now();
  const loadAvgAtStart = loadavg().map((x) => Number(x.toFixed(2)));
  const cluster = await startNatsCluster({ size: NODES });
  const ncs: NatsConnection[] = [];
  const layouts: ClusterLayout[] = [];
  try {
    const first = cluster.servers[0];
    if (first === undefined) throw new Error('the cluster has no node');
    const names = await Promise.all(cluster.servers.map((s) => serverName(s.monitorPort)));
    progress(`nats-server ${first.version} (${first.bin}), ${NODES} nodes: ${names.map((n, i) => `${n} pid ${cluster.servers[i]?.pid ?? '?'}`).join(', ')}`);
    for (const url of cluster.urls) ncs.push(await connect({ servers: url, ignoreClusterUpdates: true, maxReconnectAttempts: -1, noAsyncTraces: true }));
    const jsm = await jetstreamManager(ncs[0] as NatsConnection);
    for (const n of knobs.partitions) layouts.push(await setUpLayout(n, ncs, jsm, names));

    progress(`warm-up: ${int(WARMUP_EVENTS)} events per layout`);
    for (const layout of layouts) await appendRun(layout, WARMUP_EVENTS, () => undefined);
    const runs: ClusterRun[] = [];
    for (let round = 1; round <= knobs.rounds; round += 1) {
      // The order rotates, so no layout always runs first (or right after another's).
      for (let k = 0; k < layouts.length; k += 1) runs.push(await measureRun(cluster, jsm, layouts[(round - 1 + k) % layouts.length] as ClusterLayout, names, round));
    }
    runs.sort((a, b) => a.partitions - b.partitions || a.round - b.round);

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
      '# Tether session log on a 3-node R3 cluster (`npm run bench:cluster`)',
      '',
      `machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB RAM, ${machine.os}; node ${machine.node}`,
      `cluster: ${NODES} private nats-server ${first.version} nodes on loopback (${first.bin}), file storage, every stream and bucket R3`,
      `appends: ${knobs.streams} streams at once, each in a session of its own, ${int(knobs.events)} events per run (200-byte payloads), every append awaited; ${knobs.rounds} round(s), each layout once per round; partitions ${knobs.partitions.join(', ')}`,
      `load average (1/5/15 min) at start ${machine.loadAvgAtStart.join(' / ')}, at end ${machine.loadAvgAtEnd.join(' / ')}, on ${machine.cpus} cores`,
    ].join('\n');
    process.stdout.write(`${render(header, runs, names, runtimeS)}\n`);
    const file = join(outDir ?? 'bench-results', 'cluster-throughput.json');
    mkdirSync(dirname(file), { recursive: true });
    const results = {
      at: new Date().toISOString(),
      machine,
      server: { version: first.version, bin: first.bin, nodes: names },
      knobs,
      clockTicksPerSec: CLK_TCK,
      note: `all ${NODES} nodes and the client share ${machine.cpus} cores`,
      layouts: layouts.map((l) => ({ partitions: l.partitions, groups: l.groups })),
      runs,
      runtimeS,
    };
    writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
    progress(`done in ${runtimeS.toFixed(0)} s; JSON in ${file}`);
  } finally {
    for (const layout of layouts) for (const log of layout.logs) await log.close();
    for (const nc of ncs) await nc.close().catch(() => undefined);
    await cluster.cleanup();
  }
}

await main();
