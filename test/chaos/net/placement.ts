/**
 * Where the chaos stack's processes run with `--net hosts`, and how they
 * reach each other. `stack.ts` asks this at each place it would otherwise
 * use loopback; without `--net` there is no placement and nothing changes.
 *
 *   host clients  (the harness: clients, balancer, log tap, checker, task upstream)
 *   hosts nats1-3 (a node each; routes through each host's link proxy)
 *   hosts gw1-3   (a gateway each, any generation; its link proxy: nats1-3, the upstreams, the task upstream)
 *   hosts log1-2  (--log grpc: a session-log service each; its link proxy: nats1-3)
 *   host  up      (both test upstreams, on its loopback; an inbound forwarder from its address)
 *
 * A gateway dials only its own loopback (`127.0.0.1:4301-4303` for NATS,
 * the upstreams' and task upstream's own port numbers for them), and its
 * host's link proxy carries that to the other hosts, from the gateway
 * host's address: latency, stalls and resets go on that proxy, partitions
 * are nft rules on the addresses. The upstreams listen on loopback (the
 * test kit's SDK servers refuse a Host header that is not a loopback name),
 * so `up` forwards its address's ports to them, and a gateway's upstream URL
 * stays `http://127.0.0.1:<port>/mcp` in its own host.
 */
import type { NatsNodes } from '@tether/testing';
import type { NatsProxy } from '../nats-proxy.js';
import type { HostNetwork } from './hosts.js';
import { startHostLinkProxy } from './link-proxy-host.js';
import type { HostLinkProxy } from './link-proxy-host.js';
import { startLinkProxy } from './link-proxy.js';
import type { LinkProxy, LinkSpec } from './link-proxy.js';
import { CLIENT_PORT, startHostsCluster } from './nats-hosts.js';
import type { HostsCluster } from './nats-hosts.js';
import { createNetFaults } from './nft.js';
import type { NetFaults } from './nft.js';

export const CLIENTS_HOST = 'clients';
export const UPSTREAM_HOST = 'up';
export const NATS_HOSTS = ['nats1', 'nats2', 'nats3'] as const;
const NATS_PROXY_BASE = 4300;

/** The hosts a run needs: `gateways` names the instances behind the balancer, `logServices` the session-log services. */
export function hostsFor(gateways: readonly string[], logServices: readonly string[]): { hosts: string[]; octets: Record<string, number> } {
  const hosts = [CLIENTS_HOST, ...NATS_HOSTS, ...gateways, ...logServices, UPSTREAM_HOST];
  const octets: Record<string, number> = { [CLIENTS_HOST]: 2, [UPSTREAM_HOST]: 41 };
  NATS_HOSTS.forEach((h, i) => (octets[h] = 11 + i));
  gateways.forEach((h, i) => (octets[h] = 21 + i));
  logServices.forEach((h, i) => (octets[h] = 31 + i));
  return { hosts, octets };
}

/** What the net faults work on. */
export interface NetHandles {
  readonly net: HostNetwork;
  readonly faults: NetFaults;
  readonly natsHosts: readonly string[];
  /** Hosts with a link proxy whose links the latency fault shapes (NATS nodes, gateways, log services). */
  readonly proxies: ReadonlyMap<string, HostLinkProxy>;
  readonly cluster: HostsCluster;
}

export interface Placement {
  readonly net: HostNetwork;
  readonly handles: () => NetHandles;
  startCluster(bin: string, configLines: readonly string[]): Promise<NatsNodes>;
  wrap(host: string, command: string, args: readonly string[]): { command: string; args: string[] };
  address(host: string): string;
  /** An upstream listens on `port` of host `up`'s loopback: forward `up`'s address's `port` to it (once per port). */
  exposeUpstream(name: string, port: number): Promise<void>;
  /**
   * The link proxy of a host whose process dials NATS (and, for a gateway,
   * the upstreams and the task upstream): started once, kept across the
   * process's restarts. Returns its NATS URLs and a handle for `gateway_nats_cut`.
   */
  prepareHost(host: string, withUpstreams: boolean): Promise<{ natsUrls: string; proxy: NatsProxy }>;
  close(): Promise<void>;
}

