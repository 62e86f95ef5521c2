import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ gateways: 3, eventStore: true });
});
afterAll(async () => {
  await stack?.teardown();
});

describe('SIGTERM drain', () => {
  it('clients of a draining gateway resume on the others with nothing lost, and it exits by itself', async () => {
    const clients = await Promise.all(Array.from({ length: 3 }, () => connectSdkClient(stack.url)));
    const progress = clients.map(() => [] as number[]);
    let drained: Promise<unknown> | undefined;
    let drainStartedAt = 0;
    const calls = clients.map((sdk, i) =>
      sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 200, delayMs: 10 } }, CallToolResultSchema, {
        timeout: 60_000,
        onprogress: (p) => {
          progress[i]!.push(p.progress);
          if (i === 0 && p.progress === 50 && drained === undefined) {
            const victim = stack.gatewayOf((r) => r.method === 'POST' && r.sessionId === sdk.transport.sessionId)!;
            stack.proxy.markDown(victim.origin);
            drainStartedAt = Date.now();
            drained = victim.process.stop('SIGTERM', 15_000);
          }
        },
      }),
    );
    const results = await Promise.all(calls);
    const exit = (await drained) as { code: number | null };
    const drainMs = Date.now() - drainStartedAt;
    for (const [i, result] of results.entries()) {
      expect(result.content).toEqual([{ type: 'text', text: 'done 200' }]);
      expect(progress[i]).toEqual(Array.from({ length: 200 }, (_, k) => k + 1));
    }
    // Exit code 0: it drained and left by itself (stop() would SIGKILL it after 15 s).
    expect(exit.code).toBe(0);
    process.stdout.write(`drain: the gateway exited ${drainMs} ms after SIGTERM (drain timeout 5 s)\n`);
    for (const sdk of clients) await sdk.close();
  }, 120_000);
});
