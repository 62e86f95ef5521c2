/**
 * A 3-node JetStream cluster with each node in a host of its own
 * (`--net hosts`), behind the test kit's `NatsNodes` interface so the
 * harness's faults (kill, restart, stop, power loss) work unchanged.
 *
 * In host `natsK` (address A_K): client port 4222, monitor 8222, route port
 * 6222 on all its addresses. Every route goes through the host's link proxy
 * (`link-proxy-main.ts`): node K's route to node J is `127.0.0.1:620J` in
 * K's namespace, forwarded to A_J:6222, so latency, stalls and resets can
 * be put on the routes and nft rules see the nodes' own addresses. Each node
 * advertises its route as `127.0.0.1:620K`: a node that learns it from a
 * peer dials its own proxy to K, never around it. `no_advertise` keeps
 * clients (the gateways, which dial their own proxies) to the URLs they got.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsServerVersion } from '@tether/testing';
import type { NatsNodes, NatsServer } from '@tether/testing';
import { killOnExit, scratchDirOf } from './hosts.js';
import type { HostNetwork } from './hosts.js';
import { startHostLinkProxy } from './link-proxy-host.js';
import type { HostLinkProxy } from './link-proxy-host.js';

export const CLIENT_PORT = 4222;
export const MONITOR_PORT = 8222;
export const ROUTE_PORT = 6222;
/** Node K's route, as every other NATS host's proxy offers it: `127.0.0.1:(ROUTE_PROXY_BASE + K)`. */
const ROUTE_PROXY_BASE = 6200;

export interface HostsClusterOptions {
  readonly net: HostNetwork;
  /** The hosts of the nodes, in order (`nats1`, `nats2`, `nats3`). */
  readonly hosts: readonly string[];
  readonly bin: string;
  readonly configLines?: readonly string[];
  readonly readyTimeoutMs?: number;
  /** Seeds the route proxies' jitter. */
  readonly seed: number;
}

export interface HostsCluster extends NatsNodes {
  /** Each node's route proxy (links `route1`…, the routes it dials), by host. */
  readonly routeProxies: ReadonlyMap<string, HostLinkProxy>;
}

/** A node's own route link name in the other hosts' proxies. */
export const routeLink = (k: number): string => `route${k + 1}`;

export async function startHostsCluster(opts: HostsClusterOptions): Promise<HostsCluster> {
  const { net, hosts, bin } = opts;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;
  const clusterName = `tether-hosts-${randomBytes(4).toString('hex')}`;
  // In the network's scratch dir: removed with the network even when this process is SIGKILLed.
  await mkdir(scratchDirOf(net.runId), { recursive: true });
  const baseDir = await mkdtemp(join(scratchDirOf(net.runId), 'nats-'));
  const routeProxies = new Map<string, HostLinkProxy>();
  const nodes: HostNode[] = [];
  const cleanup = async (): Promise<void> => {
    await Promise.all(nodes.map((n) => n.cleanup()));
    await Promise.all([...routeProxies.values()].map((p) => p.close().catch(() => undefined)));
    await rm(baseDir, { recursive: true, force: true, maxRetries: 3 });
  };
  try {
    for (const [i, host] of hosts.entries()) {
      const links = hosts.flatMap((peer, k) => (k === i ? [] : [{ name: routeLink(k), listenHost: '127.0.0.1', listenPort: ROUTE_PROXY_BASE + k + 1, targetHost: net.host(peer).address, targetPort: ROUTE_PORT }]));
      routeProxies.set(host, await startHostLinkProxy(net, host, links, opts.seed * 31 + i));
      const dir = join(baseDir, host);
      await mkdir(dir);
      const q = (s: string): string => JSON.stringify(s);
      const config = [
        `server_name: ${q(`${clusterName}-n${i + 1}`)}`,
        `listen: ${q(`0.0.0.0:${CLIENT_PORT}`)}`,
        `http: ${q(`0.0.0.0:${MONITOR_PORT}`)}`,
        'cluster {',
        `  name: ${q(clusterName)}`,
        `  listen: ${q(`0.0.0.0:${ROUTE_PORT}`)}`,
        `  advertise: ${q(`127.0.0.1:${ROUTE_PROXY_BASE + i + 1}`)}`,
        `  routes: [${hosts.flatMap((_, k) => (k === i ? [] : [q(`nats-route://127.0.0.1:${ROUTE_PROXY_BASE + k + 1}`)])).join(', ')}]`,
        '  no_advertise: true',
        '}',
        // JetStream and its store dir come from the command line (start()), as in the loopback cluster:
        // a `jetstream {}` block in configLines (--sync always) would replace one here, store_dir with it.
        ...(opts.configLines ?? []),
        '',
      ].join('\n');
      await writeFile(join(dir, 'nats-server.conf'), config);
      nodes.push(new HostNode(net, host, bin, dir, readyTimeoutMs));
    }
    await Promise.all(nodes.map((n) => n.start()));
    await waitForMetaGroup(nodes, readyTimeoutMs);
  } catch (err) {
    await cleanup();
    throw err;
  }
  let cleaning: Promise<void> | undefined;
  return {
    servers: nodes,
    urls: nodes.map((n) => n.url),
    routeProxies,
    cleanup: () => (cleaning ??= cleanup()),
  };
}

/** One nats-server in its host; restarts on the same store and ports. */
class HostNode implements NatsServer {
  readonly #net: HostNetwork;
  readonly #host: string;
  readonly #readyTimeoutMs: number;
  #proc: ChildProcess | undefined;
  #stderr = '';
  #queue: Promise<unknown> = Promise.resolve();
  #disposed = false;
  readonly bin: string;
  readonly storeDir: string;
  readonly port = CLIENT_PORT;
  readonly monitorPort = MONITOR_PORT;

