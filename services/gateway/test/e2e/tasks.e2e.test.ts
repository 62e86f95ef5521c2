import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, startRoundRobinProxy, startServiceProcess, startTaskUpstream, TaskTools } from '@tether/testing';
import type { NatsServer, RoundRobinProxy, ServiceProcess, TaskUpstream } from '@tether/testing';
import { request } from './raw-client.js';

/**
 * Durable tasks (MCP 2026-07-28, the Tasks extension) across real gateway
 * processes on one nats-server, in front of the test kit's task upstream
 * (`startTaskUpstream`: plain SDK v2 tools that know nothing of tasks).
 * Each test talks to named instances directly (A creates, B reads), so
 * "another instance" is never left to a balancer's rotation.
 */

const MAIN = fileURLToPath(new URL('../../dist/main.js', import.meta.url));
const GRPC_MODE = process.env.TETHER_E2E_LOG === 'grpc';
const TITLE = GRPC_MODE
  ? 'SKIPPED in the e2e-grpc project (TETHER_E2E_LOG=grpc): these gateways are started with --nats, so a run there would only repeat the nats run; tasks over --log grpc:// are tested in services/gateway/test/grpc-tasks.int.test.ts'
  : 'tasks across gateway processes (nats mode)';

const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'tasks-e2e', version: '0' },
  // Elicitation too: the upstream's input rounds ask only clients that declare it (else -32021).
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } },
};
const NOT_FOUND = { code: -32602, message: 'Failed to retrieve task: Task not found' };
const ACK = { resultType: 'complete' };

interface Gateway {
  readonly name: string;
  readonly process: ServiceProcess;
  readonly url: string;
}

/** Gateway processes sharing one namespace (their own task stream) on the file's nats-server. */
interface Group {
  readonly gateways: Gateway[];
  stop(): Promise<void>;
}

let nats: NatsServer;
let upstream: TaskUpstream;
let groups = 0;

async function startGroup(count: number, args: readonly string[] = []): Promise<Group> {
  groups += 1;
  const namespace = `tk_${process.pid}_${groups}`;
  const gateways: Gateway[] = [];
  // One after another, as stack.ts does: the first creates the streams, the others verify them.
  for (let i = 0; i < count; i += 1) {
    const name = `g${groups}-${String.fromCharCode(97 + i)}`;
    const proc = await startServiceProcess({
      name,
      command: process.execPath,
      args: [MAIN, '--port', '0', '--nats', nats.url, '--namespace', namespace, '--upstream', upstream.url, '--instance-id', name, ...args],
      readyLine: (json) => json.msg === 'listening',
    });
    gateways.push({ name, process: proc, url: `http://127.0.0.1:${proc.port}/mcp` });
  }
  return {
    gateways,
    stop: async () => void (await Promise.all(gateways.map((g) => g.process.stop('SIGKILL', 2_000).catch(() => undefined)))),
  };
}

interface Answer {
  readonly status: number;
  readonly contentType: string | null;
  readonly text: string;
  readonly body: any;
}

let nextId = 1;

/** One 2026-07-28 request with the routing headers the spec asks for (`Mcp-Name` = the tool or the task id). */
async function rpc(url: string, method: string, params: Record<string, unknown>, opts: { name?: string; headers?: Record<string, string>; id?: number } = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      'mcp-method': method,
      ...(opts.name === undefined ? {} : { 'mcp-name': opts.name }),
      ...opts.headers,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: opts.id ?? nextId++, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  return { status: res.status, contentType: res.headers.get('content-type'), text, body: parseAnswer(text) };
}

/** A JSON body, or the last JSON-RPC message of an event stream. */
function parseAnswer(text: string): unknown {
  if (text.trimStart().startsWith('{')) return JSON.parse(text);
  const data = text.split('\n').filter((l) => l.startsWith('data: {'));
  return data.length === 0 ? undefined : JSON.parse(data.at(-1)!.slice(6));
}

