import { randomBytes } from 'node:crypto';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { releaseDir, trackOwnedDir } from './children.js';
import { NatsServerStartError, TestingError, TestingErrorCodes } from './errors.js';
import { findNatsServerBinary } from './find-binary.js';
import { ManagedNatsServer, type NatsServer } from './nats-server.js';
import { getFreePorts, isPortTaken, LOOPBACK } from './ports.js';
import { jetStreamApiProbe, placementProbe, readMetaCluster, type Probe } from './readiness.js';
import { startRouteProxy, type RouteProxy } from './route-proxy.js';

/** Options of {@link startNatsCluster}. */
export interface NatsClusterOptions {
  /** The nats-server binary, run as given. Default: {@link findNatsServerBinary} (`$NATS_SERVER_BIN`, else `scripts/nats-server.sh current`; never older than 2.11). */
  bin?: string;
  /** Extra lines of every node's config file, e.g. `['jetstream { sync_interval: always }']`. */
  configLines?: readonly string[];
  /**
   * Extra lines inside every node's `cluster {}` block, e.g.
   * `['no_advertise: true']` (clients then learn no other node's URL from
   * INFO, so a client given proxy URLs keeps to them). Default none.
   */
  clusterLines?: readonly string[];
  /** Number of nodes. Default 3 (the smallest that survives losing one). */
  size?: number;
  /** How long the whole cluster, and later each node's restart(), may take to be ready. Default 30000. */
  readyTimeoutMs?: number;
  /**
   * Run every route through a TCP proxy of its own, one per directed pair
   * (node i dials node j's route port through proxy i→j), so that
   * {@link NatsCluster.isolate} can cut a node off from its peers while its
   * clients stay connected. Default false.
   */
  proxyRoutes?: boolean;
}

/** Nodes of a JetStream cluster, wherever they run (here on loopback, or in network namespaces in chaos). */
export interface NatsNodes {
  readonly servers: readonly NatsServer[];
  /** Client URLs, one per node, in `servers` order. */
  readonly urls: readonly string[];
  /** Stops every node and removes all store dirs. Idempotent. */
  cleanup(): Promise<void>;
}

/** A JetStream cluster of real nats-server processes on 127.0.0.1. */
export interface NatsCluster extends NatsNodes {
  /** With `proxyRoutes`, one proxy per directed pair of nodes; else empty. */
  readonly routeProxies: readonly RouteProxy[];
  /**
   * With `proxyRoutes`: cuts node `index` (0-based, as in `servers`) off
   * from every peer. Every route connection through a proxy touching it is
   * destroyed and new ones are refused until {@link heal}; its client port
   * is untouched. Returns how many connections were cut.
   */
  isolate(index: number): number;
  /** Lets node `index` (default: every node) route again; a proxy stays blocked while its other end is isolated. */
  heal(index?: number): void;
  /**
   * A client connection to node `index` alone: it ignores the cluster's
   * other URLs, so it stays on that node through isolations (and retries
   * it forever). Closed by {@link NatsNodes.cleanup}.
   */
  connectOnly(index: number): Promise<NatsConnection>;
}

/** Route ports are picked up front (every config names its peers), so a lost race is retried. */
const MAX_ATTEMPTS = 3;
/** What a proxied node advertises as its route URL: see launchCluster. */
const UNREACHABLE_ROUTE_PORT = 1;

/**
 * Starts a JetStream cluster on loopback: unique `server_name` per node (kept
 * across restarts: JetStream derives the node's Raft peer id from it), one
 * cluster name, explicit routes to every peer, a store dir per node.
 * Resolves when a meta leader is elected, every node agrees on it, the leader
 * sees every peer current and each node's JetStream API answers, so an R3
 * stream can be created right away.
 *
 * With `proxyRoutes`, every route runs through a {@link RouteProxy} of its
 * own (node i's config names proxy i→j as its route to j), and
 * `isolate(k)` blocks every proxy touching k: k loses all its routes, as a
 * node cut off from its peers by the network, while clients still reach it
 * (what the chaos fault `nats_node_isolated` does across hosts, here on
 * loopback). `packages/testing/test/route-isolation.int.test.ts` checks
 * with `/routez` that no route goes around the proxies.
 *
 * @throws NatsServerNotFoundError `nats_server_not_found`
 * @throws TestingError `nats_cluster_start_failed` (its `cause` is the first node's NatsServerStartError)
 */
