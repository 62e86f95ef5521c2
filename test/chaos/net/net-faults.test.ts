import { describe, expect, it } from 'vitest';
import type { ChaosStack } from '../stack.js';
import { NetError, NetErrorCode } from './hosts.js';
import type { HostLinkProxy } from './link-proxy-host.js';
import type { LinkShape } from './link-proxy.js';
import { executeNetFault } from './net-faults.js';
import type { NetFault, NetFaults } from './nft.js';
import type { NetHandles } from './placement.js';

// The network faults against fakes: what they ask of nft and of the link
// proxies, that every one heals, and that an nft refusal is reported and
// the closest fault made instead (stalls in the link proxies).

function fakeProxy(host: string, links: string[], log: string[]): HostLinkProxy {
  return {
    host,
    ports: Object.fromEntries(links.map((l, i) => [l, 4000 + i])),
    pid: 1,
    async shape(shape: Partial<LinkShape>, names?: readonly string[]) {
      log.push(`${host} ${JSON.stringify(shape)} ${names?.join(',') ?? '*'}`);
    },
    async clear() {},
    async reset(_ms: number, names?: readonly string[]) {
      log.push(`${host} reset ${names?.join(',') ?? '*'}`);
      return 2;
    },
    async stats() {
      return {};
    },
    async close() {},
  };
}

function fakeStack(refuse: boolean): { stack: ChaosStack; log: string[]; faults: { active: number } } {
  const log: string[] = [];
  const counter = { active: 0 };
  const fault = (describe: string): NetFault => {
    counter.active += 1;
    let healed = false;
    return {
      describe,
      rules: [],
      async heal() {
        if (!healed) counter.active -= 1;
        healed = true;
        log.push(`heal ${describe}`);
        return [];
      },
    };
  };
  const nft = async (describe: string): Promise<NetFault> => {
    if (refuse) throw new NetError(NetErrorCode.CommandFailed, '`nft add rule` failed: Operation not permitted');
    log.push(`nft ${describe}`);
    return fault(describe);
  };
  const faults: NetFaults = {
    partition: (a, b) => nft(`partition ${a.join(',')} | ${b.join(',')}`),
    oneWay: (a, b) => nft(`one-way ${a.join(',')} -> ${b.join(',')}`),
    loss: (a, b, p) => nft(`loss ${p}% ${a} ${b}`),
    duplicate: (a, b, p) => nft(`dup ${p}% ${a} ${b}`),
    healAll: async () => [],
    active: [],
  };
  const nats = ['nats1', 'nats2', 'nats3'];
  const routeProxies = new Map(nats.map((h, i) => [h, fakeProxy(h, nats.filter((_, k) => k !== i).map((_, k) => `route${k + 1}`), log)]));
  const proxies = new Map<string, HostLinkProxy>([...routeProxies, ...['gw1', 'gw2', 'gw3'].map((g) => [g, fakeProxy(g, [...nats, 'up-store', 'up-plain'], log)] as const)]);
  const net = { net: undefined, faults, natsHosts: nats, proxies, cluster: { routeProxies } } as unknown as NetHandles;
  const stack = {
    net,
    gateways: ['gw1', 'gw2', 'gw3'].map((name, slot) => ({ slot, name })),
    natsClients: ['gw1', 'gw2', 'gw3'].map((name) => ({ name })),
    proxy: { cutAll: () => 3 },
  } as unknown as ChaosStack;
  return { stack, log, faults: counter };
}

const never = new AbortController().signal;

describe('chaos network faults (against fakes)', () => {
  it('a gateway partition is an nft partition from every node, healed after its time', async () => {
    const { stack, log, faults } = fakeStack(false);
    const done = await executeNetFault('gateway_nats_partition', 4, 20, stack, never);
    expect(done.target).toBe('gw2');
    expect(log).toEqual(['nft partition gw2 | nats1,nats2,nats3', 'heal partition gw2 | nats1,nats2,nats3']);
    expect(faults.active).toBe(0);
  });

  it('an nft refusal is reported with its error, and the closest fault is made in the link proxies, then lifted', async () => {
    const { stack, log } = fakeStack(true);
    const done = await executeNetFault('gateway_nats_partition', 4, 20, stack, never);
    expect(done.detail).toMatch(/nft refused \(`nft add rule` failed: Operation not permitted\), made instead: gw2's links to NATS stalled both ways/);
    expect(log).toEqual(['gw2 {"stall":"both"} nats1,nats2,nats3', 'gw2 {"stall":"none"} nats1,nats2,nats3']);
  });

  it('a partition that heals while clients resume cuts the balancer just before the heal', async () => {
    const { stack, log } = fakeStack(false);
    const done = await executeNetFault('partition_heal_resume', 1, 20, stack, never);
    expect(done.detail).toMatch(/the balancer cut 3 requests \d+ms before the heal/);
    expect(log.at(-1)).toMatch(/^heal partition/);
  });

  it('latency goes on every host proxy and comes off again', async () => {
    const { stack, log } = fakeStack(false);
    await executeNetFault('net_latency', 9, 20, stack, never);
    expect(log.filter((l) => l.includes('"delayMs":0'))).toHaveLength(6);
    expect(log.filter((l) => /"delayMs":[12],/.test(l))).toHaveLength(6);
  });

  it("a route reset resets every link carrying the node's routes", async () => {
    const { stack, log } = fakeStack(false);
    const done = await executeNetFault('route_reset', 1, 20, stack, never);
    expect(done.target).toBe('nats2');
    expect(log.sort()).toEqual(['nats1 reset route2', 'nats2 reset *', 'nats3 reset route2']);
  });
});
