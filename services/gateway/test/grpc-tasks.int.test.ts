import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startNatsServer, startServiceProcess, startTaskUpstream, TaskTools } from '@tether/testing';
import type { NatsServer, ServiceProcess, TaskUpstream } from '@tether/testing';
import { createGrpcLog } from '../src/log/grpc-log.js';

/**
 * Durable tasks through gateways on `--log grpc://`: two gateways (in this
 * process) share one session-log service process on a real nats-server and
 * hold no NATS connection of their own. A task created through A is read,
 * listened to, answered and cancelled through B, as with gateways on NATS
 * (tasks-smoke.int.test.ts, e2e/tasks.e2e.test.ts). A third gateway with
 * another token of the same service is another caller: it sees none of it.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKENS = { fleet: 'fleet-token-0123456789abcdef', other: 'other-token-0123456789abcdef' } as const;
const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'grpc-tasks', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const NOT_FOUND = { code: -32602, message: 'Failed to retrieve task: Task not found' };

let nats: NatsServer;
let service: ServiceProcess;
let upstream: TaskUpstream;
const gateways: Gateway[] = [];
let a: string;
let b: string;
let otherCaller: string;

async function startGateway(name: string, token: string): Promise<string> {
  const config = parseConfig(['--port', '0', '--log', `grpc://127.0.0.1:${service.port}`, '--log-token', token, '--upstream', upstream.url, '--instance-id', name, '--heartbeat', '1s'], {});
  const log = await createGrpcLog({ target: `127.0.0.1:${service.port}`, token });
  const gateway = createGateway(config, log, pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
  gateways.push(gateway);
  return `http://127.0.0.1:${await gateway.listen()}/mcp`;
}

beforeAll(async () => {
  nats = await startNatsServer();
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `fleet:${TOKENS.fleet}`, '--token', `other:${TOKENS.other}`, '--task-ttl', '1h'],
    readyLine: (o) => o.msg === 'listening',
  });
  upstream = await startTaskUpstream();
  a = await startGateway('gw-a', TOKENS.fleet);
  b = await startGateway('gw-b', TOKENS.fleet);
  otherCaller = await startGateway('gw-other', TOKENS.other);
}, 60_000);
afterAll(async () => {
  for (const g of gateways) await g.close().catch(() => undefined);
  await upstream?.close();
  await service?.stop();
  await nats?.cleanup();
});

let nextId = 1;

/** One 2026-07-28 request, raw, with the routing headers (`Mcp-Name`: the tool or the task id); the JSON-RPC answer. */
async function rpc(url: string, method: string, params: Record<string, unknown>, name?: string): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  const data = text.trimStart().startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: {')).at(-1)?.slice(6);
  return { status: res.status, body: data === undefined ? undefined : JSON.parse(data), text };
}

const taskCall = (url: string, method: 'tasks/get' | 'tasks/update' | 'tasks/cancel', taskId: string, extra: Record<string, unknown> = {}) => rpc(url, method, { taskId, ...extra }, taskId);

async function createTask(url: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const created = await rpc(url, 'tools/call', { name: tool, arguments: args }, tool);
  expect(created.status, created.text).toBe(200);
  expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
  return created.body.result.taskId as string;
}

async function pollTask(url: string, taskId: string, done: (result: any) => boolean, deadlineMs = 15_000): Promise<any> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const last = await taskCall(url, 'tasks/get', taskId);
    if (last.body?.result !== undefined && done(last.body.result)) return last.body.result;
    if (Date.now() >= deadline) throw new Error(`task never reached the awaited state; last answer ${last.status} ${last.text.slice(0, 400)}`);
    await sleep(100);
  }
}

const isSettled = (r: any) => ['completed', 'failed', 'cancelled'].includes(r.status);

describe('tasks through gateways on --log grpc://', () => {
  it('a task created through A is read through B, then completed with the upstream\'s result', async () => {
    const key = `cross-${randomBytes(6).toString('hex')}`;
    const taskId = await createTask(a, TaskTools.Hold, { key });
    const first = await taskCall(b, 'tasks/get', taskId);
    expect(first.status).toBe(200);
    expect(first.body.result).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
    upstream.release(key, `released ${key}`);
    const done = await pollTask(b, taskId, isSettled);
    expect(done).toMatchObject({ resultType: 'complete', taskId, status: 'completed', result: { content: [{ type: 'text', text: `released ${key}` }] } });
    expect((await taskCall(a, 'tasks/get', taskId)).body.result).toEqual(done);
  });

  it('a listen on B follows a task running on A to its end', async () => {
    const key = `listen-${randomBytes(6).toString('hex')}`;
    const taskId = await createTask(a, TaskTools.Hold, { key });
    const res = await fetch(b, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': 'subscriptions/listen' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 500, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: META } }),
    });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const text = res.text();
    await sleep(300);
    upstream.release(key, `released ${key}`);
    const messages = (await text).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
    expect(messages[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [taskId] } } });
    const statuses = messages.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.status);
    expect(statuses[0]).toBe('working');
    expect(statuses.at(-1)).toBe('completed');
    expect(messages.at(-1)).toMatchObject({ id: 500, result: { resultType: 'complete' } });
  });

  it('tasks/cancel through B closes the upstream call running on A; the task ends cancelled', async () => {
    const abortsBefore = upstream.aborts(TaskTools.SlowCompute);
    const taskId = await createTask(a, TaskTools.SlowCompute, { seconds: 30, label: 'cancel-me' });
    const cancel = await taskCall(b, 'tasks/cancel', taskId);
    expect(cancel.body.result).toEqual({ resultType: 'complete' });
    const settled = await pollTask(b, taskId, isSettled);
    expect(settled.status).toBe('cancelled');
    // A ran it and was asked through the service: its upstream call was closed.
    expect(upstream.aborts(TaskTools.SlowCompute)).toBe(abortsBefore + 1);
  });

  it('an input round is answered through B: the update loop stores the answer and B runs the next round', async () => {
    const taskId = await createTask(a, TaskTools.ConfirmDelete, { path: '/srv/grpc.txt' });
    const asking = await pollTask(a, taskId, (r) => r.status !== 'working');
    expect(asking.status, JSON.stringify(asking)).toBe('input_required');
    const update = await taskCall(b, 'tasks/update', taskId, { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } });
    expect(update.body.result).toEqual({ resultType: 'complete' });
    const done = await pollTask(a, taskId, isSettled);
    expect([done.status, done.result.content[0].text]).toEqual(['completed', 'deleted /srv/grpc.txt']);
  });

  it("a gateway with another token of the same service is another caller: it cannot see or cancel the fleet's task", async () => {
    const key = `other-${randomBytes(6).toString('hex')}`;
    const taskId = await createTask(a, TaskTools.Hold, { key });
    const got = await taskCall(otherCaller, 'tasks/get', taskId);
    expect(got.body.error).toEqual(NOT_FOUND);
    expect((await taskCall(otherCaller, 'tasks/cancel', taskId)).body.error).toEqual(NOT_FOUND);
    expect((await taskCall(b, 'tasks/get', taskId)).body.result.status).toBe('working');
    upstream.release(key, 'done');
    expect((await pollTask(b, taskId, isSettled)).status).toBe('completed');
  });
});
