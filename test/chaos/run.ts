/**
 * `npm run chaos -- --duration 60s --clients 6 --seed 1 --json chaos.json`
 *
 * Runs the chaos harness (3-node NATS R3, three gateways behind a round-robin
 * balancer, two upstreams, raw SSE and SDK clients, 2026-07-28 task clients
 * on a task upstream, a seeded fault schedule), prints the summary, writes
 * the report as JSON, and exits 1 if any silent violation or task violation
 * was found (2 on bad arguments or a harness failure). `--log`,
 * `--target`, `--sync` and `--faults` pick other configurations and fault
 * kinds (docs/reliability.md, "Configurations and the faults of issue 15"),
 * `--log-partitions` spreads the log over that many streams (issue 24),
 * `--net hosts` puts every process in a network namespace of its own
 * (issue 25: this process builds the network, runs the harness again
 * inside its `clients` host, and removes the network when that ends or on
 * a signal), `--task-upstream owned` puts two replicas that run their own
 * tasks on the task route (issue 33, with the `task_replica_kill` fault);
 * without them a run is what it was before they existed. The nats-server is
 * the test kit's: NATS_SERVER_BIN, else `scripts/nats-server.sh current`,
 * never one older than 2.11.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { MAX_PARTITIONS } from '@tether/session-log';
import { runChaos } from './chaos.js';
import { DEFAULT_SELECTION, parseFaultSelection } from './faults.js';
import { attachHostNetwork, cleanupLeftovers, createHostNetwork, missingPrerequisites } from './net/hosts.js';
import type { HostNetwork, HostNetworkSpec } from './net/hosts.js';
import { CLIENTS_HOST, hostsFor } from './net/placement.js';
import type { FaultKind, FaultSelection } from './faults.js';
import type { LogMode, SyncMode, TargetName } from './stack.js';
import type { TaskUpstreamKind } from './task-client.js';
import { formatSummary } from './summary.js';
import { parseUpstreamSets } from './upstreams.js';
import type { UpstreamSet } from './upstreams.js';
import { parseDuration } from './util.js';

const USAGE = `Usage: npm run chaos -- [--duration 60s] [--clients 6] [--seed 1] [--json out.json] [--settle 20s] [--fault-gap 4s] [--gateway-logs dir]
                        [--log nats|grpc] [--target gateway|sdk-example] [--sync always] [--faults default,KIND[=W],…]
                        [--task-clients 2] [--task-upstream kit|owned] [--log-partitions 1] [--net hosts|cleanup] [--upstreams kit,everything,v2]

  --duration     how long clients start new calls (then in-flight calls settle)
  --clients      clients in all; every third is an official SDK client behind the resume guard, the rest raw SSE clients
  --seed         seeds the fault schedule and every client's choices
  --json         where to write the full report
  --settle       how long in-flight calls may take after the duration (default 20s)
  --fault-gap    mean time between faults after every kind fired once (default 4s)
  --gateway-logs write each gateway's log to <dir>/<instance>.log (for investigations)
  --dump         write every recorded exchange and the checker's copy of the log to a JSON file
  --events       events per stream_progress call, MIN-MAX (default 10-80)
  --cut-chance   chance that a client cuts a response at a random point (default 0.7)
  --log          nats: gateways hold the log in-process (default); grpc: through two tether-session-log
                 services (--log grpc://), gateway i on service i mod 2
  --target       gateway: three gateways in front of two test upstreams (default); sdk-example: three
                 tether-sdk-example processes (examples/sdk-server) behind the balancer instead
  --sync         always: every node runs with jetstream { sync_interval: always } (default: the server's)
  --upstreams    the upstreams behind the gateways, each on its route, comma separated (default kit: the test kit's
                 two, /mcp with an event store and /plain/mcp without); everything: the reference server
                 @modelcontextprotocol/server-everything on /everything/mcp (its trigger-long-running-operation);
                 v2: an SDK v2 createMcpHandler server, stateless, on /v2/mcp (its stream tool); all: every one.
                 Clients are dealt to the routes in turn; upstream_restart picks any of them
  --task-clients 2026-07-28 clients of the gateways' durable tasks (default 2; 0 for none), on their own route
                 (/tasks/mcp, the test kit's task upstream); each gateway_sigkill then aims at a task's runner.
                 Gateways only, on either log (--log grpc: the task records go through the session-log services)
  --task-upstream
                 kit: the test kit's task upstream, whose tasks the gateways own and run (default); owned: two
                 replicas of the kit's upstream that runs the Tasks extension itself, each task in one replica's
                 memory (the gateways route it there; gateway_sigkill then takes its planned gateway). Adds the
                 fault kind task_replica_kill (name it in --faults): a replica stopped, then restarted empty; its
                 tasks must end failed with a named reason (replica_gone, replica_forgot). Not with --net hosts
  --log-partitions
                 streams the log is spread over, 1 to ${MAX_PARTITIONS} (default 1: one stream); every process that opens
                 the log gets --log-partitions N (gateways with the log in-process, session-log services, SDK
                 instances), the checker reads every partition stream, NATS faults aim at partition streams' leaders
  --net          hosts: every NATS node, gateway, session-log service and the upstreams in a Linux network namespace
                 of its own (the clients, balancer and checker in one more), wired to a bridge in the run's own
                 switch namespace (10.77.0.x); routes and links to NATS and the upstreams go through a TCP fault
                 proxy in the dialing host; removed at the end and on SIGINT/SIGTERM. Needs root, ip (iproute2) and
                 nft (apt-get install -y nftables). With --target sdk-example the instances are the hosts sdk1-3;
                 with --log grpc the network faults that name a gateway's NATS links hit the session-log services.
                 Adds the network fault kinds below to 'all'.
                 cleanup: remove what runs killed with SIGKILL left (namespaces tchaos-<run>-<host> whose run is
                 gone, the processes inside them, their scratch dirs), then exit
  --faults       fault kinds and weights, comma separated KIND[=WEIGHT]; 'default' is today's six, 'all' every kind.
                 Every kind fires once early (the first pass), then they are drawn by weight. Kinds:
                 gateway_sigkill gateway_sigterm_drain nats_node_kill upstream_restart connection_cut_all slow_client
                 nats_power_loss (every NATS node SIGKILLed at once, then restarted; lost acknowledged events counted)
                 gateway_nats_cut (one NATS client process cut off by its TCP proxy: frozen, or reset)
                 nats_node_stop (SIGSTOP of one NATS node, then SIGCONT)
                 task_replica_kill (with --task-upstream owned only, never in 'all': a task replica stopped, restarted empty)
                 with --net hosts only (seeded, bounded, healed at the end; test/chaos/net/net-faults.ts):
                 net_latency (1-5 ms with jitter on every proxied link, sometimes a bandwidth cap)
                 link_loss_dup (nft loss and duplication on one gateway-node or node-node link)
                 nats_node_isolated (a node partitioned from its peers and one gateway, reachable by the others)
                 gateway_nats_partition (a gateway cut from every node; clients and upstreams still reach it)
                 gateway_upstream_partition (a gateway cut from the upstreams' host)
                 net_asymmetric (one way: a node's packets dropped at its peers, or a gateway's at every node)
                 partition_heal_resume (a gateway cut from NATS; every client connection cut just before it heals)
                 link_stall (one-way stall in the link proxies: a node's routes, or a gateway's NATS links)
                 route_reset (a node's route connections reset, new ones refused for a while)
                 e.g. --faults default,nats_power_loss,gateway_nats_cut=2,nats_node_stop
`;

const FLAGS = ['duration', 'clients', 'seed', 'json', 'settle', 'fault-gap', 'gateway-logs', 'dump', 'events', 'cut-chance', 'log', 'target', 'sync', 'faults', 'task-clients', 'task-upstream', 'log-partitions', 'net', 'upstreams'];
/** Set (to the network's JSON) in the harness that `--net hosts` starts inside the clients host. */
const NET_ENV = 'TETHER_CHAOS_NET';