const callTool = (url: string, tool: string, args: Record<string, unknown>, headers?: Record<string, string>) =>
  rpc(url, 'tools/call', { name: tool, arguments: args }, { name: tool, ...(headers === undefined ? {} : { headers }) });
const taskCall = (url: string, method: 'tasks/get' | 'tasks/update' | 'tasks/cancel', taskId: string, extra: Record<string, unknown> = {}, opts: { headers?: Record<string, string>; id?: number } = {}) =>
  rpc(url, method, { taskId, ...extra }, { name: taskId, ...opts });

/** Calls `tool` and expects a CreateTaskResult; the task id. */
async function createTask(url: string, tool: string, args: Record<string, unknown>, headers?: Record<string, string>): Promise<string> {
  const created = await callTool(url, tool, args, headers);
  expect(created.status).toBe(200);
  expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
  return created.body.result.taskId as string;
}

/** Polls tasks/get until `done` holds for the result; fails after `deadlineMs`. */
async function pollTask(url: string, taskId: string, done: (result: any) => boolean, opts: { everyMs?: number; deadlineMs?: number; headers?: Record<string, string> } = {}): Promise<any> {
  const deadline = Date.now() + (opts.deadlineMs ?? 15_000);
  let last: Answer | undefined;
  for (;;) {
    last = await taskCall(url, 'tasks/get', taskId, {}, opts.headers === undefined ? {} : { headers: opts.headers });
    if (last.body?.result !== undefined && done(last.body.result)) return last.body.result;
    if (Date.now() >= deadline) throw new Error(`task ${taskId.slice(0, 6)}… never reached the awaited state; last answer ${last.status} ${last.text.slice(0, 400)}`);
    await sleep(opts.everyMs ?? 100);
  }
}

const isSettled = (r: any) => ['completed', 'failed', 'cancelled'].includes(r.status);

