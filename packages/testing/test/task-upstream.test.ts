import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTaskUpstream, TaskTools } from '../src/index.js';
import type { TaskUpstream } from '../src/index.js';

/**
 * The task upstream is a plain SDK v2 server: a pinned 2026-07-28 client
 * calls its tools, a 2025-era tools/list shows their task support, and a
 * client that walks away aborts the call.
 */
let upstream: TaskUpstream;

beforeAll(async () => {
  upstream = await startTaskUpstream();
});

afterAll(async () => {
  await upstream?.close();
});

async function withClient<T>(use: (client: Client) => Promise<T>): Promise<T> {
  const client = new Client({ name: 'task-upstream-test', version: '0.0.0' }, { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(upstream.url)));
  try {
    return await use(client);
  } finally {
    await client.close();
  }
}

/** One 2025-era JSON-RPC POST; the SDK answers statelessly, as JSON or one SSE event. */
async function legacyPost(body: object, headers: Record<string, string> = {}): Promise<{ json: { result?: Record<string, unknown> }; sessionId: string | null }> {
  const res = await fetch(upstream.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', ...body }),
  });
  const raw = await res.text();
  const data = res.headers.get('content-type')?.includes('text/event-stream') ? raw.split('\n').find((line) => line.startsWith('data: '))!.slice('data: '.length) : raw;
  return { json: JSON.parse(data) as { result?: Record<string, unknown> }, sessionId: res.headers.get('mcp-session-id') };
}

const modernCall = (name: string, args: object): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': name },
  body: JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: {
      name,
      arguments: args,
      _meta: {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientInfo': { name: 'task-upstream-test', version: '0.0.0' },
        'io.modelcontextprotocol/clientCapabilities': {},
      },
    },
  }),
});

async function until(check: () => boolean, timeoutMs = 2_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((done) => setTimeout(done, 20));
  }
}

describe('startTaskUpstream', () => {
  it('answers greet to a 2026-07-28 client', async () => {
    const result = await withClient((client) => client.callTool({ name: TaskTools.Greet, arguments: { name: 'tether' } }));
    expect(result.content).toEqual([{ type: 'text', text: 'Hello, tether!' }]);
    expect(upstream.calls(TaskTools.Greet)).toBeGreaterThanOrEqual(1);
  });

  it('shows execution.taskSupport in a 2025-era tools/list (2026-07-28 lists drop it)', async () => {
    const init = await legacyPost({ id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'legacy', version: '0.0.0' } } });
    const headers: Record<string, string> = { 'mcp-protocol-version': '2025-11-25', ...(init.sessionId === null ? {} : { 'mcp-session-id': init.sessionId }) };
    const { json } = await legacyPost({ id: 2, method: 'tools/list' }, headers);
    const tools = json.result?.['tools'] as { name: string; execution?: { taskSupport?: string }; annotations?: { idempotentHint?: boolean } }[];
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    expect(byName.get(TaskTools.SlowCompute)?.execution).toEqual({ taskSupport: 'optional' });
    expect(byName.get(TaskTools.FailingJob)?.execution).toEqual({ taskSupport: 'required' });
    expect(byName.get(TaskTools.Greet)?.execution).toBeUndefined();
    expect(byName.get(TaskTools.IdempotentJob)?.annotations?.idempotentHint).toBe(true);

    const modern = await withClient((client) => client.listTools());
    expect(modern.tools.find((tool) => tool.name === TaskTools.SlowCompute)?.execution).toBeUndefined();
  });

  it('answers protocol_error_job with a JSON-RPC error, failing_job with isError', async () => {
    const protocol = (await (await fetch(upstream.url, modernCall(TaskTools.ProtocolErrorJob, {}))).json()) as { error?: { code: number; message: string } };
    expect(protocol.error?.code).toBe(-32603);
    const tool = (await (await fetch(upstream.url, modernCall(TaskTools.FailingJob, {}))).json()) as { result?: { isError?: boolean } };
    expect(tool.result?.isError).toBe(true);
  });

  it('stops slow_compute and counts an abort when the client closes the request', async () => {
    const before = upstream.aborts(TaskTools.SlowCompute);
    const walkAway = new AbortController();
    const pending = fetch(upstream.url, { ...modernCall(TaskTools.SlowCompute, { seconds: 30, label: 'abandoned' }), signal: walkAway.signal }).catch(() => undefined);
    await until(() => upstream.inFlight(TaskTools.SlowCompute) === 1);
    walkAway.abort();
    await pending;
    await until(() => upstream.inFlight(TaskTools.SlowCompute) === 0);
    expect(upstream.aborts(TaskTools.SlowCompute)).toBe(before + 1);
  });

  it('asks confirm_delete\'s question after a wait, and answers the retry that carries the state', async () => {
    await withClient(async (client) => {
      // The SDK client answers input requests itself: give it the elicitation answer.
      client.setRequestHandler('elicitation/create', () => ({ action: 'accept', content: { confirm: true } }));
      const result = await client.callTool({ name: TaskTools.ConfirmDelete, arguments: { path: '/tmp/x' } });
      expect(result.content).toEqual([{ type: 'text', text: 'deleted /tmp/x' }]);
    });
  });

  it('hold answers what release gave its key', async () => {
    upstream.release('k1', 'released text');
    const result = await withClient((client) => client.callTool({ name: TaskTools.Hold, arguments: { key: 'k1' } }));
    expect(result.content).toEqual([{ type: 'text', text: 'released text' }]);
  });
});
