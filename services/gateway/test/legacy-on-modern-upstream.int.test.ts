import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { startModernUpstream } from '@tether/testing';
import type { ModernUpstream } from '@tether/testing';
import { callTool, initialize, request } from './e2e/raw-client.js';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * A 2025-11-25 client whose upstream is a stateless SDK v2 server
 * (`createMcpHandler`, which answers the 2025 era without sessions): the
 * gateway's session and log still make the call's stream resumable on
 * another instance, exactly, with tasks on (the default).
 */
let upstream: ModernUpstream;
let stack: InProcessStack;

function server(): McpServer {
  const s = new McpServer({ name: 'legacy-stream', version: '0.0.0' }, { capabilities: { logging: {} } });
  s.registerTool('count', { inputSchema: z.object({ n: z.number() }) }, async ({ n }, ctx) => {
    for (let i = 1; i <= n; i += 1) {
      await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: `tick ${i}` } });
      await new Promise((r) => setTimeout(r, 40));
    }
    return { content: [{ type: 'text', text: `counted ${n}` }] };
  });
  return s;
}

beforeAll(async () => {
  upstream = await startModernUpstream({ createServer: server });
  stack = await startInProcessStack({ gateways: 2, upstreamUrl: upstream.url });
});
afterAll(async () => {
  await stack?.teardown();
  await upstream?.close();
});

describe('2025-11-25 sessions in front of a stateless SDK v2 upstream', () => {
  it('a call cut on A resumes on B from the log: every event once, in order, then the result', async () => {
    const sessionId = await initialize(stack.urls[0]!);
    const first = await request(stack.urls[0]!, { method: 'POST', sessionId, body: callTool(1, 'count', { n: 8 }) });
    expect(first.status).toBe(200);
    const seen: string[] = [];
    let lastEventId = '';
    for await (const m of first.messages) {
      if (m.id !== undefined && m.id !== '') lastEventId = m.id;
      if (m.data === '') continue;
      const msg = JSON.parse(m.data) as { params?: { data?: string } };
      if (msg.params?.data !== undefined) seen.push(msg.params.data);
      if (seen.length === 3) break;
    }
    first.cancel();
    expect(lastEventId).not.toBe('');
    const resumed = await request(stack.urls[1]!, { method: 'GET', sessionId, lastEventId });
    expect(resumed.status).toBe(200);
    let result: unknown;
    for await (const m of resumed.messages) {
      if (m.data === '') continue;
      const msg = JSON.parse(m.data) as { id?: number; result?: unknown; params?: { data?: string } };
      if (msg.params?.data !== undefined) seen.push(msg.params.data);
      if (msg.id === 1) {
        result = msg.result;
        break;
      }
    }
    resumed.cancel();
    expect(seen).toEqual(Array.from({ length: 8 }, (_, i) => `tick ${i + 1}`));
    expect(result).toMatchObject({ content: [{ type: 'text', text: 'counted 8' }] });
  });
});
