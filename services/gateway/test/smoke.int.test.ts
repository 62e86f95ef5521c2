import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

let stack: InProcessStack;
beforeAll(async () => {
  stack = await startInProcessStack();
});
afterAll(async () => {
  await stack.teardown();
});

describe('gateway smoke (in-process)', () => {
  it('initializes, streams a tool call through the log, and answers JSON', async () => {
    const sdk = await connectSdkClient(stack.urls[0]!);
    const progress: number[] = [];
    const result = await sdk.client.callTool(
      { name: UpstreamTools.StreamProgress, arguments: { count: 50, delayMs: 0 } },
      CallToolResultSchema,
      { onprogress: (p) => progress.push(p.progress) },
    );
    expect(progress).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(result.content).toEqual([{ type: 'text', text: 'done 50' }]);
    expect(sdk.transport.sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    await sdk.transport.terminateSession();
    await sdk.close();
    expect(sdk.errors).toEqual([]);
  });
});
