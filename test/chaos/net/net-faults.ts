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
import { roleOf } from '../faults.js';
import type { ChaosStack } from '../stack.js';
import { createRng } from '../../shared/random.js';
import { sleep } from '../util.js';
import type { NetFault } from './nft.js';
import type { NetHandles } from './placement.js';
import { UPSTREAM_HOST } from './placement.js';
import { routeLink } from './nats-hosts.js';
import type { HostLinkProxy } from './link-proxy-host.js';

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

  /**
   * Applies nft faults, holds them for the planned time, heals them
   * whatever happens. When nft refuses (the error is kept in the detail),
   * `closest` makes the nearest fault the link proxies can: stalls.
   */
  const hold = async (apply: () => Promise<NetFault[]>, options: { before?: () => Promise<string>; closest?: Stalls } = {}): Promise<string> => {
    const applied: NetFault[] = [];
    let note = '';
    let instead: { describe: string; undo: () => Promise<void> } | undefined;
    try {
      try {
        for (const f of await apply()) applied.push(f);
      } catch (err) {
        if (options.closest === undefined) throw err;
        note = `; nft refused (${(err as Error).message.split('\n')[0]}), made instead: ${options.closest.describe}`;
        instead = { describe: options.closest.describe, undo: await applyStalls(options.closest) };
      }
      await sleep(downMs, signal);
      if (options.before !== undefined) note += await options.before();
    } finally {
      const errors = (await Promise.all(applied.map((f) => f.heal()))).flat();
      await instead?.undo();
      if (errors.length > 0) note += ` heal errors: ${errors.join('; ')}`;
    }
    return `${applied.length === 0 ? (instead?.describe ?? 'nothing') : applied.map((f) => f.describe).join(' + ')} for ${held()}${note}`;
  };
  const gwNats = (host: string, way: Stall): Stalls => ({ describe: `${host}'s links to NATS stalled ${way === 'both' ? 'both ways' : `one way (${way})`}`, parts: [{ proxy: net.proxies.get(host)!, names: [...nats], way }] });

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
      let dupRefused = '';
      const detail = await hold(async () => {
        const made = [await net.faults.loss(a, b, loss)];
        try {
          made.push(await net.faults.duplicate(a, b, dup));
        } catch (err) {
          // The closest: the loss alone.
          dupRefused = `; duplication refused by nft (${(err as Error).message.split('\n')[0]}), loss only`;
        }
        return made;
      });
      return { target: `${a}-${b}`, detail: `${detail}${dupRefused}` };
    }
    case 'nats_node_isolated': {
      const cutGateway = clients[Math.floor(target / nats.length) % clients.length]!;
      const reach = clients.filter((g) => g !== cutGateway);
      const closest: Stalls = {
        describe: `${nats[node]}'s routes and ${cutGateway}'s link to it stalled both ways`,
        parts: [...routeStallParts(net, node, nats, 'both'), { proxy: net.proxies.get(cutGateway)!, names: [nats[node]!], way: 'both' }],
      };
      // Its roles (meta leader, stream leaders) before and at the end, read from the clients host, which it still reaches.
      const before = await roleOf(stack.cluster, node, stack.streamNames);
      const detail = await hold(async () => [await net.faults.partition([nats[node]!], [...peers, cutGateway])], {
        closest,
        before: async () => `; its roles: ${before} before, ${await roleOf(stack.cluster, node, stack.streamNames)} at the heal`,
      });
      return { target: nats[node]!, detail: `${detail}; still reachable by ${reach.join(', ')}` };
    }
    case 'gateway_nats_partition':
      return { target: gw, detail: await hold(async () => [await net.faults.partition([gw], nats)], { closest: gwNats(gw, 'both') }) };
    case 'gateway_upstream_partition': {
      const proxy = net.proxies.get(upstreamSide)!;
      const links = Object.keys(proxy.ports).filter((l) => l.startsWith('up-'));
      const closest: Stalls = { describe: `${upstreamSide}'s links to the upstreams stalled both ways`, parts: [{ proxy, names: links, way: 'both' }] };
      return { target: upstreamSide, detail: await hold(async () => [await net.faults.partition([upstreamSide], [UPSTREAM_HOST])], { closest }) };
    }
    case 'net_asymmetric': {
      if (rng.chance(0.5)) {
        const closest: Stalls = { describe: `${nats[node]}'s outgoing route traffic stalled`, parts: routeStallParts(net, node, nats, 'out') };
        return { target: nats[node]!, detail: await hold(async () => [await net.faults.oneWay([nats[node]!], peers)], { closest }) };
      }
      return { target: gw, detail: await hold(async () => [await net.faults.oneWay([gw], nats)], { closest: gwNats(gw, 'up') }) };
    }
    case 'partition_heal_resume': {
      const lagMs = rng.int(0, 300);
      const detail = await hold(async () => [await net.faults.partition([gw], nats)], {
        closest: gwNats(gw, 'both'),
        before: async () => {
          const cut = stack.proxy.cutAll();
          await sleep(lagMs);
          return `; the balancer cut ${cut} requests ${lagMs}ms before the heal`;
        },
      });
      return { target: gw, detail };
    }
    case 'link_stall': {
      const onRoutes = rng.chance(0.5);
      const towardsNats = rng.chance(0.5);
      const what: Stalls = onRoutes
        ? { describe: `${nats[node]}'s outgoing route traffic stalled (incoming flows)`, parts: routeStallParts(net, node, nats, 'out') }
        : towardsNats
          ? { describe: `${gw}'s traffic to NATS stalled (the other way flows)`, parts: gwNats(gw, 'up').parts }
          : { describe: `NATS's traffic to ${gw} stalled (the other way flows)`, parts: gwNats(gw, 'down').parts };
      const undo = await applyStalls(what);
      try {
        await sleep(downMs, signal);
      } finally {
        await undo();
      }
      return { target: onRoutes ? nats[node]! : gw, detail: `${what.describe} for ${held()}` };
    }
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
function routeLinksOf(net: NetHandles, node: number, nats: readonly string[]): Array<{ proxy: HostLinkProxy; names: string[] | undefined; own: boolean }> {
  const out: Array<{ proxy: HostLinkProxy; names: string[] | undefined; own: boolean }> = [];
  for (const [k, host] of nats.entries()) {
    const proxy = net.cluster.routeProxies.get(host);
    if (proxy === undefined) continue;
    out.push(k === node ? { proxy, names: undefined, own: true } : { proxy, names: [routeLink(node)], own: false });
  }
  return out;
}

