import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionLog } from '@tether/session-log';
import type { TaskTable } from '@tether/session-log';
import { startNatsServer, startServiceProcess, startTaskUpstream, TaskTools } from '@tether/testing';
import type { NatsServer, ServiceProcess, TaskUpstream } from '@tether/testing';

/**
 * The task sweeper (tasks/sweeper.ts): a task whose gateway process is
 * SIGKILLed, and that no client ever polls, is settled `failed`
 * runner_lost by another instance's sweeper within the bound the docs
 * state (`--task-sweep-interval` plus a probe and a write), read straight
 * from the task table. Two instances sweep: one writes the settle, once.
 * Gateways on NATS, and on `--log grpc://` (the service's ListWorkingTasks).
 */
const GATEWAY_MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKEN = 'sweeper-fleet-token-0123456789';
const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'task-sweeper', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const SWEEP_INTERVAL_MS = 500;
/** docs/design.md: a sweep interval, a presence probe (at most 250 ms of silence) and a compare-and-set; 1.5 s of slack for a loaded 2-core machine. */
const BOUND_MS = SWEEP_INTERVAL_MS + 250 + 1_500;
const SETTLED_LOG = 'task runner lost: settled failed';

let nats: NatsServer;
let upstream: TaskUpstream;
let service: ServiceProcess | undefined;
const procs: ServiceProcess[] = [];
const logs: SessionLog[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  upstream = await startTaskUpstream();
}, 60_000);

afterAll(async () => {
  await Promise.all(procs.map((p) => p.stop('SIGKILL', 2_000).catch(() => undefined)));
  await service?.stop().catch(() => undefined);
  for (const log of logs) await log.close().catch(() => undefined);
  await upstream?.close();
  await nats?.cleanup();
});

async function startGateway(name: string, logArgs: readonly string[], sweepMs: number): Promise<{ proc: ServiceProcess; url: string }> {
  const proc = await startServiceProcess({
    name,
    command: process.execPath,
    args: [GATEWAY_MAIN, '--port', '0', ...logArgs, '--upstream', upstream.url, '--instance-id', name, '--task-sweep-interval', String(sweepMs)],
    readyLine: (json) => json.msg === 'listening',
  });
  procs.push(proc);
  return { proc, url: `http://127.0.0.1:${proc.port}/mcp` };
}

