import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { partitionOf } from '@tether/session-log';
import { ServiceProcessStartError, startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { connectClient } from './clients.js';
import { startFleet, startInstance, upTo } from './fleet.js';
import type { Fleet } from './fleet.js';

// Two `tether-sdk-example` processes on a session log of 4 partitions
// (`--log-partitions 4`): a stream produced by one instance is resumed by
// the other, for sessions in more than one partition; an instance started
// with another count refuses to start with the library's message.
const PARTITIONS = 4;

let nats: NatsServer;
let fleet: Fleet;
beforeAll(async () => {
  nats = await startNatsServer();
  fleet = await startFleet(nats, 2, 'parts', { args: ['--log-partitions', String(PARTITIONS)] });
});
afterAll(async () => {
  await fleet?.close();
  await nats?.cleanup();
});

describe(`the SDK example on a log of ${PARTITIONS} partitions`, () => {
  it('states the partition count in its listening line', () => {
    for (const instance of fleet.instances) expect(instance.readyJson).toMatchObject({ msg: 'listening', partitions: PARTITIONS });
  });

  it('a stream produced by one instance, cut twice, is resumed by the other: each notification once, in order', async () => {
    const held = new Set<number>();
    // 6 sessions over 4 partitions: all in one is 1 in 4^5.
    for (let i = 0; i < 6; i += 1) {
      for (const instance of fleet.instances) fleet.proxy.markUp(fleet.targetOf(instance));
      const client = await connectClient(i % 2 === 0 ? 'v1' : 'v2', fleet.url, { authorization: `Bearer parts-${i}` });
      try {
        const seen: number[] = [];
        let producer: string | undefined;
        let cut = 0;
        // 20 ms apart (1.2 s a stream): the second cut must find the stream still live. At 2 ms the
        // whole rest was produced while the client reconnected on a loaded machine, came back in one
        // replay, and the cut at 40 cut a finished answer: one resume, not two.
        const result = await client.call('stream', { count: 60, delayMs: 20 }, {
          onProgress: (progress) => {
            seen.push(progress);
            if (producer === undefined) {
              // From here on every request, the resumes included, goes to the other instance.
              producer = fleet.proxy.lastTargetOf((r) => r.method === 'POST');
              fleet.proxy.markDown(producer!);
            }
            if (cut < 2 && progress >= (cut + 1) * 20) {
              cut += 1;
              fleet.proxy.cutAll();
            }
          },
        });
        expect(result).toBe('streamed 60');
        expect(seen).toEqual(upTo(60));
        const resumes = fleet.proxy.history().filter((r) => r.method === 'GET' && r.sessionId === client.sessionId && r.lastEventId !== undefined && !r.lastEventId.includes('-0-'));
        expect(resumes.length).toBeGreaterThanOrEqual(2);
        for (const resume of resumes) {
          expect(resume.target).not.toBe(producer);
          expect(resume.status).toBe(200);
        }
        held.add(partitionOf(client.sessionId!, PARTITIONS));
      } finally {
        await client.close().catch(() => undefined);
      }
    }
    expect(held.size).toBeGreaterThan(1);
  });

  it("an instance with another count refuses to start with the library's message, naming both counts", async () => {
    let refusal: unknown;
    try {
      const instance = await startInstance(nats, 'parts-other-count', ['--log-partitions', '2']);
      await instance.kill();
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(ServiceProcessStartError);
    const failed = refusal as ServiceProcessStartError;
    expect(failed.exitCode).toBe(1);
    const fatal = failed.stdoutTail.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'failed to start');
    expect(fatal).toMatchObject({ code: 'incompatible_log' });
    expect(String(fatal?.err)).toMatch(/^the log of this deployment has 4 partition\(s\) \(TETHER_LOG-0, …\), and this process was started with --log-partitions 2\. /);
    expect(String(fatal?.err)).toContain('Start every process with --log-partitions 4.');
    // The message, not a stack trace.
    expect([...failed.stdoutTail, ...failed.stderrTail].join('\n')).not.toMatch(/\n\s+at /);
  });
});