export async function createPlacement(net: HostNetwork, taskUpstreamUrl: string | undefined, seed: number): Promise<Placement> {
  const proxies = new Map<string, HostLinkProxy>();
  const upstreamPorts = new Map<string, number>();
  let upForwarder: HostLinkProxy | undefined;
  let cluster: HostsCluster | undefined;
  const faults = createNetFaults(net);
  const address = (host: string): string => net.host(host).address;
  // The task upstream runs in the harness (host `clients`) on its loopback: its port forwarded from the clients host's address.
  let taskForwarder: LinkProxy | undefined;
  const taskPort = taskUpstreamUrl === undefined ? undefined : Number(new URL(taskUpstreamUrl).port);
  if (taskPort !== undefined) {
    taskForwarder = await startLinkProxy([{ name: 'task', listenHost: address(CLIENTS_HOST), listenPort: taskPort, targetHost: '127.0.0.1', targetPort: taskPort }], seed);
  }
  let hostSeed = seed * 97;

  return {
    net,
    handles: () => {
      if (cluster === undefined) throw new Error('the cluster on hosts has not started');
      const all = new Map<string, HostLinkProxy>([...cluster.routeProxies, ...proxies]);
      return { net, faults, natsHosts: NATS_HOSTS, proxies: all, cluster };
    },
    async startCluster(bin, configLines) {
      cluster = await startHostsCluster({ net, hosts: NATS_HOSTS, bin, configLines, seed, readyTimeoutMs: 30_000 });
      return cluster;
    },
    wrap: (host, command, args) => net.wrap(host, command, args),
    address,
    async exposeUpstream(name, port) {
      if (upstreamPorts.get(name) === port) return;
      upstreamPorts.set(name, port);
      // One forwarder for every upstream port, restarted when a new one appears (only at the start: a restarted upstream keeps its port).
      await upForwarder?.close();
      const links: LinkSpec[] = [...upstreamPorts].map(([n, p]) => ({ name: n, listenHost: address(UPSTREAM_HOST), listenPort: p, targetHost: '127.0.0.1', targetPort: p }));
      upForwarder = await startHostLinkProxy(net, UPSTREAM_HOST, links, seed * 13);
    },
    async prepareHost(host, withUpstreams) {
      let proxy = proxies.get(host);
      if (proxy === undefined) {
        const links: LinkSpec[] = NATS_HOSTS.map((h, k) => ({ name: h, listenHost: '127.0.0.1', listenPort: NATS_PROXY_BASE + k + 1, targetHost: address(h), targetPort: CLIENT_PORT }));
        if (withUpstreams) {
          for (const [name, port] of upstreamPorts) links.push({ name: `up-${name}`, listenHost: '127.0.0.1', listenPort: port, targetHost: address(UPSTREAM_HOST), targetPort: port });
          if (taskPort !== undefined) links.push({ name: 'task', listenHost: '127.0.0.1', listenPort: taskPort, targetHost: address(CLIENTS_HOST), targetPort: taskPort });
        }
        proxy = await startHostLinkProxy(net, host, links, (hostSeed += 1));
        proxies.set(host, proxy);
      }
      return { natsUrls: NATS_HOSTS.map((_, k) => `nats://127.0.0.1:${NATS_PROXY_BASE + k + 1}`).join(','), proxy: natsCutHandle(proxy, NATS_HOSTS.map((h) => h)) };
    },
    async close() {
      await faults.healAll();
      await Promise.all([...proxies.values(), ...(upForwarder === undefined ? [] : [upForwarder])].map((p) => p.close().catch(() => undefined)));
      await taskForwarder?.close();
    },
  };
}

/**
 * `gateway_nats_cut`'s view of a host's NATS links (`NatsProxy`): freeze
 * stalls them both ways, reset destroys and refuses. The commands go to the
 * host's proxy process in order; the counters are those of its last answer.
 */
function natsCutHandle(proxy: HostLinkProxy, links: readonly string[]): NatsProxy {
  let frozen = false;
  const stats = { connections: 0, toServer: 0, toClient: 0, resets: 0, refused: 0 };
  let open = 0;
  const refresh = (): void => {
    proxy
      .stats()
      .then((all) => {
        stats.connections = stats.toServer = stats.toClient = stats.refused = 0;
        open = 0;
        for (const l of links) {
          const s = all[l];
          if (s === undefined) continue;
          stats.connections += s.connections;
          stats.toServer += s.up;
          stats.toClient += s.down;
          stats.refused += s.refused;
          open += s.open;
        }
      })
      .catch(() => undefined);
  };
  const timer = setInterval(refresh, 2_000);
  timer.unref();
  return {
    urls: links.map((_, k) => `nats://127.0.0.1:${NATS_PROXY_BASE + k + 1}`),
    stats,
    get frozen() {
      return frozen;
    },
    get open() {
      return open;
    },
    freeze() {
      frozen = true;
      void proxy.shape({ stall: 'both' }, links).catch(() => undefined);
    },
    thaw() {
      frozen = false;
      void proxy.shape({ stall: 'none' }, links).catch(() => undefined);
    },
    reset(refuseMs = 0) {
      stats.resets += 1;
      const n = open;
      void proxy.reset(refuseMs, links).then(refresh, () => undefined);
      return n;
    },
    async close() {
      clearInterval(timer);
    },
  };
}