async function until(what: string, check: () => boolean, deadlineMs = 10_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!check()) {
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

/** How many of the gateway's log lines carry `msg` (read so far: a line may come after the answer it goes with). */
const logged = (gateway: Gateway, msg: string): number => gateway.process.stdoutJson.filter((line) => line.msg === msg).length;
/** Waits for the gateway to log `msg` (or finds it logged already). */
const logs = (gateway: Gateway, msg: string): Promise<string> => gateway.process.waitForLine((line) => line.msg === msg, { timeoutMs: 5_000, includePast: true });
const RERUN_LOG = 'task runner lost: running the idempotent call again';

const randomTaskId = () => randomBytes(16).toString('base64url');
const textOf = (result: any): string => result.result.content[0].text;

describe.skipIf(GRPC_MODE)(TITLE, () => {
  beforeAll(async () => {
    nats = await startNatsServer();
    upstream = await startTaskUpstream();
  });
  afterAll(async () => {
    await upstream?.close();
    await nats?.cleanup();
  });

  describe('three gateways, default task flags', () => {
    let group: Group;
    let a: Gateway, b: Gateway, c: Gateway;
    beforeAll(async () => {
      group = await startGroup(3);
      [a, b, c] = group.gateways as [Gateway, Gateway, Gateway];
    });
    afterAll(async () => group?.stop());

    it('a task created through A is read through B, completed with the upstream\'s exact result', async () => {
      // `hold`: working until released, whatever the machine's load.
      const key = `cross-${randomTaskId()}`;
      const taskId = await createTask(a.url, TaskTools.Hold, { key });
      const first = await taskCall(b.url, 'tasks/get', taskId);
      expect(first.status).toBe(200);
      expect(first.body.result).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
      upstream.release(key, `released ${key}`);
      const done = await pollTask(b.url, taskId, isSettled);
      expect(done).toMatchObject({ resultType: 'complete', taskId, status: 'completed' });
      // The same call straight to the upstream (released: it answers at once) is the result the task holds.
      const direct = await callTool(upstream.url, TaskTools.Hold, { key });
      expect(done.result).toEqual(direct.body.result);
      expect(done.result.content).toEqual([{ type: 'text', text: `released ${key}` }]);
      // And the same from C, which never touched it.
      expect((await taskCall(c.url, 'tasks/get', taskId)).body.result).toEqual(done);
    });

    it('tasks/cancel through B closes the upstream call running on A; the task ends cancelled; a second cancel is the same empty ack', async () => {
      const abortsBefore = upstream.aborts(TaskTools.SlowCompute);
      const taskId = await createTask(a.url, TaskTools.SlowCompute, { seconds: 30, label: 'cancel-me' });
      const cancel = await taskCall(b.url, 'tasks/cancel', taskId, {}, { id: 77 });
      expect(cancel.status).toBe(200);
      expect(cancel.body).toEqual({ jsonrpc: '2.0', id: 77, result: ACK });
      await until('the upstream call to be aborted', () => upstream.aborts(TaskTools.SlowCompute) > abortsBefore);
      const settled = await pollTask(b.url, taskId, isSettled);
      expect(settled.status).toBe('cancelled');
      expect(settled).not.toHaveProperty('result');
      expect(settled).not.toHaveProperty('error');
      const again = await taskCall(b.url, 'tasks/cancel', taskId, {}, { id: 77 });
      expect(again.status).toBe(200);
      expect(again.text).toBe(cancel.text);
      const viaC = await taskCall(c.url, 'tasks/cancel', taskId, {}, { id: 77 });
      expect(viaC.text).toBe(cancel.text);
      expect(upstream.aborts(TaskTools.SlowCompute)).toBe(abortsBefore + 1);
      expect((await taskCall(a.url, 'tasks/get', taskId)).body.result.status).toBe('cancelled');
    });

    it('an input_required round is answered through another instance (confirm_delete)', async () => {
      const taskId = await createTask(a.url, TaskTools.ConfirmDelete, { path: '/srv/e2e.txt' });
      const asking = await pollTask(a.url, taskId, (r) => r.status !== 'working');
      expect(asking.status, JSON.stringify(asking)).toBe('input_required');
      expect(Object.keys(asking.inputRequests)).toEqual(['confirm']);
      expect(asking.inputRequests.confirm).toMatchObject({ method: 'elicitation/create', params: { message: 'Delete /srv/e2e.txt?' } });
      const update = await taskCall(b.url, 'tasks/update', taskId, { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } });
      expect(update.status).toBe(200);
      expect(update.body.result).toEqual(ACK);
      const done = await pollTask(c.url, taskId, isSettled);
      expect(done.status).toBe('completed');
      expect(textOf(done)).toBe('deleted /srv/e2e.txt');
    });

    it('multi_input answered in parts through two other instances: one key left, then completed', async () => {
      const taskId = await createTask(a.url, TaskTools.MultiInput, {});
      const asking = await pollTask(b.url, taskId, (r) => r.status !== 'working');
      expect(asking.status, JSON.stringify(asking)).toBe('input_required');
      expect(Object.keys(asking.inputRequests).sort()).toEqual(['first', 'second']);
      const one = await taskCall(b.url, 'tasks/update', taskId, { inputResponses: { first: { action: 'accept', content: { name: 'Ada' } } } });
      expect(one.body.result).toEqual(ACK);
      const partial = (await taskCall(c.url, 'tasks/get', taskId)).body.result;
      expect(partial.status).toBe('input_required');
      expect(Object.keys(partial.inputRequests)).toEqual(['second']);
      expect(partial.inputRequests.second).toEqual(asking.inputRequests.second);
      const two = await taskCall(c.url, 'tasks/update', taskId, { inputResponses: { second: { action: 'accept', content: { name: 'Grace' } } } });
      expect(two.body.result).toEqual(ACK);
      const done = await pollTask(a.url, taskId, isSettled);
      expect(done.status).toBe('completed');
      expect(textOf(done)).toBe('first: Ada, second: Grace');
    });

    it('a task waiting for input is cancelled through another instance; a late answer then changes nothing', async () => {
      const taskId = await createTask(a.url, TaskTools.ConfirmDelete, { path: '/srv/never.txt' });
      expect((await pollTask(b.url, taskId, (r) => r.status !== 'working')).status).toBe('input_required');
      const callsBefore = upstream.calls(TaskTools.ConfirmDelete);
      expect((await taskCall(c.url, 'tasks/cancel', taskId)).body.result).toEqual(ACK);
      const cancelled = (await taskCall(a.url, 'tasks/get', taskId)).body.result;
      expect(cancelled.status).toBe('cancelled');
      expect(cancelled).not.toHaveProperty('inputRequests');
      expect((await taskCall(b.url, 'tasks/update', taskId, { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } })).body.result).toEqual(ACK);
      await sleep(300);
      expect((await taskCall(b.url, 'tasks/get', taskId)).body.result).toEqual(cancelled);
      expect(upstream.calls(TaskTools.ConfirmDelete)).toBe(callsBefore);
    });

    it('subscriptions/listen on B sees every status change of a task running on A: ack first, working, completed, then the end', async () => {
      const key = `listen-${randomTaskId()}`;
      const taskId = await createTask(a.url, TaskTools.Hold, { key });
      const listen = await request(b.url, {
        method: 'POST',
        headers: { 'mcp-protocol-version': PROTOCOL, 'mcp-method': 'subscriptions/listen' },
        body: { jsonrpc: '2.0', id: 'listen-1', method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: META } },
      });
      expect(listen.status).toBe(200);
      expect(listen.headers.get('content-type')).toMatch(/^text\/event-stream/);
      const messages: any[] = [];
      const deadline = setTimeout(() => listen.cancel(), 15_000);
      for await (const m of listen.messages) {
        if (m.data === '') continue;
        messages.push(JSON.parse(m.data));
        // Released only once the listen has shown the task working: the change to completed must come live, from A.
        if (messages.length === 2) upstream.release(key, 'heard by the listener');
      }
      clearTimeout(deadline);
      expect(messages[0]).toEqual({
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: { notifications: { taskIds: [taskId] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } },
      });
      const changes = messages.filter((m) => m.method === 'notifications/tasks');
      expect(changes.map((m) => m.params.status)).toEqual(['working', 'completed']);
      expect(changes.every((m) => m.params.taskId === taskId && m.params._meta['io.modelcontextprotocol/subscriptionId'] === 'listen-1')).toBe(true);
      expect(changes[1].params.result.content).toEqual([{ type: 'text', text: 'heard by the listener' }]);
      expect(messages.at(-1)).toEqual({ jsonrpc: '2.0', id: 'listen-1', result: { resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } } });
      expect(messages).toHaveLength(4);
    });

    it('behind a balancer that sends every request to the next instance: create, poll, answer in two parts, complete', async () => {
      const proxy: RoundRobinProxy = await startRoundRobinProxy(group.gateways.map((g) => new URL(g.url).origin));
      try {
        const url = `${proxy.url}/mcp`;
        const taskId = await createTask(url, TaskTools.MultiInput, {});
        expect((await pollTask(url, taskId, (r) => r.status !== 'working')).status).toBe('input_required');
        expect((await taskCall(url, 'tasks/update', taskId, { inputResponses: { first: { action: 'accept', content: { name: 'Lin' } } } })).body.result).toEqual(ACK);
        expect((await taskCall(url, 'tasks/update', taskId, { inputResponses: { second: { action: 'accept', content: { name: 'Kay' } } } })).body.result).toEqual(ACK);
        const done = await pollTask(url, taskId, isSettled);
        expect(textOf(done)).toBe('first: Lin, second: Kay');
        const targets = proxy.history().map((r) => r.target);
        expect(targets.length).toBeGreaterThanOrEqual(5);
        expect(targets.every((t, i) => i === 0 || t !== targets[i - 1])).toBe(true);
        expect(new Set(targets).size).toBe(3);
      } finally {
        await proxy.close();
      }
    });

    it('a forged or malformed task id is -32602 "Task not found" (or a named params error), never a 500', async () => {
      const strings = [randomTaskId(), '../x', '', 'x'.repeat(10 * 1024), 'AAAAAAAAAAAAAAAAAAAAA*', `${randomTaskId()}.>`];
      for (const taskId of strings) {
        for (const [method, extra] of [['tasks/get', {}], ['tasks/update', { inputResponses: { k: { action: 'cancel' } } }], ['tasks/cancel', {}]] as const) {
          const answer = await taskCall(b.url, method, taskId, extra, { id: 9 });
          expect({ taskId: taskId.slice(0, 24), method, status: answer.status, body: answer.body }).toEqual({ taskId: taskId.slice(0, 24), method, status: 200, body: { jsonrpc: '2.0', id: 9, error: NOT_FOUND } });
        }
      }
      for (const taskId of [12345, null, { id: 'x' }, ['a']]) {
        for (const [method, extra] of [['tasks/get', {}], ['tasks/update', { inputResponses: {} }], ['tasks/cancel', {}]] as const) {
          const answer = await rpc(b.url, method, { taskId, ...extra }, { name: String(taskId), id: 10 });
          expect({ taskId, method, status: answer.status, code: answer.body.error?.code, message: answer.body.error?.message }).toEqual({
            taskId,
            method,
            status: 200,
            code: -32602,
            message: `${method} needs params.taskId (a string)`,
          });
        }
      }
      // No taskId at all.
      const missing = await rpc(b.url, 'tasks/get', {}, { id: 11 });
      expect(missing.status).toBe(200);
      expect(missing.body.error).toEqual({ code: -32602, message: 'tasks/get needs params.taskId (a string)' });
      // Still serving.
      const taskId = await createTask(a.url, TaskTools.SlowCompute, { seconds: 0.4, label: 'after-forgery' });
      expect(textOf(await pollTask(b.url, taskId, isSettled))).toBe('slow_compute after-forgery done after 0.4 s');
    });
  });

  describe('the runner is SIGKILLed mid-task', () => {
    it('another instance settles the task failed, runner_lost, naming the stopped instance (takeover time printed)', async () => {
      const group = await startGroup(2);
      try {
        const [a, b] = group.gateways as [Gateway, Gateway];
        const key = `kill-${randomTaskId()}`;
        const holdsBefore = upstream.inFlight(TaskTools.Hold);
        const taskId = await createTask(a.url, TaskTools.Hold, { key });
        expect((await taskCall(b.url, 'tasks/get', taskId)).body.result.status).toBe('working');
        expect(upstream.inFlight(TaskTools.Hold)).toBe(holdsBefore + 1);

        const killedAt = performance.now();
        const killed = a.process.kill();
        let failedAt: number | undefined;
        let result: any;
        let polls = 0;
        while (performance.now() - killedAt < 10_000) {
          polls += 1;
          const answer = await taskCall(b.url, 'tasks/get', taskId);
          expect(answer.status).toBe(200);
          result = answer.body.result;
          if (result.status !== 'working') {
            failedAt = performance.now();
            break;
          }
          await sleep(50);
        }
        await killed;
        expect(failedAt, 'B never answered anything but working within 10 s of the kill').toBeDefined();
        console.log(`tasks e2e: runner_lost takeover ${(failedAt! - killedAt).toFixed(0)} ms from SIGKILL to the first failed tasks/get on B (polled every 50 ms, ${polls} polls)`);
        expect(result.status).toBe('failed');
        expect(result.error.code).toBe(-32603);
        expect(result.error.data.reason).toBe('runner_lost');
        expect(result.error.message).toMatch(/gateway instance running this task stopped/);
        expect(result.statusMessage).toMatch(/gateway instance running this task stopped/);
        expect(result).not.toHaveProperty('result');
        // Settled for good: the same from B again; the upstream's call went with A's connection.
        expect((await taskCall(b.url, 'tasks/get', taskId)).body.result).toEqual(result);
        await until('the upstream to see the held call closed', () => upstream.inFlight(TaskTools.Hold) === holdsBefore);
      } finally {
        await group.stop();
      }
    });
  });

  describe('--task-retry idempotent', () => {
    it('an idempotent_job whose runner is killed is run again by the reader and completes; a non-idempotent tool still fails runner_lost', async () => {
      const group = await startGroup(3, ['--task-retry', 'idempotent']);
      try {
        const [a, b, c] = group.gateways as [Gateway, Gateway, Gateway];
        const callsBefore = upstream.calls(TaskTools.IdempotentJob);
        const taskId = await createTask(a.url, TaskTools.IdempotentJob, { ms: 2_000 });
        expect(upstream.calls(TaskTools.IdempotentJob)).toBe(callsBefore + 1);
        await a.process.kill();
        const done = await pollTask(b.url, taskId, isSettled, { everyMs: 50 });
        expect(done.status).toBe('completed');
        expect(upstream.calls(TaskTools.IdempotentJob)).toBe(callsBefore + 2);
        // `done <n>`: n counts the calls so far, so the answer is the rerun's.
        expect(textOf(done)).toBe(`done ${callsBefore + 2}`);
        expect((await taskCall(c.url, 'tasks/get', taskId)).body.result).toEqual(done);
        // B, whose read found the runner gone, ran it again (the record's runnerInstance is not on the wire; B's log says it).
        await logs(b, RERUN_LOG);
        expect(logged(b, RERUN_LOG)).toBe(1);
        expect(logged(c, RERUN_LOG)).toBe(0);

        const key = `retry-${randomTaskId()}`;
        const held = await createTask(b.url, TaskTools.Hold, { key });
        const holdCalls = upstream.calls(TaskTools.Hold);
        await b.process.kill();
        const lost = await pollTask(c.url, held, isSettled, { everyMs: 50 });
        expect(lost.status).toBe('failed');
        expect(lost.error.data.reason).toBe('runner_lost');
        expect(lost.error.message).toMatch(/gateway instance running this task stopped/);
        expect(upstream.calls(TaskTools.Hold)).toBe(holdCalls);
        await logs(c, 'task runner lost: settled failed');
        expect(logged(c, 'task runner lost: settled failed')).toBe(1);
      } finally {
        await group.stop();
      }
    });
  });

  describe('--task-retry idempotent, two readers at once', () => {
    it('two instances polling the task of a killed runner run it again exactly once (compare-and-set of the runner)', async () => {
      const group = await startGroup(3, ['--task-retry', 'idempotent']);
      try {
        const [a, b, c] = group.gateways as [Gateway, Gateway, Gateway];
        const callsBefore = upstream.calls(TaskTools.IdempotentJob);
        const taskId = await createTask(a.url, TaskTools.IdempotentJob, { ms: 1_500 });
        await a.process.kill();
        const [viaB, viaC] = await Promise.all([pollTask(b.url, taskId, isSettled, { everyMs: 20 }), pollTask(c.url, taskId, isSettled, { everyMs: 20 })]);
        expect(viaB.status).toBe('completed');
        expect(viaC).toEqual(viaB);
        expect(upstream.calls(TaskTools.IdempotentJob)).toBe(callsBefore + 2);
        await Promise.any([logs(b, RERUN_LOG), logs(c, RERUN_LOG)]);
        await sleep(200);
        expect([b, c].map((g) => logged(g, RERUN_LOG)).sort()).toEqual([0, 1]);
      } finally {
        await group.stop();
      }
    });
  });

  describe('a drained runner (SIGTERM)', () => {
    it('a call that ends within --drain-timeout completes into its task; one still running then is closed and settled failed, "the gateway stopped"', async () => {
      const group = await startGroup(3, ['--drain-timeout', '2s']);
      try {
        const [a, b, c] = group.gateways as [Gateway, Gateway, Gateway];
        const finishKey = `drain-finishes-${randomTaskId()}`;
        const callsBefore = upstream.calls(TaskTools.Hold);
        const finishes = await createTask(a.url, TaskTools.Hold, { key: finishKey });
        const stopping = a.process.stop('SIGTERM', 15_000);
        await a.process.waitForLine((line) => line.msg === 'draining', { timeoutMs: 5_000, includePast: true });
        upstream.release(finishKey, 'finished while draining');
        expect(await stopping).toEqual({ code: 0, signal: null });
        const done = await pollTask(b.url, finishes, isSettled, { everyMs: 50 });
        expect(done.status).toBe('completed');
        expect(textOf(done)).toBe('finished while draining');
        expect(upstream.calls(TaskTools.Hold)).toBe(callsBefore + 1);

        const abortsBefore = upstream.aborts(TaskTools.Hold);
        const held = await createTask(b.url, TaskTools.Hold, { key: `drain-${randomTaskId()}` });
        const drainedAt = Date.now();
        expect(await b.process.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
        expect(Date.now() - drainedAt).toBeGreaterThanOrEqual(1_900);
        const stopped = await pollTask(c.url, held, isSettled, { everyMs: 50 });
        expect(stopped.status).toBe('failed');
        expect(stopped.error.code).toBe(-32603);
        expect(stopped.error.message).toMatch(/the gateway stopped/);
        expect(upstream.aborts(TaskTools.Hold)).toBe(abortsBefore + 1);
      } finally {
        await group.stop();
      }
    });

    it('with --task-retry idempotent, an idempotent_job still running at the drain timeout is rerun by the next reader and completes (design.md: "their tasks settle failed (the gateway stopped), or are rerun as above")', async () => {
      const group = await startGroup(2, ['--drain-timeout', '500ms', '--task-retry', 'idempotent']);
      try {
        const [a, b] = group.gateways as [Gateway, Gateway];
        const callsBefore = upstream.calls(TaskTools.IdempotentJob);
        const taskId = await createTask(a.url, TaskTools.IdempotentJob, { ms: 3_000 });
        expect(await a.process.stop('SIGTERM', 15_000)).toEqual({ code: 0, signal: null });
        const settled = await pollTask(b.url, taskId, isSettled, { everyMs: 50 });
        expect(settled, JSON.stringify(settled)).toMatchObject({ status: 'completed' });
        expect(upstream.calls(TaskTools.IdempotentJob)).toBe(callsBefore + 2);
      } finally {
        await group.stop();
      }
    });
  });

  describe('--task-ttl 2s', () => {
    it('a task is readable before its TTL, then -32602 "expired"; a call still running at expiry is closed upstream', async () => {
      const group = await startGroup(2, ['--task-ttl', '2s']);
      try {
        const [a, b] = group.gateways as [Gateway, Gateway];
        const abortsBefore = upstream.aborts(TaskTools.Hold);
        // One settles at once, one is still running when both expire.
        const doneKey = `ttl-done-${randomTaskId()}`;
        const settles = await createTask(a.url, TaskTools.Hold, { key: doneKey });
        upstream.release(doneKey, 'settled before expiry');
        const outlives = await createTask(a.url, TaskTools.Hold, { key: `ttl-running-${randomTaskId()}` });
        const done = await pollTask(b.url, settles, isSettled);
        expect(done).toMatchObject({ status: 'completed', ttlMs: 2_000 });
        expect(Date.now()).toBeLessThan(Date.parse(done.createdAt) + 2_000);
        const running = (await taskCall(b.url, 'tasks/get', outlives)).body.result;
        expect(running).toMatchObject({ status: 'working', ttlMs: 2_000 });
        const lastExpiry = Date.parse(running.createdAt) + 2_000;
        expect(Date.now()).toBeLessThan(lastExpiry);

        await sleep(Math.max(0, lastExpiry - Date.now()) + 150);
        for (const taskId of [settles, outlives]) {
          for (const gateway of [a, b]) {
            const answer = await taskCall(gateway.url, 'tasks/get', taskId, {}, { id: 5 });
            expect(answer.status).toBe(200);
            expect(answer.body).toEqual({ jsonrpc: '2.0', id: 5, error: { code: -32602, message: expect.stringContaining('expired') } });
            // update and cancel say the same of an expired task.
            for (const [method, extra] of [['tasks/update', { inputResponses: {} }], ['tasks/cancel', {}]] as const) {
              expect((await taskCall(gateway.url, method, taskId, extra, { id: 5 })).text).toBe(answer.text);
            }
          }
        }
        await until('the expired task\'s upstream call to be closed', () => upstream.aborts(TaskTools.Hold) > abortsBefore, 5_000);
        expect(upstream.aborts(TaskTools.Hold)).toBe(abortsBefore + 1);
      } finally {
        await group.stop();
      }
    });
  });

  describe('another principal (--identity-header x-user)', () => {
    it('user b gets for user a\'s task exactly the error body of an unknown id, and changes nothing', async () => {
      const group = await startGroup(2, ['--identity-header', 'x-user']);
      try {
        const [a, b] = group.gateways as [Gateway, Gateway];
        const asA = { 'x-user': 'user-a' };
        const asB = { 'x-user': 'user-b' };
        const key = `principal-${randomTaskId()}`;
        const taskId = await createTask(a.url, TaskTools.Hold, { key }, asA);
        const unknown = randomTaskId();
        const calls = [
          ['tasks/get', {}],
          ['tasks/update', { inputResponses: { anything: { action: 'accept', content: {} } } }],
          ['tasks/cancel', {}],
        ] as const;
        for (const [method, extra] of calls) {
          for (const gateway of [a, b]) {
            const theirs = await taskCall(gateway.url, method, taskId, extra, { headers: asB, id: 3 });
            const none = await taskCall(gateway.url, method, unknown, extra, { headers: asB, id: 3 });
            expect(none.body).toEqual({ jsonrpc: '2.0', id: 3, error: NOT_FOUND });
            expect({ status: theirs.status, contentType: theirs.contentType, text: theirs.text }).toEqual({ status: none.status, contentType: none.contentType, text: none.text });
            // No identity at all is another principal too.
            const anonymous = await taskCall(gateway.url, method, taskId, extra, { id: 3 });
            expect(anonymous.text).toBe(none.text);
          }
        }
        // A listen by user b naming user a's task accepts no id and ends at once.
        const listen = await fetch(b.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': 'subscriptions/listen', ...asB },
          body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: META } }),
          signal: AbortSignal.timeout(10_000),
        });
        const heard = (await listen.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
        expect(heard.map((m) => m.method ?? 'result')).toEqual(['notifications/subscriptions/acknowledged', 'result']);
        expect(heard[0].params.notifications.taskIds).toEqual([]);
        // user b's cancel did nothing: the task still runs for user a, and completes.
        const mine = await taskCall(b.url, 'tasks/get', taskId, {}, { headers: asA });
        expect(mine.body.result.status).toBe('working');
        upstream.release(key, 'released for user a');
        const done = await pollTask(b.url, taskId, isSettled, { headers: asA });
        expect(done.status).toBe('completed');
        expect(textOf(done)).toBe('released for user a');
      } finally {
        await group.stop();
      }
    });
  });
});
