import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { OwnedTaskTools, startNatsServer, startOwnedTasksUpstream, startServiceProcess } from '@tether/testing';
import type { NatsServer, OwnedTasksUpstream, ServiceProcess } from '@tether/testing';
import { createGrpcLog } from '../src/log/grpc-log.js';

/**
 * Upstream-owned tasks through gateways on `--log grpc://`: the route
 * records go through the session-log service's task RPCs (the same table,
 * the same records), so a task created through A is routed by B to the
 * replica that holds it, and a gone replica's task is failed on both.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKEN = 'fleet-token-0123456789abcdef';
const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'owned-grpc', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

let nats: NatsServer;
let service: ServiceProcess;
let replicas: OwnedTasksUpstream[];
const gateways: Gateway[] = [];
let urls: string[];
let nextId = 1;

async function startGateway(name: string): Promise<string> {
  const config = parseConfig(['--port', '0', '--log', `grpc://127.0.0.1:${service.port}`, '--log-token', TOKEN, '--upstream', replicas.map((r) => r.url).join(','), '--instance-id', name, '--heartbeat', '1s'], {});
  const gateway = createGateway(config, await createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN }), pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
  gateways.push(gateway);
  return `http://127.0.0.1:${await gateway.listen()}/mcp`;
}

beforeAll(async () => {
  nats = await startNatsServer();
  service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `fleet:${TOKEN}`, '--task-ttl', '1h'],
    readyLine: (o) => o.msg === 'listening',
  });
  replicas = [await startOwnedTasksUpstream({ name: 'r1' }), await startOwnedTasksUpstream({ name: 'r2' })];
  urls = [await startGateway('gw-a'), await startGateway('gw-b')];
}, 60_000);
afterAll(async () => {
  for (const g of gateways) await g.close().catch(() => undefined);
  for (const r of replicas ?? []) await r.close();
  await service?.stop();
  await nats?.cleanup();
});

async function rpc(url: string, method: string, params: Record<string, unknown>, name?: string): Promise<any> {
  const id = nextId++;
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  const messages = text.startsWith('{') ? [JSON.parse(text)] : text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  return messages.find((m) => m.id === id);
}

describe('upstream-owned tasks over --log grpc://', () => {
  it('a task created through A is routed by B to its replica; when that replica is gone it is failed on both', async () => {
    // 3 s: long enough that three polls through B find it working on a loaded machine (0.4 s did not).
    const created = await rpc(urls[0]!, 'tools/call', { name: OwnedTaskTools.SlowCompute, arguments: { seconds: 3, label: 'g' } }, OwnedTaskTools.SlowCompute);
    expect(created.result, JSON.stringify(created)).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = created.result.taskId as string;
    const owner = replicas.find((r) => r.taskIds().includes(taskId))!;
    for (let i = 0; i < 3; i += 1) expect((await rpc(urls[1]!, 'tasks/get', { taskId }, taskId)).result).toMatchObject({ taskId, status: 'working' });
    await expect.poll(async () => (await rpc(urls[1]!, 'tasks/get', { taskId }, taskId)).result?.status, { timeout: 20_000, interval: 250 }).toBe('completed');
    expect((await rpc(urls[1]!, 'tasks/get', { taskId }, taskId)).result).toMatchObject({ status: 'completed', result: { content: [{ text: expect.stringContaining(`served by ${owner.name}`) }] } });

    const slow = await rpc(urls[1]!, 'tools/call', { name: OwnedTaskTools.SlowCompute, arguments: { seconds: 30 } }, OwnedTaskTools.SlowCompute);
    const lostId = slow.result.taskId as string;
    const holder = replicas.find((r) => r.taskIds().includes(lostId))!;
    await holder.close();
    expect((await rpc(urls[0]!, 'tasks/get', { taskId: lostId }, lostId)).result).toMatchObject({ taskId: lostId, status: 'failed', error: { data: { reason: 'replica_gone' } } });
    expect((await rpc(urls[1]!, 'tasks/get', { taskId: lostId }, lostId)).result).toMatchObject({ status: 'failed', error: { data: { reason: 'replica_gone' } } });
  });
});
