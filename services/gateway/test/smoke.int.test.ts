import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { connectSdkClient, UpstreamTools } from '@tether/testing';
import { SseParser } from '@tether/protocol';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

let stack: InProcessStack;
beforeAll(async () => {
  stack = await startInProcessStack({ args: ['--route', '/other/mcp=http://127.0.0.1:9/mcp'] });
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

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) });
}

const init = (version: string) => ({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });

describe('gateway surface', () => {
  it('answers /healthz and /readyz', async () => {
    const origin = new URL(stack.urls[0]!).origin;
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    const ready = await fetch(`${origin}/readyz`);
    expect(ready.status).toBe(200);
    // The first line is what probes read; then the log, its partition count and the server.
    const lines = (await ready.text()).trimEnd().split('\n');
    expect(lines).toEqual(['ready', `log: jetstream ${stack.streamName} via 127.0.0.1:${new URL(stack.nats.url).port}`, 'partitions: 1', `nats-server: ${stack.nats.version}`]);
  });

  it('primes 2025-11-25 clients (retry + an id-only event first) and sends older clients neither', async () => {
    const frames = async (version: string) => {
      const res = await post(stack.urls[0]!, init(version), { 'mcp-protocol-version': version });
      const parser = new SseParser();
      const out = [];
      for await (const chunk of res.body!) out.push(...parser.push(chunk));
      return out;
    };
    const modern = await frames('2025-11-25');
    expect(modern[0]).toMatchObject({ retryMs: 1000 });
    expect(modern.some((m) => m.id !== undefined && m.data === '')).toBe(true);
    const older = await frames('2025-03-26');
    expect(older.every((m) => m.data !== '' && m.retryMs === undefined)).toBe(true);
    expect(older.map((m) => JSON.parse(m.data).id)).toEqual([0]);
  });

  it('binds a session to its route: the same id on another route is an unknown session', async () => {
    const res = await post(stack.urls[0]!, init('2025-11-25'), { 'mcp-protocol-version': '2025-11-25' });
    const sessionId = res.headers.get('mcp-session-id')!;
    await res.arrayBuffer();
    const other = stack.urls[0]!.replace('/mcp', '/other/mcp');
    const wrongRoute = await post(other, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { 'mcp-session-id': sessionId });
    expect(wrongRoute.status).toBe(404);
    const noRoute = await post(stack.urls[0]!.replace('/mcp', '/nowhere'), { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(noRoute.status).toBe(404);
    expect(await noRoute.json()).toMatchObject({ error: { message: 'no MCP route at /nowhere' } });
  });

  it('never lets the upstream session id reach the client', async () => {
    const res = await post(stack.urls[0]!, init('2025-11-25'), { 'mcp-protocol-version': '2025-11-25' });
    const ours = res.headers.get('mcp-session-id')!;
    await res.arrayBuffer();
    const upstreamIds = stack.upstream.requests().map((r) => r.sessionId).filter((id): id is string => id !== undefined);
    expect(upstreamIds.length).toBeGreaterThan(0);
    expect(upstreamIds).not.toContain(ours);
  });
});
