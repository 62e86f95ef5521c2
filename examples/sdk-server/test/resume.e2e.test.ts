import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { connectClient } from './clients.js';
import type { TestClient } from './clients.js';
import { startFleet, upTo, whenTrue } from './fleet.js';
import type { Fleet } from './fleet.js';

// Real processes end to end (issue 13, "Tests: real processes"): a real
// nats-server, three `tether-sdk-example` processes that know each other
// only through it, the round-robin balancer, and the official SDK client of
// each major version.

let nats: NatsServer;
const open: { fleet: Fleet; client?: TestClient }[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
});
afterEach(async () => {
  for (const { fleet, client } of open.splice(0)) {
    await client?.close().catch(() => undefined);
    await fleet.close();
  }
});
afterAll(async () => {
  await nats?.cleanup();
});

const ALICE = 'Bearer alice';

async function fleetAndClient(major: 'v1' | 'v2', tag: string): Promise<{ fleet: Fleet; client: TestClient }> {
  const fleet = await startFleet(nats, 3, tag);
  const entry: { fleet: Fleet; client?: TestClient } = { fleet };
  open.push(entry);
  const client = await connectClient(major, fleet.url, { authorization: ALICE });
  entry.client = client;
  return { fleet, client };
}

describe.each(['v1', 'v2'] as const)('SDK %s client, three example processes', (major) => {
  it('500 progress notifications, the connection cut 4 times, every resume on another instance: each notification once, in order, then the result', async () => {
    const { fleet, client } = await fleetAndClient(major, `cut-${major}`);
    const total = 500;
    const cuts = [100, 200, 300, 400];
    const seen: number[] = [];
    let producer: string | undefined;
    let cut = 0;
    const result = await client.call('stream', { count: total, delayMs: 2 }, {
      onProgress: (progress) => {
        seen.push(progress);
        if (producer === undefined) {
          // The tools/call POST is the session's latest POST; from now on no request reaches its instance.
          producer = fleet.proxy.lastTargetOf((r) => r.method === 'POST');
          fleet.proxy.markDown(producer!);
        }
        if (cut < cuts.length && progress >= cuts[cut]!) {
          cut += 1;
          fleet.proxy.cutAll();
        }
      },
    });
    expect(result).toBe(`streamed ${total}`);
    expect(cut).toBe(cuts.length);
    expect(seen).toEqual(upTo(total));
    const resumes = fleet.proxy.history().filter((r) => r.method === 'GET' && r.lastEventId !== undefined && !r.lastEventId.includes('-0-'));
    expect(resumes.length).toBeGreaterThanOrEqual(cuts.length);
    expect(producer).toBeDefined();
    for (const resume of resumes) expect(resume.target).not.toBe(producer);
    expect(resumes.every((r) => r.status === 200)).toBe(true);
    // Log lines carry neither the session id nor payloads.
    for (const instance of fleet.instances) {
      const lines = [...instance.stdoutLines, ...instance.stderrLines].join('\n');
      expect(lines).not.toContain(client.sessionId!);
      expect(lines).not.toContain('notifications/progress');
    }
  });

  it('SIGKILL of the instance producing a stream: the resume ends with an explicit error after a gap-free prefix', async () => {
    const { fleet, client } = await fleetAndClient(major, `kill-${major}`);
    const seen: number[] = [];
    const started = whenTrue(() => seen.length >= 20);
    const result = client.call('stream', { count: 1_000, delayMs: 10 }, {
      onProgress: (progress) => {
        seen.push(progress);
        started.poke();
      },
    });
    result.catch(() => undefined);
    await started.reached;
    const producer = fleet.instanceAt(fleet.proxy.lastTargetOf((r) => r.method === 'POST'));
    await fleet.sigkill(producer);
    // The dead instance's requests are answered -32003 by the reader that found it gone.
    await expect(result).rejects.toThrow(/stopped before it finished/);
    expect(seen).toEqual(upTo(seen.length));
    expect(seen.length).toBeLessThan(1_000);
    const resumes = fleet.proxy.history().filter((r) => r.method === 'GET' && r.lastEventId !== undefined && !r.lastEventId.includes('-0-'));
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    for (const resume of resumes) expect(resume.target).not.toBe(fleet.targetOf(producer));
    // The session lives on: the next call is served by a survivor.
    expect(await client.call('ping', {})).toBe('pong');
  });
});