  constructor(net: HostNetwork, host: string, bin: string, dir: string, readyTimeoutMs: number) {
    this.#net = net;
    this.#host = host;
    this.bin = bin;
    this.storeDir = dir;
    this.#readyTimeoutMs = readyTimeoutMs;
  }

  get url(): string {
    return `nats://${this.#net.host(this.#host).address}:${CLIENT_PORT}`;
  }
  get version(): string {
    return natsServerVersion(this.bin);
  }
  get pid(): number | undefined {
    return this.#proc?.exitCode === null && this.#proc.signalCode === null ? this.#proc.pid : undefined;
  }

  async start(): Promise<void> {
    const wrapped = this.#net.wrap(this.#host, this.bin, ['-c', join(this.storeDir, 'nats-server.conf'), '-js', '-sd', join(this.storeDir, 'js')]);
    const proc = spawn(wrapped.command, wrapped.args, { stdio: ['ignore', 'ignore', 'pipe'] });
    this.#proc = proc;
    this.#stderr = '';
    proc.stderr?.setEncoding('utf8');
    proc.stderr?.on('data', (d: string) => {
      this.#stderr = (this.#stderr + d).slice(-4_000);
    });
    killOnExit(proc);
    const monitor = `http://${this.#net.host(this.#host).address}:${MONITOR_PORT}`;
    const until = Date.now() + this.#readyTimeoutMs;
    let why = 'not started';
    while (Date.now() < until) {
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`nats-server in ${this.#host} exited (${proc.signalCode ?? proc.exitCode}) before it was ready: ${this.#stderr.trim().split('\n').slice(-5).join(' | ')}`);
      try {
        const res = await fetch(`${monitor}/healthz`, { signal: AbortSignal.timeout(1_000) });
        if (res.ok) {
          why = await jetStreamAnswers(this.url);
          if (why === '') return;
        } else why = `healthz ${res.status}: ${(await res.text()).slice(0, 200)}`;
      } catch (err) {
        why = (err as Error).message;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    proc.kill('SIGKILL');
    throw new Error(`nats-server in ${this.#host} not ready within ${this.#readyTimeoutMs}ms: ${why}`);
  }

  stop(): Promise<void> {
    return this.#serial(() => this.#terminate('SIGTERM'));
  }
  kill(): Promise<void> {
    return this.#serial(() => this.#terminate('SIGKILL'));
  }
  freeze(): Promise<void> {
    return this.#serial(async () => {
      const pid = this.pid;
      if (pid === undefined) return;
      this.#proc!.kill('SIGSTOP');
      await waitStopped(pid);
    });
  }
  thaw(): Promise<void> {
    return this.#serial(async () => {
      if (this.pid !== undefined) this.#proc!.kill('SIGCONT');
    });
  }
  restart(): Promise<void> {
    return this.#serial(async () => {
      if (this.#disposed) throw new Error(`nats-server in ${this.#host} was cleaned up; it cannot restart`);
      await this.#terminate('SIGTERM');
      await this.start();
    });
  }
  cleanup(): Promise<void> {
    return this.#serial(async () => {
      this.#disposed = true;
      await this.#terminate('SIGTERM');
    });
  }

  async #terminate(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const proc = this.#proc;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGCONT');
    proc.kill(signal);
    const timer = signal === 'SIGTERM' ? setTimeout(() => proc.kill('SIGKILL'), 5_000) : undefined;
    await exited;
    clearTimeout(timer);
  }

  #serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(op, op);
    this.#queue = next.catch(() => undefined);
    return next;
  }
}

/** '' when the node's JetStream API answers (account info), else why not. */
async function jetStreamAnswers(url: string): Promise<string> {
  let nc;
  try {
    nc = await connect({ servers: [url], timeout: 1_000, reconnect: false });
    const jsm = await jetstreamManager(nc, { timeout: 1_500 });
    await jsm.getAccountInfo();
    return '';
  } catch (err) {
    return `JetStream API: ${(err as Error).message}`;
  } finally {
    await nc?.close().catch(() => undefined);
  }
}

/** Until every node names the same meta leader and that leader sees every peer current (an R3 stream can be placed). */
async function waitForMetaGroup(nodes: readonly HostNode[], timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  let why = '';
  while (Date.now() < until) {
    try {
      const views = await Promise.all(
        nodes.map(async (n) => {
          const res = await fetch(`http://${new URL(n.url).hostname}:${MONITOR_PORT}/jsz`, { signal: AbortSignal.timeout(1_000) });
          return ((await res.json()) as { meta_cluster?: { leader?: string; cluster_size?: number; replicas?: Array<{ current?: boolean; offline?: boolean }> } }).meta_cluster;
        }),
      );
      const leaders = new Set(views.map((v) => v?.leader));
      const leaderView = views.find((v) => (v?.replicas?.length ?? -1) >= nodes.length - 1 && v?.replicas?.every((r) => r.current === true && r.offline !== true));
      if (leaders.size === 1 && !leaders.has(undefined) && leaderView !== undefined) return;
      why = `leaders ${[...leaders].join(', ')}; replicas current: ${views.map((v) => v?.replicas?.filter((r) => r.current).length ?? 0).join('/')}`;
    } catch (err) {
      why = (err as Error).message;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`the cluster on hosts formed no complete meta group within ${timeoutMs}ms: ${why}`);
}

/** Until /proc says stopped ('T'), 2 s at most. */
async function waitStopped(pid: number): Promise<void> {
  const until = Date.now() + 2_000;
  while (Date.now() < until) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    if (stat === '' || stat.slice(stat.lastIndexOf(')') + 2).startsWith('T')) return;
    await new Promise((r) => setTimeout(r, 5));
  }
}
