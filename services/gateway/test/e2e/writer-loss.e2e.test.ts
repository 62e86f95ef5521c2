import { afterEach, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack | undefined;
afterEach(async () => {
  await stack?.teardown();
  stack = undefined;
});

/** Calls the streaming tool and SIGKILLs the gateway pumping it after `killAt` notifications. */
async function killPumpMidStream(s: Stack, killAt: number) {
  const sdk = await connectSdkClient(s.url);
  const progress: number[] = [];
  let killed: Promise<void> | undefined;
  const outcome = await sdk.client
    .callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 300, delayMs: 10 } }, CallToolResultSchema, {
      timeout: 60_000,
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === killAt) {
          const pumping = s.gatewayOf((r) => r.method === 'POST' && r.sessionId === sdk.transport.sessionId);
          if (pumping === undefined) throw new Error('no gateway served the POST');
          s.proxy.markDown(pumping.origin);
          killed = pumping.process.kill();
        }
      },
    })
    .then(
      (result) => ({ result, error: undefined }),
      (error: unknown) => ({ result: undefined, error }),
    );
  await killed;
  await sdk.close();
  return { progress, ...outcome };
}

describe('the pumping gateway is killed with SIGKILL mid-stream', () => {
  it('continues gap-free when the upstream can resume (nested resume from the last recorded upstream id)', async () => {
    stack = await startStack({ gateways: 3, eventStore: true });
    const { progress, result, error } = await killPumpMidStream(stack, 80);
    expect(error).toBeUndefined();
    expect(progress).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(result?.content).toEqual([{ type: 'text', text: 'done 300' }]);
  });

  it('ends explicitly as abandoned when the upstream cannot resume, never with a silent gap', async () => {
    stack = await startStack({ gateways: 3, eventStore: false });
    const { progress, result, error } = await killPumpMidStream(stack, 80);
    expect(result).toBeUndefined();
    expect(String(error)).toMatch(/upstream response stream was lost and could not be resumed/);
    // What did arrive is a gap-free prefix.
    expect(progress).toEqual(Array.from({ length: progress.length }, (_, i) => i + 1));
    expect(progress.length).toBeGreaterThanOrEqual(80);
  });
});