export async function startNatsCluster(opts: NatsClusterOptions = {}): Promise<NatsCluster> {
  const size = opts.size ?? 3;
  if (!Number.isInteger(size) || size < 1) throw new RangeError(`cluster size must be a positive integer, got ${size}`);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const bin = opts.bin ?? findNatsServerBinary();
  const configLines = opts.configLines ?? [];
  const clusterLines = opts.clusterLines ?? [];
  const proxyRoutes = opts.proxyRoutes ?? false;

  for (let attempt = 1; ; attempt += 1) {
    try {
      return await launchCluster(bin, size, readyTimeoutMs, configLines, clusterLines, proxyRoutes);
    } catch (err) {
      const portTaken = err instanceof TestingError && err.cause instanceof NatsServerStartError && isPortTaken(err.cause.stderrTail);
      if (!portTaken || attempt >= MAX_ATTEMPTS) throw err;
    }
  }
}

async function launchCluster(
  bin: string,
  size: number,
  readyTimeoutMs: number,
  configLines: readonly string[],
  clusterLines: readonly string[],
  proxyRoutes: boolean,
): Promise<NatsCluster> {
  const id = randomBytes(4).toString('hex');
  const clusterName = `tether-test-${id}`;
  const routePorts = await getFreePorts(size);
  const baseDir = await mkdtemp(join(tmpdir(), 'tether-nats-cluster-'));
  trackOwnedDir(baseDir);
  const proxies: RouteProxy[] = [];
  if (proxyRoutes) {
    for (const from of routePorts.keys()) {
      for (const [to, port] of routePorts.entries()) if (to !== from) proxies.push(await startRouteProxy(from, to, port));
    }
  }

  const nodes: { name: string; server: ManagedNatsServer }[] = [];
  for (const [i, routePort] of routePorts.entries()) {
    const name = `${clusterName}-n${i + 1}`;
    const dir = join(baseDir, `n${i + 1}`);
    await mkdir(dir);
    const configFile = join(dir, 'nats-server.conf');
    const peers = proxyRoutes
      ? proxies.filter((p) => p.from === i).map((p) => `nats-route://${LOOPBACK}:${p.port}`)
      : routePorts.filter((_, j) => j !== i).map((port) => `nats-route://${LOOPBACK}:${port}`);
    // Proxied, a node also advertises a route URL nobody listens on. Peers
    // learn each other's advertised URL from route INFO (gossip) and dial it
    // when they have no route to that server yet: with the real route port
    // they went around the proxies (seen on 2.15.1, after a heal and at
    // start), and an isolated node kept a route. Port 1 on loopback refuses
    // (privileged, nothing listens there), and a gossiped route is dialed
    // once, not retried. The explicit routes through the proxies are a full
    // mesh, so gossip has nothing to add. (`no_advertise` does not help: it
    // only keeps other nodes' client URLs out of the INFO sent to clients.)
    const advertise = proxyRoutes ? [`advertise: ${JSON.stringify(`${LOOPBACK}:${UNREACHABLE_ROUTE_PORT}`)}`] : [];
    await writeFile(configFile, renderConfig({ name, clusterName, routePort, peers, configLines, clusterLines: [...advertise, ...clusterLines] }));
    const server = new ManagedNatsServer({ bin, dir, ownsDir: true, jetstream: true, port: undefined, monitorPort: undefined, configFile, extraArgs: [], readyTimeoutMs });
    nodes.push({ name, server });
  }

  const clients: NatsConnection[] = [];
  let cleaning: Promise<void> | undefined;
  const cleanup = () => {
    cleaning ??= (async () => {
      await Promise.all(clients.map((nc) => nc.close().catch(() => undefined)));
      await Promise.all(nodes.map((node) => node.server.cleanup()));
      await Promise.all(proxies.map((proxy) => proxy.close()));
      await rm(baseDir, { recursive: true, force: true, maxRetries: 3 });
      releaseDir(baseDir);
    })();
    return cleaning;
  };

  // Restarts only need the restarted node back in the meta group; the first
  // start needs everyone (an R3 placement needs all three peers known).
  // The first start also needs an R<size> placement to succeed once (node 0 tries it).
  for (const node of nodes) node.server.setReadyProbe(metaMemberProbe(node.name, nodes, false));
  const starts = nodes.map((node, index) => {
    const member = metaMemberProbe(node.name, nodes, true);
    const probe: Probe = index > 0 || size < 2 ? member : async (timeoutMs) => (await member(timeoutMs)) ?? (await placementProbe(node.server.url, size)(timeoutMs));
    return node.server.start(probe);
  });
  try {
    await Promise.all(starts);
  } catch (err) {
    // Fail fast: without this node the others would wait out the whole
    // timeout for a full meta group. cleanup() kills them, which ends their
    // start() too.
    await cleanup();
    await Promise.allSettled(starts);
    const message = err instanceof Error ? err.message : String(err);
    throw new TestingError(TestingErrorCodes.NatsClusterStartFailed, `${size}-node cluster ${clusterName} did not start: ${message}`, { cause: err });
  }

  const servers = nodes.map((node) => node.server);
  const isolated = new Set<number>();
  const checkIndex = (index: number | undefined) => {
    if (!proxyRoutes) throw new Error('isolate/heal need a cluster started with proxyRoutes: true');
    if (index !== undefined && (!Number.isInteger(index) || index < 0 || index >= size)) throw new RangeError(`no node ${index} in a ${size}-node cluster`);
  };
  return {
    servers,
    urls: servers.map((server) => server.url),
    routeProxies: proxies,
    isolate(index) {
      checkIndex(index);
      isolated.add(index);
      let cut = 0;
      for (const proxy of proxies) if (proxy.from === index || proxy.to === index) cut += proxy.block();
      return cut;
    },
    heal(index) {
      checkIndex(index);
      if (index === undefined) isolated.clear();
      else isolated.delete(index);
      for (const proxy of proxies) if (!isolated.has(proxy.from) && !isolated.has(proxy.to)) proxy.unblock();
    },
    async connectOnly(index) {
      if (!Number.isInteger(index) || index < 0 || index >= size) throw new RangeError(`no node ${index} in a ${size}-node cluster`);
      const nc = await connect({ servers: servers[index]!.url, ignoreClusterUpdates: true, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
      clients.push(nc);
      return nc;
    },
    cleanup,
  };
}

/**
 * Ready when this node knows the meta leader, the leader agrees, and the
 * leader sees this node (or, with `allPeers`, every other node) as a current
 * member of the meta group, and this node's JetStream API answers.
 */
function metaMemberProbe(self: string, nodes: readonly { name: string; server: ManagedNatsServer }[], allPeers: boolean): Probe {
  return async (timeoutMs) => {
    const me = nodes.find((node) => node.name === self);
    if (me === undefined) return `unknown node ${self}`;
    const mine = await readMetaCluster(me.server.monitorPort, timeoutMs);
    if (mine.leader === undefined) return 'no JetStream meta leader yet';
    const leader = nodes.find((node) => node.name === mine.leader);
    if (leader === undefined) return `meta leader ${mine.leader} is not one of ours`;
    if (leader.server.monitorPort === 0) return `meta leader ${mine.leader} has not reported its ports yet`;
    const view = leader === me ? mine : await readMetaCluster(leader.server.monitorPort, timeoutMs);
    if (view.leader !== mine.leader) return `${self} thinks ${mine.leader} leads, the leader thinks ${view.leader ?? 'nobody'} does`;
    const current = new Set(view.replicas.filter((r) => r.current && !r.offline).map((r) => r.name));
    current.add(leader.name);
    const missing = allPeers ? nodes.filter((node) => !current.has(node.name)).map((node) => node.name) : current.has(self) ? [] : [self];
    if (missing.length > 0) return `meta leader ${leader.name} does not see ${missing.join(', ')} as current`;
    // /jsz can name a leader a moment before this node's JetStream API
    // answers: a createStream then fails with JetStreamNotEnabled (seen in
    // CI right after a cluster start). Ask the API itself.
    const api = await jetStreamApiProbe(me.server.url)(timeoutMs);
    return api === undefined ? undefined : `${self}: JetStream API: ${api}`;
  };
}

function renderConfig(c: { name: string; clusterName: string; routePort: number; peers: readonly string[]; configLines: readonly string[]; clusterLines: readonly string[] }): string {
  // JSON strings are valid NATS config strings. Ports, store dir and JetStream
  // come from the command line so the launcher treats every node alike.
  const q = (s: string) => JSON.stringify(s);
  return [
    `server_name: ${q(c.name)}`,
    'cluster {',
    `  name: ${q(c.clusterName)}`,
    `  listen: ${q(`${LOOPBACK}:${c.routePort}`)}`,
    `  routes: [${c.peers.map(q).join(', ')}]`,
    ...c.clusterLines.map((line) => `  ${line}`),
    '}',
    ...c.configLines,
    '',
  ].join('\n');
}
