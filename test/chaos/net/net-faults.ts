/**
 * The fault kinds of `--net hosts` (faults.ts plans them with the others;
 * this runs them). Each is bounded by its planned time and healed in a
 * `finally`, also on an abort or an error; its parameters come from the
 * plan's seeded `target`, so a seed repeats them.
 *
 * | kind | what it does |
 * |---|---|
 * | `net_latency` | every proxied link (routes, gateways and log services to NATS, gateways to upstreams): 1-2 ms + 1-3 ms jitter each way (1-5 ms), one time in three a 1-4 MB/s cap |
 * | `link_loss_dup` | one link (gateway–node or node–node): 5-25% loss and 5-20% duplication each way (nft) |
 * | `nats_node_isolated` | a node partitioned from both peers and from one gateway; the two other gateways still reach it |
 * | `gateway_nats_partition` | a gateway partitioned from every node; clients (the balancer) and its upstreams still reach it |
 * | `gateway_upstream_partition` | a gateway partitioned from the upstreams' host |
 * | `net_asymmetric` | one-way: a node's packets dropped at its peers, or a gateway's at every node; the other way flows |
 * | `partition_heal_resume` | a gateway partitioned from NATS; at the end the balancer cuts every client connection and the partition heals 0-300 ms later, while the clients resume |
 * | `link_stall` | one-way stall in the link proxies: a node's outgoing route traffic, or a gateway's traffic to NATS (or back) |
 * | `route_reset` | every route connection of a node reset, new ones refused for the planned time |
 *
 * With `--log grpc` the NATS-side kinds (all but `gateway_upstream_partition`)
 * hit the session-log services (`log1`, `log2`) where they say gateway: those
 * hold the NATS connections there.
 */
import type { ChaosStack } from '../stack.js';
import { createRng } from '../../shared/random.js';
import { sleep } from '../util.js';
import type { NetFault } from './nft.js';
import type { NetHandles } from './placement.js';
import { UPSTREAM_HOST } from './placement.js';
import { routeLink } from './nats-hosts.js';

export const NET_KINDS = ['net_latency', 'link_loss_dup', 'nats_node_isolated', 'gateway_nats_partition', 'gateway_upstream_partition', 'net_asymmetric', 'partition_heal_resume', 'link_stall', 'route_reset'] as const;
export type NetKind = (typeof NET_KINDS)[number];

export function isNetKind(kind: string): kind is NetKind {
  return (NET_KINDS as readonly string[]).includes(kind);
}