type Stall = 'up' | 'down' | 'both';
interface Stalls {
  readonly describe: string;
  readonly parts: ReadonlyArray<{ readonly proxy: HostLinkProxy; readonly names: readonly string[] | undefined; readonly way: Stall }>;
}

/** Node `node`'s route links, stalled `out` (what it sends), or `both` ways. */
function routeStallParts(net: NetHandles, node: number, nats: readonly string[], way: 'out' | 'both'): Stalls['parts'] {
  // What a node sends on its routes: `up` on the connections it dialed, `down` on those its peers dialed.
  return routeLinksOf(net, node, nats).map((l) => ({ proxy: l.proxy, names: l.names, way: way === 'both' ? 'both' : l.own ? 'up' : 'down' }));
}

/** Applies the stalls; returns what lifts them (never throws). */
async function applyStalls(stalls: Stalls): Promise<() => Promise<void>> {
  const done: Stalls['parts'][number][] = [];
  const undo = async (): Promise<void> => {
    for (const p of done) await p.proxy.shape({ stall: 'none' }, p.names).catch(() => undefined);
  };
  try {
    for (const p of stalls.parts) {
      done.push(p);
      await p.proxy.shape({ stall: p.way }, p.names);
    }
  } catch (err) {
    await undo();
    throw err;
  }
  return undo;
}
