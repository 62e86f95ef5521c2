import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRoundRobinProxy } from '@tether/testing';
import type { RoundRobinProxy } from '@tether/testing';
import { connectClient, startFleet, whenTrue } from './router-fixtures.js';
import type { Fleet, Instance, SdkMajor } from './router-fixtures.js';

// Sessions served by any instance (issue 13, item 2): three SDK server
// instances behind a balancer that sends every request to the next one, the
// official SDK client of each major version on the other end.

let fleet: Fleet;
beforeAll(async () => {
  fleet = await startFleet();
});
afterAll(async () => {
  await fleet?.teardown();
});

const ALICE = 'Bearer alice';

async function behindProxy(major: SdkMajor, count = 3): Promise<{ instances: Instance[]; proxy: RoundRobinProxy; url: string }> {
  const instances = await fleet.start(major, count);
  const proxy = await startRoundRobinProxy(instances.map((i) => i.url));
  return { instances, proxy, url: `${proxy.url}/mcp` };
}

describe.each(['v1', 'v2'] as const)('SDK %s fleet', (major) => {
  it('initializes on one instance and calls tools on the others', async () => {
    const { proxy, url } = await behindProxy(major);
    const client = await connectClient(major, url, ALICE);
    try {
      for (let i = 0; i < 4; i += 1) expect(await client.ping()).toBe('pong');
      const targets = new Set(proxy.history().filter((r) => r.method === 'POST').map((r) => r.target));
      expect(targets.size).toBe(3);
    } finally {
      await client.close();
      await proxy.close();
    }
  });

  it('a stream of 300 progress notifications, cut 3 times, resumed on other instances: every notification once, in order, then the result', async () => {
    const { proxy, url } = await behindProxy(major);
    const client = await connectClient(major, url, ALICE);
    const total = 300;
    const seen: number[] = [];
    const cuts = [60, 140, 220];
    let cut = 0;
    try {
      const result = client.callStream(total, 2, (progress) => {
        seen.push(progress);
        if (cut < cuts.length && progress >= cuts[cut]!) {
          cut += 1;
          proxy.cutAll();
        }
      });
      expect(await result).toBe(`streamed ${total}`);
      expect(cut).toBe(cuts.length);
      expect(seen).toEqual(Array.from({ length: total }, (_, i) => i + 1));
      // The POST went to one instance; resumes (GET with Last-Event-ID) were served by others.
      const history = proxy.history();
      const postTarget = history.filter((r) => r.method === 'POST').at(-1)?.target;
      const resumeTargets = history.filter((r) => r.method === 'GET' && r.lastEventId !== undefined && !r.lastEventId.includes('-0-')).map((r) => r.target);
      expect(resumeTargets.length).toBeGreaterThanOrEqual(cuts.length);
      expect(resumeTargets.some((t) => t !== postTarget)).toBe(true);
    } finally {
      await client.close();
      await proxy.close();
    }
  });

  it('the instance producing a stream dies: the resumed client gets an explicit error, after a gap-free prefix', async () => {
    const { instances, proxy, url } = await behindProxy(major);
    const client = await connectClient(major, url, ALICE);
    const seen: number[] = [];
    const started = whenTrue(() => seen.length >= 10);
    try {
      const result = client.callStream(1_000, 10, (progress) => {
        seen.push(progress);
        started.poke();
      });
      result.catch(() => undefined);
      await started.reached;
      const producer = proxy.history().filter((r) => r.method === 'POST').at(-1)?.target;
      const victim = instances.find((i) => i.url === producer);
      expect(victim).toBeDefined();
      proxy.markDown(victim!.url);
      await victim!.kill();
      await expect(result).rejects.toThrow(/stopped before it finished/);
      expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i + 1));
      expect(seen.length).toBeLessThan(1_000);
    } finally {
      await client.close();
      await proxy.close();
    }
  });
});
