import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InMemoryServerEventBus, McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { startModernUpstream } from '@tether/testing';
import type { ModernUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import { pipelined } from './pipelined-http.js';
import type { InProcessStack } from './fixtures.js';

let upstream: ModernUpstream;
const bus = new InMemoryServerEventBus();
let stack: InProcessStack;

function server(): McpServer {
  const s = new McpServer({ name: 'slow', version: '0.0.0' }, { capabilities: { logging: {} } });
  const slow = s.registerTool('slow', { inputSchema: z.object({ ms: z.number() }) }, async ({ ms }) => {
    await new Promise((r) => setTimeout(r, ms));
    return { content: [{ type: 'text', text: `slept ${ms}` }] };
  });
  (slow as unknown as { execution: unknown }).execution = { taskSupport: 'optional' };
  const chatty = s.registerTool('chatty', { inputSchema: z.object({ n: z.number() }) }, async ({ n }, ctx) => {
    for (let i = 1; i <= n; i += 1) {
      await ctx.mcpReq.notify({ method: 'notifications/message', params: { level: 'info', data: `step ${i}` } });
      await new Promise((r) => setTimeout(r, 100));
    }
    return { content: [{ type: 'text', text: `did ${n}` }] };
  });
  (chatty as unknown as { execution: unknown }).execution = { taskSupport: 'optional' };
  return s;
}

beforeAll(async () => {
  upstream = await startModernUpstream({ createServer: server, handler: { bus } });
  stack = await startInProcessStack({ gateways: 2, upstreamUrl: upstream.url, args: ['--experimental-task-streams', 'on', '--task-max-events', '6'] });
});
afterAll(async () => {
  await stack?.teardown();
  await upstream?.close();
});

const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

async function rpc(url: string, id: number, method: string, params: Record<string, unknown>, name?: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  const data = text.startsWith('{') ? JSON.parse(text) : JSON.parse(text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6));
  return { status: res.status, body: data };
}

async function taskStream(url: string, id: number, taskId: string, after?: number): Promise<any[]> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tasks/stream', 'mcp-name': taskId },
    body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/stream', params: { taskId, ...(after === undefined ? {} : { after }), _meta: META } }),
  });
  const text = await res.text();
  return text.startsWith('{') ? [JSON.parse(text)] : sseMessages(text);
}

function sseMessages(text: string): any[] {
  return text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
}

