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

describe('cross-instance resume through a rotating balancer', () => {
  it('500 progress notifications, connection cut several times, every one exactly once and in order', async () => {
    const sdk = await connectSdkClient(stack.url);
    const progress: number[] = [];
    let cuts = 0;
    const call = sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 500, delayMs: 4 } }, CallToolResultSchema, {
      onprogress: (p) => {
        progress.push(p.progress);
        // Cut at pseudo-random points while the stream runs.
        if ([37, 151, 260, 333, 420].includes(p.progress)) {
          cuts += 1;
          stack.proxy.cutAll();
        }
      },
      timeout: 60_000,
    });
    const result = await call;
    expect(cuts).toBe(5);
    expect(progress).toEqual(Array.from({ length: 500 }, (_, i) => i + 1));
    expect(result.content).toEqual([{ type: 'text', text: 'done 500' }]);
    // The stream really was resumed, and every resume went to a different
    // instance than the request before it (the balancer rotates strictly).
    // How many resumes a cut causes depends on timing (a cut can land while
    // a reconnect is in flight), so only their existence is asserted.
    const history = stack.proxy.history();
    const resumes = history.filter((r) => r.method === 'GET' && r.lastEventId !== undefined && r.status === 200);
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    for (const resume of resumes) {
      const before = history.find((r) => r.seq === resume.seq - 1);
      if (before !== undefined) expect(resume.target).not.toBe(before.target);
    }
    await sdk.transport.terminateSession();
    await sdk.close();
  });
});