async function rpc(url: string, method: string, params: Record<string, unknown>, name: string): Promise<any> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': method, 'mcp-name': name },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: META } }),
  });
  expect(res.status).toBe(200);
  const text = await res.text();
  return JSON.parse(text.trimStart().startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: {')).at(-1)!.slice(6));
}

const settledLines = (proc: ServiceProcess) => proc.stdoutJson.filter((line) => line.msg === SETTLED_LOG && line.swept === true).length;

async function killedRunnerIsSwept(mode: string, logArgs: readonly string[], table: TaskTable): Promise<void> {
  const runner = await startGateway(`${mode}-runner`, logArgs, 0);
  const sweepers = [await startGateway(`${mode}-s1`, logArgs, SWEEP_INTERVAL_MS), await startGateway(`${mode}-s2`, logArgs, SWEEP_INTERVAL_MS)];
  const created = await rpc(runner.url, 'tools/call', { name: TaskTools.Hold, arguments: { key: `sweep-${mode}` } }, TaskTools.Hold);
  expect(created.result).toMatchObject({ resultType: 'task', status: 'working' });
  const taskId = created.result.taskId as string;
  const before = (await table.read(taskId))!;
  expect(before.record).toMatchObject({ status: 'working', runnerInstance: `${mode}-runner` });

  const killedAtMs = Date.now();
  await runner.proc.kill();
  // Nobody polls: the table is read directly, which settles nothing.
  let after = await table.read(taskId);
  while (after!.record.status === 'working' && Date.now() - killedAtMs < 10_000) {
    await sleep(50);
    after = await table.read(taskId);
  }
  const settledInMs = after!.record.updatedAtMs - killedAtMs;
  console.log(`task sweeper (${mode}): settled ${settledInMs} ms after the SIGKILL, unpolled (bound ${BOUND_MS} ms, sweep every ${SWEEP_INTERVAL_MS} ms)`);
  expect(after!.record.status, 'the unpolled task was never settled').toBe('failed');
  expect(after!.record.error).toMatchObject({ code: -32603, data: { reason: 'runner_lost' } });
  expect(after!.record.runner).toBeNull();
  expect(settledInMs).toBeLessThanOrEqual(BOUND_MS);

  // Both instances kept sweeping; exactly one of them wrote the settle.
  await sleep(3 * SWEEP_INTERVAL_MS);
  expect(sweepers.map((s) => settledLines(s.proc)).reduce((x, y) => x + y)).toBe(1);
  expect((await table.read(taskId))!.seq).toBe(after!.seq);

  // A later poll finds it settled and does not settle it again.
  const got = await rpc(sweepers[0]!.url, 'tasks/get', { taskId }, taskId);
  expect(got.result).toMatchObject({ status: 'failed', error: { data: { reason: 'runner_lost' } } });
  expect((await table.read(taskId))!.seq).toBe(after!.seq);
}

describe('the task sweeper', () => {
  it('settles an unpolled task of a SIGKILLed gateway within the bound (gateways on NATS)', async () => {
    const namespace = `swp${process.pid}n`;
    const log = await SessionLog.create({ servers: nats.url, namespace });
    logs.push(log);
    await killedRunnerIsSwept('nats', ['--nats', nats.url, '--namespace', namespace], await log.openTasks(3_600_000));
  }, 60_000);

  it('leaves a task a reader could rerun (--task-retry idempotent) to that reader: a rerun needs the caller\'s credentials', async () => {
    const namespace = `swp${process.pid}r`;
    const log = await SessionLog.create({ servers: nats.url, namespace });
    logs.push(log);
    const table = await log.openTasks(3_600_000);
    const logArgs = ['--nats', nats.url, '--namespace', namespace, '--task-retry', 'idempotent'];
    const runner = await startGateway('retry-runner', logArgs, 0);
    const sweeper = await startGateway('retry-s1', logArgs, SWEEP_INTERVAL_MS);
    const created = await rpc(runner.url, 'tools/call', { name: TaskTools.IdempotentJob, arguments: { ms: 1_000 } }, TaskTools.IdempotentJob);
    const taskId = created.result.taskId as string;
    const before = (await table.read(taskId))!;
    await runner.proc.kill();
    await sleep(4 * SWEEP_INTERVAL_MS);
    // Unpolled and unsettled: the sweeper probed the dead runner and left the task.
    expect((await table.read(taskId))!.seq).toBe(before.seq);
    expect(settledLines(sweeper.proc)).toBe(0);
    // The first reader reruns it with its credentials, and it completes.
    let got = await rpc(sweeper.url, 'tasks/get', { taskId }, taskId);
    for (const deadline = Date.now() + 10_000; got.result.status === 'working' && Date.now() < deadline; ) {
      await sleep(100);
      got = await rpc(sweeper.url, 'tasks/get', { taskId }, taskId);
    }
    expect(got.result.status).toBe('completed');
  }, 60_000);

  it('settles it the same with gateways on --log grpc:// (ListWorkingTasks)', async () => {
    const namespace = `swp${process.pid}g`;
    service = await startServiceProcess({
      name: 'session-log',
      command: process.execPath,
      args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--namespace', namespace, '--token', `fleet:${TOKEN}`],
      readyLine: (o) => o.msg === 'listening',
    });
    const log = await SessionLog.create({ servers: nats.url, namespace });
    logs.push(log);
    await killedRunnerIsSwept('grpc', ['--log', `grpc://127.0.0.1:${service.port}`, '--log-token', TOKEN], await log.openTasks(3_600_000));
  }, 60_000);
});