function streamRequest(id: number, taskId: string, after?: number): string {
  const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/stream', params: { taskId, ...(after === undefined ? {} : { after }), _meta: META } });
  const head = ['POST /mcp HTTP/1.1', 'host: 127.0.0.1', 'content-type: application/json', 'accept: application/json, text/event-stream', 'mcp-protocol-version: 2026-07-28', 'mcp-method: tasks/stream', `mcp-name: ${taskId}`, `content-length: ${Buffer.byteLength(body)}`];
  return `${head.join('\r\n')}\r\n\r\n${body}`;
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('tasks smoke', () => {
  it('a slow call becomes a task created on A and read on B', async () => {
    // The route's first call may take over --task-after (cold connections; measured 409 ms), and is then rightly a task.
    await rpc(stack.urls[0]!, 0, 'tools/call', { name: 'slow', arguments: { ms: 0 } }, 'slow');
    const fast = await rpc(stack.urls[0]!, 1, 'tools/call', { name: 'slow', arguments: { ms: 10 } }, 'slow');
    expect(fast.body.result?.content?.[0]?.text, JSON.stringify(fast)).toBe('slept 10');
    const created = await rpc(stack.urls[0]!, 2, 'tools/call', { name: 'slow', arguments: { ms: 700 } }, 'slow');
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = created.body.result.taskId as string;
    const working = await rpc(stack.urls[1]!, 3, 'tasks/get', { taskId }, taskId);
    expect(working.body.result).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
    await new Promise((r) => setTimeout(r, 900));
    const done = await rpc(stack.urls[1]!, 4, 'tasks/get', { taskId }, taskId);
    expect(done.body.result).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: 'slept 700' }] } });
    const discover = await rpc(stack.urls[1]!, 5, 'server/discover', {});
    expect(discover.body.result.capabilities.extensions['io.modelcontextprotocol/tasks']).toEqual({});
  });

  it('a listen on B sees the status changes of a task running on A, then ends', async () => {
    const created = await rpc(stack.urls[0]!, 10, 'tools/call', { name: 'slow', arguments: { ms: 600 } }, 'slow');
    const taskId = created.body.result.taskId as string;
    const res = await fetch(stack.urls[1]!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId, 'AAAAAAAAAAAAAAAAAAAAAA'] }, _meta: META } }),
    });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const text = await res.text();
    const messages = text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    expect(messages[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [taskId] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 11 } } });
    const statuses = messages.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.status);
    expect(statuses[0]).toBe('working');
    expect(statuses.at(-1)).toBe('completed');
    expect(messages.at(-1)).toMatchObject({ id: 11, result: { resultType: 'complete' } });
  });

  it('tasks/stream on B replays the notifications recorded on A as SEP-2694 events, seq from 0, after a cursor, then ends with an empty result', async () => {
    const created = await rpc(stack.urls[0]!, 20, 'tools/call', { name: 'chatty', arguments: { n: 4 } }, 'chatty');
    expect(created.body.result).toMatchObject({ resultType: 'task' });
    const taskId = created.body.result.taskId as string;
    const all = await taskStream(stack.urls[1]!, 21, taskId);
    const events = all.filter((m) => m.method === 'notifications/tasks/event');
    expect(events.map((m) => m.params.seq)).toEqual([0, 1, 2, 3]);
    expect(events[0].params).toEqual({
      seq: 0,
      taskId,
      type: 'tether.upstream.notification',
      payload: { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'step 1' } },
      _meta: { 'io.modelcontextprotocol/related-task': { taskId } },
    });
    expect(events.map((m) => m.params.payload.params.data)).toEqual(['step 1', 'step 2', 'step 3', 'step 4']);
    expect(all.at(-1)).toEqual({ jsonrpc: '2.0', id: 21, result: { resultType: 'complete' } });
    // `after` is exclusive: the events with a greater seq.
    const rest = await taskStream(stack.urls[1]!, 22, taskId, 1);
    expect(rest.filter((m) => m.method === 'notifications/tasks/event').map((m) => m.params.seq)).toEqual([2, 3]);
    // Settled, nothing after the cursor: the empty result at once, no event.
    expect(await taskStream(stack.urls[0]!, 23, taskId, 3)).toEqual([{ jsonrpc: '2.0', id: 23, result: { resultType: 'complete' } }]);
    const past = await taskStream(stack.urls[0]!, 24, taskId, 4);
    expect(past[0].error).toMatchObject({ code: -32602 });
    const negative = await taskStream(stack.urls[0]!, 25, taskId, -1);
    expect(negative[0].error).toMatchObject({ code: -32602 });
  });

  it('tasks/stream from a cursor older than the events kept (--task-max-events 6) gets events_gone with the taskId and earliestSeq; without a cursor, the earliest kept', async () => {
    const created = await rpc(stack.urls[0]!, 40, 'tools/call', { name: 'chatty', arguments: { n: 8 } }, 'chatty');
    const taskId = created.body.result.taskId as string;
    // Let it finish: 8 events and the end marker, of which 6 are kept (seq 3 to 7, and the marker).
    await waitFor(async () => (await rpc(stack.urls[0]!, 41, 'tasks/get', { taskId }, taskId)).body.result?.status === 'completed');
    const gone = await taskStream(stack.urls[1]!, 42, taskId, 1);
    expect(gone).toEqual([{ jsonrpc: '2.0', id: 42, error: { code: -32010, message: 'Task events are no longer available', data: { reason: 'events_gone', taskId, earliestSeq: 3 } } }]);
    const fromEarliest = await taskStream(stack.urls[1]!, 43, taskId, 2);
    expect(fromEarliest.filter((m) => m.method === 'notifications/tasks/event').map((m) => m.params.seq)).toEqual([3, 4, 5, 6, 7]);
    const noCursor = await taskStream(stack.urls[1]!, 44, taskId);
    expect(noCursor.filter((m) => m.method === 'notifications/tasks/event').map((m) => m.params.seq)).toEqual([3, 4, 5, 6, 7]);
  });

  it('a second tasks/stream for the same task on the same connection gets -32602 while the first is open; another connection may stream it', async () => {
    const created = await rpc(stack.urls[0]!, 50, 'tools/call', { name: 'chatty', arguments: { n: 6 } }, 'chatty');
    const taskId = created.body.result.taskId as string;
    // Two requests pipelined on one socket: Node runs the second's handler while the first still streams.
    const answers = await pipelined(stack.urls[1]!, [streamRequest(51, taskId), streamRequest(52, taskId)]);
    const first = sseMessages(answers[0]!);
    expect(first.filter((m) => m.method === 'notifications/tasks/event').map((m) => m.params.seq)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(first.at(-1)).toEqual({ jsonrpc: '2.0', id: 51, result: { resultType: 'complete' } });
    expect(JSON.parse(answers[1]!)).toMatchObject({ id: 52, error: { code: -32602 } });
    // Once the first is over, the same connection may stream it again (the claim is released).
    const again = await pipelined(stack.urls[1]!, [streamRequest(53, taskId, 4)]);
    expect(sseMessages(again[0]!).filter((m) => m.method === 'notifications/tasks/event').map((m) => m.params.seq)).toEqual([5]);
  });

  it('a listen that also asks the upstream is split and merged: one ack, task notifications and the upstream\'s own, one subscription id', async () => {
    const created = await rpc(stack.urls[0]!, 30, 'tools/call', { name: 'slow', arguments: { ms: 500 } }, 'slow');
    const taskId = created.body.result.taskId as string;
    const abort = new AbortController();
    const res = await fetch(stack.urls[1]!, {
      method: 'POST',
      signal: abort.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 31, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId], toolsListChanged: true }, _meta: META } }),
    });
    const messages: any[] = [];
    const decoder = new TextDecoder();
    let buffered = '';
    let published = false;
    for await (const chunk of res.body!) {
      buffered += decoder.decode(chunk, { stream: true });
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const line of lines) if (line.startsWith('data: ')) messages.push(JSON.parse(line.slice(6)));
      if (!published && messages.length > 0) {
        published = true;
        bus.publish({ kind: 'tools_list_changed' });
      }
      const done = messages.some((m) => m.method === 'notifications/tasks' && m.params.status === 'completed') && messages.some((m) => m.method === 'notifications/tools/list_changed');
      if (done) break;
    }
    abort.abort();
    expect(messages[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [taskId], toolsListChanged: true } } });
    expect(messages.filter((m) => m.method === 'notifications/subscriptions/acknowledged')).toHaveLength(1);
    expect(messages.some((m) => m.method === 'notifications/tools/list_changed')).toBe(true);
    expect(messages.some((m) => m.method === 'notifications/tasks' && m.params.status === 'completed')).toBe(true);
    for (const m of messages) expect(m.params._meta['io.modelcontextprotocol/subscriptionId']).toBe(31);
  });
});