/** Runs one; resolves with what it hit and a detail line. */
export async function executeNetFault(kind: NetKind, target: number, downMs: number, stack: ChaosStack, signal: AbortSignal): Promise<{ target: string; detail: string }> {
  const net = stack.net;
  if (net === undefined) throw new Error(`${kind} needs --net hosts`);
  const rng = createRng(target);
  const gateways = stack.gateways.map((g) => g.name);
  // The processes that hold the NATS connections: the gateways, or with --log grpc the session-log services.
  const clients = stack.natsClients.length > 0 ? stack.natsClients.map((c) => c.name) : gateways;
  const nats = [...net.natsHosts];
  const gw = clients[target % clients.length]!;
  const upstreamSide = gateways[target % gateways.length]!;
  const node = target % nats.length;
  const peers = nats.filter((_, k) => k !== node);
  const began = Date.now();
  const held = (): string => `${Date.now() - began}ms (planned ${downMs}ms)`;

  /** Applies nft faults, holds them for the planned time, heals them whatever happens. */
  const hold = async (apply: () => Promise<NetFault[]>, before?: () => Promise<string>): Promise<string> => {
    const applied: NetFault[] = [];
    let note = '';
    try {
      applied.push(...(await apply()));
      await sleep(downMs, signal);
      if (before !== undefined) note = await before();
    } finally {
      const errors = (await Promise.all(applied.map((f) => f.heal()))).flat();
      if (errors.length > 0) note += ` heal errors: ${errors.join('; ')}`;
    }
    return `${applied.map((f) => f.describe).join(' + ')} for ${held()}${note}`;
  };

  switch (kind) {
    case 'net_latency': {
      const delayMs = rng.int(1, 2);
      const jitterMs = rng.int(1, 3);
      const bytesPerSec = rng.chance(1 / 3) ? rng.int(1, 4) * 1_000_000 : 0;
      const proxies = [...net.proxies.values()];
      try {
        await Promise.all(proxies.map((p) => p.shape({ delayMs, jitterMs, bytesPerSec })));
        await sleep(downMs, signal);
      } finally {
        await Promise.all(proxies.map((p) => p.shape({ delayMs: 0, jitterMs: 0, bytesPerSec: 0 }).catch(() => undefined)));
      }
      return { target: 'every link', detail: `${delayMs} ms + up to ${jitterMs} ms jitter each way${bytesPerSec > 0 ? `, ${bytesPerSec / 1e6} MB/s` : ''} on ${proxies.length} hosts' links for ${held()}` };
    }
    case 'link_loss_dup': {
      const [a, b] = rng.chance(0.5) ? [gw, nats[node]!] : [nats[node]!, peers[rng.int(0, peers.length - 1)]!];
      const loss = rng.int(5, 25);
      const dup = rng.int(5, 20);
      return { target: `${a}-${b}`, detail: await hold(async () => [await net.faults.loss(a, b, loss), await net.faults.duplicate(a, b, dup)]) };
    }
    case 'nats_node_isolated': {
      const cutGateway = clients[Math.floor(target / nats.length) % clients.length]!;
      const reach = clients.filter((g) => g !== cutGateway);
      const detail = await hold(async () => [await net.faults.partition([nats[node]!], [...peers, cutGateway])]);
      return { target: nats[node]!, detail: `${detail}; still reachable by ${reach.join(', ')}` };
    }
    case 'gateway_nats_partition':
      return { target: gw, detail: await hold(async () => [await net.faults.partition([gw], nats)]) };
    case 'gateway_upstream_partition':
      return { target: upstreamSide, detail: await hold(async () => [await net.faults.partition([upstreamSide], [UPSTREAM_HOST])]) };
    case 'net_asymmetric': {
      if (rng.chance(0.5)) {
        return { target: nats[node]!, detail: await hold(async () => [await net.faults.oneWay([nats[node]!], peers)]) };
      }
      return { target: gw, detail: await hold(async () => [await net.faults.oneWay([gw], nats)]) };
    }
    case 'partition_heal_resume': {
      const lagMs = rng.int(0, 300);
      const detail = await hold(
        async () => [await net.faults.partition([gw], nats)],
        async () => {
          const cut = stack.proxy.cutAll();
          await sleep(lagMs);
          return `; the balancer cut ${cut} requests ${lagMs}ms before the heal`;
        },
      );
      return { target: gw, detail };
    }
    case 'link_stall':
      return stall(net, rng.chance(0.5) ? { kind: 'route', node, nats } : { kind: 'gateway', gw, way: rng.chance(0.5) ? 'up' : 'down' }, downMs, signal, held);
    case 'route_reset': {
      const links = routeLinksOf(net, node, nats);
      let n = 0;
      for (const { proxy, names } of links) n += await proxy.reset(downMs, names);
      await sleep(downMs, signal);
      return { target: nats[node]!, detail: `${n} route connections reset, new ones refused for ${held()}` };
    }
  }
}

/** Every proxy link that carries node `node`'s routes: all of its own proxy's, and `route<node>` in the others'. */
function routeLinksOf(net: NetHandles, node: number, nats: readonly string[]): Array<{ proxy: NonNullable<ReturnType<NetHandles['proxies']['get']>>; names: string[] | undefined; own: boolean }> {
  const out: Array<{ proxy: NonNullable<ReturnType<NetHandles['proxies']['get']>>; names: string[] | undefined; own: boolean }> = [];
  for (const [k, host] of nats.entries()) {
    const proxy = net.cluster.routeProxies.get(host);
    if (proxy === undefined) continue;
    out.push(k === node ? { proxy, names: undefined, own: true } : { proxy, names: [routeLink(node)], own: false });
  }
  return out;
}

async function stall(
  net: NetHandles,
  what: { kind: 'route'; node: number; nats: readonly string[] } | { kind: 'gateway'; gw: string; way: 'up' | 'down' },
  downMs: number,
  signal: AbortSignal,
  held: () => string,
): Promise<{ target: string; detail: string }> {
  // What a node sends on its routes: `up` on the connections it dialed, `down` on those its peers dialed.
  const parts =
    what.kind === 'route'
      ? routeLinksOf(net, what.node, what.nats).map((l) => ({ proxy: l.proxy, names: l.names, way: l.own ? ('up' as const) : ('down' as const) }))
      : [{ proxy: net.proxies.get(what.gw)!, names: [...net.natsHosts], way: what.way }];
  try {
    for (const p of parts) await p.proxy.shape({ stall: p.way }, p.names);
    await sleep(downMs, signal);
  } finally {
    for (const p of parts) await p.proxy.shape({ stall: 'none' }, p.names).catch(() => undefined);
  }
  if (what.kind === 'route') return { target: what.nats[what.node]!, detail: `its outgoing route traffic stalled (incoming flows) for ${held()}` };
  return { target: what.gw, detail: `${what.way === 'up' ? 'its traffic to NATS' : "NATS's traffic to it"} stalled (the other way flows) for ${held()}` };
}