function parseArgs(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined) throw new Error(`--${name} needs a value`);
    // Runs recorded before issue 24 named a server: there is one now (NATS_SERVER_BIN picks another, >= 2.11).
    if (name === 'nats') throw new Error('--nats is gone: every run is on the current nats-server (2.11 or later; NATS_SERVER_BIN picks another)');
    if (!FLAGS.includes(name)) throw new Error(`unknown flag --${name}`);
    out[name] = value;
  }
  return out;
}

async function main(): Promise<number> {
  let args: Record<string, string>;
  let durationMs: number;
  let clients: number;
  let seed: number;
  let target: TargetName;
  let log: LogMode;
  let sync: SyncMode;
  let faults: FaultSelection;
  let taskClients: number;
  let taskUpstream: TaskUpstreamKind;
  let logPartitions: number;
  let netMode: 'hosts' | undefined;
  let upstreams: UpstreamSet[] | undefined;
  try {
    args = parseArgs(process.argv.slice(2));
    durationMs = parseDuration(args['duration'] ?? '60s');
    clients = Number(args['clients'] ?? '6');
    seed = Number(args['seed'] ?? '1');
    if (!Number.isInteger(clients) || clients < 1 || clients > 200) throw new Error(`--clients must be an integer from 1 to 200, got ${args['clients']}`);
    taskClients = Number(args['task-clients'] ?? '2');
    if (!Number.isInteger(taskClients) || taskClients < 0 || taskClients > 100) throw new Error(`--task-clients must be an integer from 0 to 100, got ${args['task-clients']}`);
    taskUpstream = (args['task-upstream'] ?? 'kit') as TaskUpstreamKind;
    if (taskUpstream !== 'kit' && taskUpstream !== 'owned') throw new Error(`--task-upstream must be kit or owned, got ${args['task-upstream']}`);
    logPartitions = Number(args['log-partitions'] ?? '1');
    if (!/^\d+$/.test(args['log-partitions'] ?? '1') || !Number.isInteger(logPartitions) || logPartitions < 1 || logPartitions > MAX_PARTITIONS) {
      throw new Error(`--log-partitions must be an integer from 1 to ${MAX_PARTITIONS}, got ${args['log-partitions']}`);
    }
    if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a non-negative integer, got ${args['seed']}`);
    if (durationMs < 5_000) throw new Error('--duration must be at least 5s');
    target = (args['target'] ?? 'gateway') as TargetName;
    if (target !== 'gateway' && target !== 'sdk-example') throw new Error(`--target must be gateway or sdk-example, got ${args['target']}`);
    log = (args['log'] ?? 'nats') as LogMode;
    if (log !== 'nats' && log !== 'grpc') throw new Error(`--log must be nats or grpc, got ${args['log']}`);
    if (target === 'sdk-example' && log === 'grpc') throw new Error('--log grpc needs --target gateway: the SDK example holds its log in-process');
    upstreams = args['upstreams'] === undefined ? undefined : parseUpstreamSets(args['upstreams']);
    if (target === 'sdk-example' && upstreams !== undefined) throw new Error('--upstreams needs --target gateway: the SDK example serves its own tools');
    sync = args['sync'] === undefined ? 'default' : (args['sync'] as SyncMode);
    if (sync !== 'always' && sync !== 'default') throw new Error(`--sync must be always (or default), got ${args['sync']}`);
    if (args['net'] !== undefined && args['net'] !== 'hosts' && args['net'] !== 'cleanup') throw new Error(`--net must be hosts or cleanup, got ${args['net']}`);
    if (args['net'] === 'cleanup') return await cleanup();
    netMode = args['net'] === 'hosts' ? 'hosts' : undefined;
    if (taskUpstream === 'owned' && (target !== 'gateway' || taskClients === 0)) throw new Error('--task-upstream owned needs --target gateway and task clients');
    if (taskUpstream === 'owned' && args['net'] === 'hosts') throw new Error('--task-upstream owned runs its replicas in the harness\'s process: not with --net hosts');
    const unavailable = new Set<FaultKind>(target === 'sdk-example' ? ['upstream_restart', 'gateway_upstream_partition'] : []);
    if (taskUpstream !== 'owned') unavailable.add('task_replica_kill');
    if (taskUpstream !== 'owned' && /(^|,)\s*task_replica_kill\b/.test(args['faults'] ?? '')) throw new Error('--faults: task_replica_kill needs --task-upstream owned (replicas holding tasks to kill)');
    faults = args['faults'] === undefined ? DEFAULT_SELECTION.filter((f) => !unavailable.has(f.kind)) : parseFaultSelection(args['faults'], unavailable, netMode === 'hosts');
  } catch (err) {
    process.stderr.write(`chaos: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const load: { minEvents?: number; maxEvents?: number; cutChance?: number } = {};
  if (args['events'] !== undefined) {
    const m = /^(\d+)-(\d+)$/.exec(args['events']);
    if (m === null || Number(m[1]) < 1 || Number(m[2]) < Number(m[1])) {
      process.stderr.write(`chaos: --events must look like 10-80, got ${args['events']}\n`);
      return 2;
    }
    load.minEvents = Number(m[1]);
    load.maxEvents = Number(m[2]);
  }
  if (args['cut-chance'] !== undefined) {
    const p = Number(args['cut-chance']);
    if (!(p >= 0 && p <= 1)) {
      process.stderr.write(`chaos: --cut-chance must be from 0 to 1, got ${args['cut-chance']}\n`);
      return 2;
    }
    load.cutChance = p;
  }
  let net: HostNetwork | undefined;
  if (netMode === 'hosts') {
    const spec = process.env[NET_ENV];
    if (spec === undefined) return runInHosts(target, log === 'grpc');
    net = attachHostNetwork(JSON.parse(spec) as HostNetworkSpec);
  }
  const command = `npm run chaos -- ${process.argv.slice(2).join(' ')}`.trim();
  const report = await runChaos({
    ...(net === undefined ? {} : { net }),
    durationMs,
    clients,
    seed,
    ...(args['settle'] === undefined ? {} : { settleMs: parseDuration(args['settle']) }),
    ...(args['fault-gap'] === undefined ? {} : { meanFaultGapMs: parseDuration(args['fault-gap']) }),
    ...(args['gateway-logs'] === undefined ? {} : { gatewayLogDir: args['gateway-logs'] }),
    ...(args['dump'] === undefined ? {} : { dumpPath: args['dump'] }),
    load,
    target,
    log,
    sync,
    faults,
    taskClients,
    taskUpstream,
    logPartitions,
    ...(upstreams === undefined ? {} : { upstreams }),
    say: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${formatSummary(report, command)}\n`);
  if (args['json'] !== undefined) {
    await writeFile(args['json'], `${JSON.stringify({ command, ...report }, null, 2)}\n`);
    process.stdout.write(`report written to ${args['json']}\n`);
  }
  const taskViolations = 'skipped' in report.tasks ? 0 : report.tasks.violations.total;
  return report.silentViolations.total > 0 || taskViolations > 0 ? 1 : 0;
}

/**
 * `--net hosts`, first half: build the network (every host the run needs),
 * run this same command again inside its `clients` host, and remove the
 * network when that exits, or on SIGINT/SIGTERM (the network's own hook).
 * Returns the inner run's exit code.
 */
async function runInHosts(target: TargetName, grpc: boolean): Promise<number> {
  const missing = missingPrerequisites(true);
  if (missing.length > 0) {
    process.stderr.write(`chaos: --net hosts cannot run here: ${missing.join('; ')}\n`);
    return 2;
  }
  // The names the stack gives the instances behind the balancer (stack.ts): each a host.
  const { hosts, octets } = hostsFor(target === 'sdk-example' ? ['sdk1', 'sdk2', 'sdk3'] : ['gw1', 'gw2', 'gw3'], grpc ? ['log1', 'log2'] : []);
  let net: HostNetwork;
  try {
    net = await createHostNetwork({ hosts, octets });
  } catch (err) {
    process.stderr.write(`chaos: could not build the host network: ${(err as Error).message}\n`);
    return 2;
  }
  process.stdout.write(`network ${net.runId}: ${net.hosts.length} hosts in namespaces ${net.switchNetns.replace(/-sw$/, '-*')} (switch ${net.switchNetns})\n`);
  const spec: HostNetworkSpec = { runId: net.runId, switchNetns: net.switchNetns, hosts: net.hosts };
  const self = fileURLToPath(import.meta.url);
  const inner = net.wrap(CLIENTS_HOST, process.execPath, [...process.execArgv, self, ...process.argv.slice(2)]);
  const code = await new Promise<number>((resolve) => {
    const child = spawn(inner.command, inner.args, { stdio: 'inherit', env: { ...process.env, [NET_ENV]: JSON.stringify(spec) } });
    child.once('error', (err) => {
      process.stderr.write(`chaos: could not start the harness in host ${CLIENTS_HOST}: ${err.message}\n`);
      resolve(2);
    });
    child.once('exit', (c, signal) => resolve(c ?? (signal === null ? 2 : 128 + 2)));
  });
  const removed = await net.destroy();
  process.stdout.write(
    `network ${net.runId} removed: ${removed.removed.length} namespaces${removed.killed.length === 0 ? '' : `, ${removed.killed.length} processes still inside SIGKILLed (${removed.killed.join('; ')})`}${removed.failed.length === 0 ? '' : `; NOT removed: ${removed.failed.join('; ')} (npm run chaos -- --net cleanup)`}\n`,
  );
  return removed.failed.length === 0 ? code : Math.max(code, 2);
}

/** `--net cleanup`: what runs killed with SIGKILL left behind. */
async function cleanup(): Promise<number> {
  const missing = missingPrerequisites(false);
  if (missing.length > 0) {
    process.stderr.write(`chaos: --net cleanup cannot run here: ${missing.join('; ')}\n`);
    return 2;
  }
  const report = await cleanupLeftovers();
  process.stdout.write(
    [
      `removed ${report.removed.length} namespaces${report.removed.length === 0 ? '' : `: ${report.removed.join(', ')}`}`,
      ...(report.killed.length === 0 ? [] : [`SIGKILLed ${report.killed.length} processes left inside them: ${report.killed.join('; ')}`]),
      ...(report.live.length === 0 ? [] : [`left alone (their run is alive): ${report.live.join(', ')}`]),
      ...(report.failed.length === 0 ? [] : [`FAILED: ${report.failed.join('; ')}`]),
    ].join('\n') + '\n',
  );
  return report.failed.length === 0 ? 0 : 2;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`chaos: the harness failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(2);
  },
);
