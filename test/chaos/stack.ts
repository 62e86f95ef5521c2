/**
 * The chaos stack, all real processes on loopback: a 3-node NATS cluster
 * (the log at R3), and behind the test kit's round-robin balancer (every
 * request to the next process) one of two targets:
 *
 * - `gateway` (default): two SDK upstreams in their own processes (one with
 *   an event store, one without; with `upstreams`, also or instead the
 *   reference server `server-everything` on `/everything/mcp` and an SDK v2
 *   `createMcpHandler` server on `/v2/mcp`) and three gateway processes, with the log
 *   in-process on NATS (`--log nats`, default) or through two session-log
 *   services (`--log grpc`: gateway i uses service i mod 2);
 * - `sdk-example`: three `tether-sdk-example` processes (the official-SDK
 *   server with Tether's session router, event store and durable tasks).
 *
 *   clients ─▶ balancer ─▶ gateway ×3 ─▶ upstream /mcp (event store)  | upstream /plain/mcp (none)
 *                             │  (or ─▶ session-log ×2 ─┐)
 *                             ▼                         ▼
 *                  nats-server ×3 (JetStream R3: TETHER log, sessions)
 *
 * With `logPartitions` N > 1, every process that opens the log gets
 * `--log-partitions N` (the gateways with the log in-process, the
 * session-log services, the SDK instances), and the log is N streams
 * `TETHER_LOG-<k>_<namespace>`, each with its own buckets.
 *
 * With `natsProxies`, every process that holds a NATS connection for the
 * log (the gateways, the session-log services, or the SDK instances) reaches
 * the cluster through its own TCP proxy (`nats-proxy.ts`), which the
 * `gateway_nats_cut` fault freezes or resets; the cluster then runs with
 * `cluster { no_advertise: true }` so no client learns a way around it.
 */
import { createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { logLayout, resolveConfig } from '@tether/session-log';
import { findNatsServerBinary, natsServerVersion, startNatsCluster, startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { NatsNodes, RoundRobinProxy, ServiceProcess } from '@tether/testing';
import { Routes } from './client-context.js';
import { monitorBase } from './faults.js';
import { startNatsProxy } from './nats-proxy.js';
import { TASK_ROUTE } from './task-client.js';
import { upstreamNamesOf } from './upstreams.js';
import type { UpstreamName, UpstreamSet } from './upstreams.js';
import type { NatsProxy } from './nats-proxy.js';
import type { NetHandles, Placement } from './net/placement.js';
import { sleep } from './util.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
const SESSION_LOG_MAIN = fileURLToPath(new URL('../../services/session-log/dist/main.js', import.meta.url));
const SDK_EXAMPLE_MAIN = fileURLToPath(new URL('./sdk-example-main.ts', import.meta.url));
const UPSTREAM_MAIN = fileURLToPath(new URL('../shared/mcp-upstream-main.ts', import.meta.url));
const EVERYTHING_MAIN = fileURLToPath(new URL('./everything-main.ts', import.meta.url));
const V2_UPSTREAM_MAIN = fileURLToPath(new URL('./v2-upstream-main.ts', import.meta.url));
/** The gateways' credential at the session-log services (`--log grpc`). */
const LOG_TOKEN = { name: 'chaos-gateways', secret: 'chaos-secret-token' };

export type { UpstreamName } from './upstreams.js';
export type LogMode = 'nats' | 'grpc';
export type TargetName = 'gateway' | 'sdk-example';
export type SyncMode = 'default' | 'always';

export interface Upstream {
  readonly name: UpstreamName;
  readonly port: number;
  readonly url: string;
  process: ServiceProcess;
}

/** One place behind the balancer: a gateway, or an SDK example instance. */
export interface GatewaySlot {
  readonly slot: number;
  /** `gw1`, or `sdk1` for an SDK example instance. */
  readonly name: string;
  /** Restarts so far; names the instance (`gw1.0`, `gw1.1`, …). */
  generation: number;
  process: ServiceProcess | undefined;
  origin: string | undefined;
}

/** A process whose NATS connection goes through a proxy the `gateway_nats_cut` fault can freeze. */
export interface NatsClientSlot {
  /** `gw1`, `log1` (a session-log service), `sdk1`. */
  readonly name: string;
  readonly proxy: NatsProxy;
}

export interface ChaosStackOptions {
  /** The log's namespace (one per run): `--namespace` of every process that owns the log. */
  readonly namespace: string;
  /** Writes every gateway's (and session-log service's) stdout (pino JSON) to `<dir>/<instance>.log`. */
  readonly gatewayLogDir?: string | undefined;
  /** What runs behind the balancer. Default `gateway`. */
  readonly target?: TargetName;
  /** Gateways with the log in-process (`nats`) or through session-log services (`grpc`). Default `nats`. */
  readonly log?: LogMode;
  /** `always`: every node runs with `jetstream { sync_interval: always }`. Default: the server's default. */
  readonly sync?: SyncMode;
  /** Streams the log is spread over: `--log-partitions` of every process that opens it. Default 1. */
  readonly logPartitions?: number;
  /** Put a freezable TCP proxy between each NATS client process and the cluster (for `gateway_nats_cut`). Default false. */
  readonly natsProxies?: boolean;
  /**
   * The task upstream (`task-run.ts`): the gateways serve it on `/tasks/mcp`
   * with `--task-retry idempotent`. Default none: no such route, the gateways'
   * flags as before.
   */
  readonly taskUpstreamUrl?: string | undefined;
  /** The upstreams behind the gateways (`gateway` target), each on its route. Default `['kit']`: the test kit's two, as before. */
  readonly upstreams?: readonly UpstreamSet[];
  /**
   * `--net hosts` (`net/placement.ts`): every process in a host of its own,
   * the cluster in three, every link from a process to NATS or an upstream
   * through its host's link proxy (so `gateway_nats_cut` always has one).
   * Default none: everything on loopback, as before.
   */
  readonly placement?: Placement | undefined;
}

/** What the stack runs, for the report. */
export interface StackConfig {
  readonly target: TargetName;
  readonly log: LogMode;
  readonly natsBin: string;
  readonly natsVersion: string;
  readonly sync: SyncMode;
  /** The log's partition count (`--log-partitions`). */
  readonly logPartitions: number;
  readonly instances: number;
  readonly logServices: number;
  readonly natsProxies: boolean;
  /** `hosts` with `--net hosts`; absent otherwise. */
  readonly net?: 'hosts';
  /** The upstream sets, when not the test kit's alone (`--upstreams`); absent otherwise. */
  readonly upstreams?: readonly UpstreamSet[];
}

export interface ChaosStack {
  readonly config: StackConfig;
  readonly cluster: NatsNodes;
  /** The log's streams: partition k's at index k (one for an unpartitioned log). */
  readonly streamNames: readonly string[];
  readonly proxy: RoundRobinProxy;
  /** The balancer, `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  /** The upstreams (`gateway` target only), by name. */
  readonly upstreams: Readonly<Partial<Record<UpstreamName, Upstream>>> | undefined;
  /** Their names, in `upstreamNamesOf` order (empty for the SDK example). */
  readonly upstreamNames: readonly UpstreamName[];
  /** The processes behind the balancer: gateways, or SDK example instances. */
  readonly gateways: readonly GatewaySlot[];
  /** The session-log services (`--log grpc`). */
  readonly logServices: readonly ServiceProcess[];
  /** Processes reaching NATS through a proxy (with `natsProxies`); empty otherwise. */
  readonly natsClients: readonly NatsClientSlot[];
  /** With `--net hosts`: the network, its nft faults and link proxies. */
  readonly net: NetHandles | undefined;
  /** SIGKILL (the balancer first stops sending it requests, as a health check would). */
  killGateway(slot: number): Promise<void>;
  /** SIGTERM: the gateway drains (ends client streams with a retry hint, releases its streams) and exits. */
  drainGateway(slot: number): Promise<{ code: number | null; signal: string | null; ms: number }>;
  /**
   * A new process in the slot (new port), put in the balancer's rotation.
   * A start that fails (NATS electing, or down: a power loss) is tried again
   * every second, as a supervisor would, until `stopTrying` aborts (the
   * run's end) or, without one, for 30 s; returns how many tries it took.
   */
  startGateway(slot: number, stopTrying?: AbortSignal): Promise<number>;
  /** Crash and restart an upstream on the same port: it forgets every session (the v2 one has none). */
  restartUpstream(name: UpstreamName, downMs: number): Promise<void>;
  teardown(): Promise<void>;
}

/** How many processes stand behind the balancer, and how many session-log services `--log grpc` runs. */
const INSTANCES = 3;
const LOG_SERVICES = 2;

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const target = options.target ?? 'gateway';
  const logMode = options.log ?? 'nats';
  if (target === 'sdk-example' && logMode === 'grpc') throw new Error('the SDK example has no --log grpc mode (it holds the log in-process)');
  // The test kit's: NATS_SERVER_BIN, else scripts/nats-server.sh's current one; never older than 2.11.
  const natsBin = findNatsServerBinary();
  const natsVersion = natsServerVersion(natsBin);
  const sync = options.sync ?? 'default';
  const natsProxies = options.natsProxies ?? false;
  const logPartitions = options.logPartitions ?? 1;
  // Also checks the count (1..256) before anything starts.
  const streamNames = logLayout(resolveConfig({ namespace: options.namespace, partitions: logPartitions })).partitions.map((p) => p.streamName);
  /** `--log-partitions N` for a process that opens the log; none for N = 1, so such a run starts every process as before. */
  const partitionFlags = logPartitions === 1 ? [] : ['--log-partitions', String(logPartitions)];
  const placement = options.placement;
  /** A node process in its host (`--net hosts`), or here. */
  const spawnIn = (host: string, args: string[]): { command: string; args: string[] } => (placement === undefined ? { command: process.execPath, args } : placement.wrap(host, process.execPath, args));
  /** The address a process in `host` listens on and is reached at. */
  const addressOf = (host: string): string => placement?.address(host) ?? '127.0.0.1';
  const hostFlag = (host: string): string[] => (placement === undefined ? [] : ['--host', addressOf(host)]);
  const configLines = sync === 'always' ? ['jetstream { sync_interval: always }'] : [];
  const cluster = placement !== undefined ? await placement.startCluster(natsBin, configLines) : await startNatsCluster({
    size: 3,
    bin: natsBin,
    readyTimeoutMs: 30_000,
    ...(sync === 'always' ? { configLines: ['jetstream { sync_interval: always }'] } : {}),
    ...(natsProxies ? { clusterLines: ['no_advertise: true'] } : {}),
  });
  // A run that says `sync_interval: always` must have it: a config block can silently replace another.
  if (sync === 'always') await assertSyncAlways(cluster);
  const started: ServiceProcess[] = [];
  const proxies: NatsProxy[] = [];
  const logs: WriteStream[] = [];
  if (options.gatewayLogDir !== undefined) await mkdir(options.gatewayLogDir, { recursive: true });
  const stopAll = async (): Promise<void> => {
    await Promise.all(started.map((p) => p.stop('SIGKILL', 2_000).catch(() => undefined)));
    await Promise.all(proxies.map((p) => p.close().catch(() => undefined)));
  };
  try {
    const natsClients: NatsClientSlot[] = [];
    /** The NATS URLs a process named `name` gets: the cluster's, or its own proxy's. */
    const natsUrlsFor = async (name: string): Promise<string> => {
      if (placement !== undefined) {
        const { natsUrls, proxy } = await placement.prepareHost(name, false);
        if (!natsClients.some((c) => c.name === name)) natsClients.push({ name, proxy });
        return natsUrls;
      }
      if (!natsProxies) return cluster.urls.join(',');
      const proxy = await startNatsProxy(cluster.servers.map((s) => s.port));
      proxies.push(proxy);
      natsClients.push({ name, proxy });
      return proxy.urls.join(',');
    };
    const tee = (proc: ServiceProcess, instance: string): void => {
      if (options.gatewayLogDir !== undefined) teeLines(proc, join(options.gatewayLogDir, `${instance}.log`), logs);
    };

    let upstreams: Partial<Record<UpstreamName, Upstream>> | undefined;
    const upstreamSets = options.upstreams ?? ['kit'];
    const upstreamNames = target === 'gateway' ? upstreamNamesOf(upstreamSets) : [];
    if (target === 'gateway' && upstreamNames.length === 0) throw new Error('no upstreams: name at least one of kit, everything, v2');
    const upstreamMain = (name: UpstreamName): string[] => (name === 'everything' ? [EVERYTHING_MAIN] : name === 'v2' ? [V2_UPSTREAM_MAIN] : [UPSTREAM_MAIN, ...(name === 'store' ? ['--event-store'] : [])]);
    const startUpstream = async (name: UpstreamName, port: number): Promise<ServiceProcess> => {
      const proc = await startServiceProcess({
        name: `upstream-${name}`,
        ...spawnIn('up', ['--import', 'tsx', ...upstreamMain(name), '--port', String(port)]),
        cwd: ROOT,
        readyLine: (json) => json.msg === 'listening',
        readyTimeoutMs: 30_000,
      });
      started.push(proc);
      // --net hosts: the upstream listens on its host's loopback; the host forwards its address's port to it.
      await placement?.exposeUpstream(name, proc.port!);
      return proc;
    };
    if (target === 'gateway') {
      upstreams = {};
      for (const name of upstreamNames) {
        const proc = await startUpstream(name, 0);
        upstreams[name] = { name, port: proc.port!, url: `http://127.0.0.1:${proc.port}/mcp`, process: proc };
      }
    }

    // --log grpc: the services own the log (the first creates the stream and buckets).
    const logServices: ServiceProcess[] = [];
    if (target === 'gateway' && logMode === 'grpc') {
      for (let i = 0; i < LOG_SERVICES; i += 1) {
        const name = `log${i + 1}`;
        const urls = await natsUrlsFor(name);
        const proc = await startServiceProcess({
          name,
          ...spawnIn(name, [
            SESSION_LOG_MAIN,
            ...hostFlag(name),
            ...['--port', '0', '--nats', urls, '--log-replicas', '3', '--namespace', options.namespace, ...partitionFlags],
            ...['--token', `${LOG_TOKEN.name}:${LOG_TOKEN.secret}`, '--instance-id', name],
          ]),
          cwd: ROOT,
          readyLine: (json) => json.msg === 'listening',
          readyTimeoutMs: 30_000,
        });
        started.push(proc);
        tee(proc, name);
        logServices.push(proc);
      }
    }

    const prefix = target === 'gateway' ? 'gw' : 'sdk';
    const gateways: GatewaySlot[] = Array.from({ length: INSTANCES }, (_, slot) => ({ slot, name: `${prefix}${slot + 1}`, generation: 0, process: undefined, origin: undefined }));
    // Each slot keeps its NATS URLs (its proxy) across restarts.
    const slotNats = new Map<number, string>();
    // --net hosts: each gateway's host proxy carries its links to NATS and to the upstreams (any log mode).
    if (placement !== undefined) for (const slot of gateways) await placement.prepareHost(slot.name, true);
    if (!(target === 'gateway' && logMode === 'grpc')) for (const slot of gateways) slotNats.set(slot.slot, await natsUrlsFor(slot.name));
    const argsFor = (slot: GatewaySlot, instance: string): string[] => {
      if (target === 'sdk-example') {
        return [
          '--import', 'tsx', SDK_EXAMPLE_MAIN,
          ...hostFlag(slot.name),
          ...['--port', '0', '--nats', slotNats.get(slot.slot)!, '--instance', instance, ...partitionFlags],
          // The gateways' settings: a 200 ms retry hint, writer checks every 500 ms, 3 s of silence.
          ...['--retry-ms', '200', '--writer-check-ms', '500', '--writer-silence-ms', '3000'],
        ];
      }
      const logFlags =
        logMode === 'grpc'
          ? ['--log', `grpc://${addressOf(`log${(slot.slot % logServices.length) + 1}`)}:${logServices[slot.slot % logServices.length]!.port}`, '--log-token', LOG_TOKEN.secret]
          : ['--nats', slotNats.get(slot.slot)!, '--log-replicas', '3', '--namespace', options.namespace, ...partitionFlags];
      return [
        GATEWAY_MAIN,
        ...hostFlag(slot.name),
        ...['--port', '0', ...logFlags],
        // The kit's event-store upstream is the default route (/mcp); every other is a --route on its path.
        ...upstreamNames.flatMap((name) => (name === 'store' ? ['--upstream', upstreams![name]!.url] : ['--route', `${Routes[name]}=${upstreams![name]!.url}`])),
        ...(options.taskUpstreamUrl === undefined ? [] : ['--route', `${TASK_ROUTE}=${options.taskUpstreamUrl}`, '--task-retry', 'idempotent']),
        ...['--instance-id', instance, '--heartbeat', '1s', '--retry', '200', '--drain-timeout', '5s'],
      ];
    };
    const launch = async (slot: GatewaySlot): Promise<void> => {
      const instance = `${slot.name}.${slot.generation}`;
      slot.generation += 1;
      const proc = await startServiceProcess({
        name: instance,
        ...spawnIn(slot.name, argsFor(slot, instance)),
        cwd: ROOT,
        ...(target === 'sdk-example' ? { env: { TETHER_CHAOS_LOG_REPLICAS: '3', TETHER_CHAOS_NAMESPACE: options.namespace } } : {}),
        readyLine: (json) => json.msg === 'listening',
        readyTimeoutMs: 30_000,
      });
      started.push(proc);
      tee(proc, instance);
      slot.process = proc;
      slot.origin = `http://${addressOf(slot.name)}:${proc.port}`;
    };
    // One at a time: the first creates the log stream and buckets, the others verify them.
    for (const slot of gateways) await launch(slot);
    await assertLayout(cluster.urls, streamNames, 3);
    const proxy = await startRoundRobinProxy(gateways.map((g) => g.origin!), { historySize: 100 });
    const rotate = (): void => proxy.setTargets(gateways.flatMap((g) => (g.origin === undefined ? [] : [g.origin])));

    return {
      config: { target, log: logMode, natsBin, natsVersion, sync, logPartitions, instances: INSTANCES, logServices: logServices.length, natsProxies, ...(placement === undefined ? {} : { net: 'hosts' as const }), ...(upstreamSets.length === 1 && upstreamSets[0] === 'kit' ? {} : { upstreams: upstreamSets }) },
      cluster,
      streamNames,
      proxy,
      baseUrl: proxy.url,
      upstreams,
      upstreamNames,
      gateways,
      logServices,
      natsClients,
      net: placement?.handles(),
      async killGateway(i) {
        const slot = gateways[i]!;
        if (slot.origin !== undefined) proxy.markDown(slot.origin);
        slot.origin = undefined;
        rotate();
        await slot.process?.kill();
        slot.process = undefined;
      },
      async drainGateway(i) {
        const slot = gateways[i]!;
        if (slot.origin !== undefined) proxy.markDown(slot.origin);
        slot.origin = undefined;
        rotate();
        const began = Date.now();
        const status = (await slot.process?.stop('SIGTERM', 15_000)) ?? { code: null, signal: null };
        slot.process = undefined;
        return { code: status.code, signal: status.signal, ms: Date.now() - began };
      },
      async startGateway(i, stopTrying) {
        const slot = gateways[i]!;
        // A process can fail to start while NATS elects a leader (or is down
        // altogether: a power loss). A run once lost a gateway for its last
        // 300 s when three power losses outlasted a 30 s limit.
        const until = Date.now() + 30_000;
        for (let attempt = 1; ; attempt += 1) {
          try {
            await launch(slot);
            rotate();
            return attempt;
          } catch (err) {
            const givingUp = stopTrying === undefined ? attempt >= 4 && Date.now() > until : stopTrying.aborted;
            if (givingUp) throw err;
            await sleep(1_000);
          }
        }
      },
      async restartUpstream(name, downMs) {
        if (upstreams === undefined) throw new Error('no upstreams: the SDK example serves its own tools');
        const upstream = upstreams[name];
        if (upstream === undefined) throw new Error(`no upstream ${name} in this run`);
        await upstream.process.kill();
        await sleep(downMs);
        for (let attempt = 1; ; attempt += 1) {
          try {
            upstream.process = await startUpstream(name, upstream.port);
            return;
          } catch (err) {
            if (attempt >= 4) throw err;
            await sleep(500);
          }
        }
      },
      async teardown() {
        await proxy.close();
        await stopAll();
        for (const log of logs) log.end();
        await cluster.cleanup();
      },
    };
  } catch (err) {
    await stopAll();
    await cluster.cleanup();
    throw err;
  }
}

/**
 * Every partition stream of the log exists and runs at the replicas the
 * harness means (the SDK example gets them through its launcher): a process
 * that ignored `--log-partitions` would have made other streams.
 */
async function assertLayout(servers: readonly string[], streamNames: readonly string[], replicas: number): Promise<void> {
  const nc = await connect({ servers: [...servers] });
  try {
    const jsm = await jetstreamManager(nc);
    for (const streamName of streamNames) {
      const info = await jsm.streams.info(streamName);
      if (info.config.num_replicas !== replicas) throw new Error(`the log stream ${streamName} has ${info.config.num_replicas} replicas, the harness needs ${replicas}`);
    }
  } finally {
    await nc.close();
  }
}

/** Copies every stdout line of a process to a file (the kit keeps only the last 500 in memory). */
function teeLines(proc: ServiceProcess, path: string, logs: WriteStream[]): void {
  const out = createWriteStream(path, { flags: 'a' });
  logs.push(out);
  for (const line of proc.stdoutLines) out.write(`${line}\n`);
  // A matcher that never matches sees every later line; it ends when the process exits.
  proc
    .waitForLine(
      (_json, line) => {
        out.write(`${line}\n`);
        return false;
      },
      { timeoutMs: 24 * 3_600_000 },
    )
    .catch(() => undefined);
}

/** Every node's /varz must report `sync_always` (the `jetstream {}` block the run added took effect). */
async function assertSyncAlways(cluster: NatsNodes): Promise<void> {
  for (const node of cluster.servers) {
    const varz = (await (await fetch(`${monitorBase(node)}/varz`, { signal: AbortSignal.timeout(5_000) })).json()) as { jetstream?: { config?: { sync_always?: boolean } } };
    if (varz.jetstream?.config?.sync_always !== true) throw new Error(`--sync always: node ${node.url} reports sync_always ${String(varz.jetstream?.config?.sync_always)} in /varz`);
  }
}
