import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { OwnedTaskTools, startNatsServer, startOwnedTasksUpstream, startRoundRobinProxy } from '@tether/testing';
import type { NatsServer, OwnedTasksUpstream, RoundRobinProxy } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * Upstreams that run the Tasks extension themselves (issue 33, part 1):
 * two replicas of the test kit's in-memory task server behind two gateways
 * on one nats-server. A task created through gateway A is read, updated,
 * listened to and cancelled through gateway B, and reaches the replica
 * that holds it; a plain round-robin balancer in front of the same two
 * replicas loses it.
 */

const PROTOCOL = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'owned-tasks-test', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} }, extensions: { [TASKS]: {} } },
};
const NOT_FOUND = { code: -32602, message: 'Failed to retrieve task: Task not found' };

let nats: NatsServer;
let replicas: OwnedTasksUpstream[];
let stack: InProcessStack;
let nextId = 1;

beforeAll(async () => {
  nats = await startNatsServer();
  replicas = [await startOwnedTasksUpstream({ name: 'r1' }), await startOwnedTasksUpstream({ name: 'r2' })];
  stack = await startInProcessStack({ nats, gateways: 2, upstreamUrl: replicas.map((r) => r.url).join(','), args: ['--task-after', '100'] });
});
afterAll(async () => {
  await stack?.teardown();
  for (const r of replicas ?? []) await r.close();
  await nats?.cleanup();
});

interface Answer {
  readonly status: number;
  readonly body: any;
  readonly messages: any[];
}

/** One 2026-07-28 request with the routing headers the spec asks for. */
async function rpc(url: string, method: string, params: Record<string, unknown>, opts: { name?: string; principal?: string; meta?: Record<string, unknown> } = {}): Promise<Answer> {
  const id = nextId++;
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': PROTOCOL,
      'mcp-method': method,
      ...(opts.name === undefined ? {} : { 'mcp-name': opts.name }),
      ...(opts.principal === undefined ? {} : { authorization: `Bearer ${opts.principal}` }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: opts.meta ?? META } }),
  });
  const text = await res.text();
  const messages = text.startsWith('{') ? [JSON.parse(text)] : text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)));
  return { status: res.status, body: messages.find((m) => m.id === id) ?? messages[0], messages };
}

/** Which replica holds `taskId`. */
const holder = (taskId: string): OwnedTasksUpstream | undefined => replicas.find((r) => r.taskIds().includes(taskId));

async function create(url: string, tool: string, args: Record<string, unknown>, principal?: string): Promise<string> {
  const created = await rpc(url, 'tools/call', { name: tool, arguments: args }, { name: tool, ...(principal === undefined ? {} : { principal }) });
  expect(created.body.result, JSON.stringify(created.body)).toMatchObject({ resultType: 'task', status: 'working' });
  return created.body.result.taskId as string;
}

describe('tasks of an upstream that runs the Tasks extension itself', () => {
  it('server/discover through the gateway shows the extension, and a plain call is answered by the upstream as is', async () => {
    const discover = await rpc(stack.urls[0]!, 'server/discover', {});
    expect(discover.body.result.capabilities.extensions[TASKS]).toEqual({});
    const greet = await rpc(stack.urls[0]!, 'tools/call', { name: OwnedTaskTools.Greet, arguments: { name: 'x' } }, { name: OwnedTaskTools.Greet });
    expect(greet.body.result.content[0].text).toBe('Hello, x!');
  });

  it('a task created through A is read through B from the replica that holds it, until it completes', async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 0.6, label: 'ab' });
    // The upstream's own id, untouched (a UUID: the gateway's ids are 22 base64url characters).
    expect(taskId).toMatch(/^[0-9a-f-]{36}$/);
    const owner = holder(taskId)!;
    expect(owner).toBeDefined();
    const before = owner.received('tasks/get');
    const other = replicas.find((r) => r !== owner)!;
    const otherBefore = other.received('tasks/get');
    for (let i = 0; i < 4; i += 1) {
      const got = await rpc(stack.urls[1]!, 'tasks/get', { taskId }, { name: taskId });
      expect(got.body.result, JSON.stringify(got.body)).toMatchObject({ resultType: 'complete', taskId, status: 'working' });
    }
    expect(owner.received('tasks/get') - before).toBe(4);
    expect(other.received('tasks/get')).toBe(otherBefore);
    await sleep(800);
    const done = await rpc(stack.urls[1]!, 'tasks/get', { taskId }, { name: taskId });
    expect(done.body.result).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: `slow_compute ab done after 0.6 s (served by ${owner.name})` }] } });
  });

  it('tasks/update through B answers the input round held by the replica; tasks/cancel through A cancels another', async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.ConfirmDelete, { filename: 'f.txt' });
    let got: Answer;
    for (;;) {
      got = await rpc(stack.urls[1]!, 'tasks/get', { taskId }, { name: taskId });
      if (got.body.result?.status !== 'working') break;
      await sleep(100);
    }
    expect(got.body.result).toMatchObject({ status: 'input_required', inputRequests: { confirm: { method: 'elicitation/create' } } });
    const ack = await rpc(stack.urls[1]!, 'tasks/update', { taskId, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } }, { name: taskId });
    expect(ack.body.result).toMatchObject({ resultType: 'complete' });
    const done = await rpc(stack.urls[0]!, 'tasks/get', { taskId }, { name: taskId });
    expect(done.body.result).toMatchObject({ status: 'completed', result: { content: [{ text: 'deleted f.txt' }] } });

    const slow = await create(stack.urls[1]!, OwnedTaskTools.SlowCompute, { seconds: 30 });
    const cancelled = await rpc(stack.urls[0]!, 'tasks/cancel', { taskId: slow }, { name: slow });
    expect(cancelled.body.result).toMatchObject({ resultType: 'complete' });
    const after = await rpc(stack.urls[1]!, 'tasks/get', { taskId: slow }, { name: slow });
    expect(after.body.result).toMatchObject({ status: 'cancelled' });
  });

  it('a listen through B naming the task is served by the replica that holds it', async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 0.5 });
    const listen = await rpc(stack.urls[1]!, 'subscriptions/listen', { notifications: { taskIds: [taskId, 'no-such-task'] } });
    expect(listen.messages[0]).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: [taskId] } } });
    const statuses = listen.messages.filter((m) => m.method === 'notifications/tasks').map((m) => m.params.status);
    expect(statuses[0]).toBe('working');
    expect(statuses.at(-1)).toBe('completed');
    expect(listen.messages.find((m) => m.method === 'notifications/tasks' && m.params.status === 'completed').params.result.content[0].text).toContain(`served by ${holder(taskId)!.name}`);
  });

  it("another principal's tasks/get, update, cancel and listen get -32602 or nothing, and the upstream is never asked", async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 0.5 }, 'alice');
    const counts = () => replicas.map((r) => ['tasks/get', 'tasks/update', 'tasks/cancel', 'subscriptions/listen'].map((m) => r.received(m)).join());
    const before = counts();
    const get = await rpc(stack.urls[1]!, 'tasks/get', { taskId }, { name: taskId, principal: 'mallory' });
    expect(get.body.error).toEqual(NOT_FOUND);
    const unknown = await rpc(stack.urls[1]!, 'tasks/get', { taskId: 'aaaaaaaa-0000-0000-0000-000000000000' }, { name: 'aaaaaaaa-0000-0000-0000-000000000000', principal: 'mallory' });
    expect(unknown.body.error).toEqual(NOT_FOUND);
    const cancel = await rpc(stack.urls[0]!, 'tasks/cancel', { taskId }, { name: taskId, principal: 'mallory' });
    expect(cancel.body.error).toEqual(NOT_FOUND);
    const listen = await rpc(stack.urls[1]!, 'subscriptions/listen', { notifications: { taskIds: [taskId] } }, { principal: 'mallory' });
    expect(listen.messages[0]).toMatchObject({ params: { notifications: { taskIds: [] } } });
    expect(counts()).toEqual(before);
    // Its owner still reads it.
    const mine = await rpc(stack.urls[1]!, 'tasks/get', { taskId }, { name: taskId, principal: 'alice' });
    expect(mine.body.result).toMatchObject({ taskId });
  });

  it('any other request whose Mcp-Name is the task id (here the draft tasks/stream, not served by the gateway) reaches the replica that holds it', async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 0.3 });
    const owner = holder(taskId)!;
    const other = replicas.find((r) => r !== owner)!;
    const [ownerBefore, otherBefore] = [owner.received('tasks/stream'), other.received('tasks/stream')];
    for (let i = 0; i < 3; i += 1) await rpc(stack.urls[i % 2]!, 'tasks/stream', { taskId, after: 0 }, { name: taskId });
    expect(owner.received('tasks/stream') - ownerBefore).toBe(3);
    expect(other.received('tasks/stream')).toBe(otherBefore);
  });

  it('a client that declared nothing gets no task: the upstream answers the call itself', async () => {
    const meta = { ...META, 'io.modelcontextprotocol/clientCapabilities': {} };
    const plain = await rpc(stack.urls[0]!, 'tools/call', { name: OwnedTaskTools.SlowCompute, arguments: { seconds: 0.2, label: 'plain' } }, { name: OwnedTaskTools.SlowCompute, meta });
    expect(plain.body.result).toMatchObject({ content: [{ text: expect.stringContaining('slow_compute plain done') }] });
    expect(plain.body.result.resultType).not.toBe('task');
  });

  it('an official SDK v2 client discovers the extension and reads an upstream-owned task through another gateway', async () => {
    const taskId = await create(stack.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 5 });
    const client = new Client({ name: 'sdk-owned-tasks', version: '0' }, { versionNegotiation: { mode: { pin: PROTOCOL } }, capabilities: { extensions: { [TASKS]: {} } } } as never);
    await client.connect(new StreamableHTTPClientTransport(new URL(stack.urls[1]!)));
    try {
      expect((client.getServerCapabilities() as { extensions?: Record<string, unknown> } | undefined)?.extensions?.[TASKS]).toEqual({});
      const task = await client.request({ method: 'tasks/get', params: { taskId } } as never, z.object({ taskId: z.string(), status: z.string() }).passthrough());
      expect(task).toMatchObject({ taskId, status: 'working' });
    } finally {
      await client.close();
    }
  });
});

describe('a replica that is gone', () => {
  it('leaves its tasks failed with a named reason, through any gateway, never a transport error or another replica\'s -32602', async () => {
    const spare = await startOwnedTasksUpstream({ name: 'spare' });
    const solo = await startInProcessStack({ nats, gateways: 2, upstreamUrl: spare.url, args: ['--task-after', '100'] });
    try {
      const taskId = await create(solo.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 30 });
      await spare.close();
      const got = await rpc(solo.urls[1]!, 'tasks/get', { taskId }, { name: taskId });
      expect(got.status).toBe(200);
      expect(got.body.result).toMatchObject({ taskId, status: 'failed', statusMessage: expect.stringContaining('no longer accepts connections'), error: { code: -32603, data: { reason: 'replica_gone' } } });
      // Stored: the other gateway says the same, without asking.
      const again = await rpc(solo.urls[0]!, 'tasks/get', { taskId }, { name: taskId });
      expect(again.body.result).toMatchObject({ status: 'failed', error: { data: { reason: 'replica_gone' } } });
      const listen = await rpc(solo.urls[0]!, 'subscriptions/listen', { notifications: { taskIds: [taskId] } });
      expect(listen.messages.map((m) => m.method ?? 'result')).toEqual(['notifications/subscriptions/acknowledged', 'notifications/tasks', 'result']);
      expect(listen.messages[1].params).toMatchObject({ taskId, status: 'failed' });
    } finally {
      await solo.teardown();
      await spare.close();
    }
  });
});

describe('a replica that restarted empty', () => {
  for (const first of ['tasks/cancel', 'tasks/update'] as const) {
    it(`whichever method asks first (${first}), its forgotten task is failed replica_forgot, never the replica's -32602`, async () => {
      const before = await startOwnedTasksUpstream({ name: 'before' });
      const solo = await startInProcessStack({ nats, gateways: 2, upstreamUrl: before.url, args: ['--task-after', '100'] });
      let after: Awaited<ReturnType<typeof startOwnedTasksUpstream>> | undefined;
      try {
        const taskId = await create(solo.urls[0]!, OwnedTaskTools.SlowCompute, { seconds: 30 });
        await before.close();
        // The same address, a fresh process: it knows none of its old tasks.
        after = await startOwnedTasksUpstream({ name: 'after', port: Number(new URL(before.url).port) });
        const params = first === 'tasks/update' ? { taskId, inputResponses: {} } : { taskId };
        const asked = await rpc(solo.urls[1]!, first, params, { name: taskId });
        expect(asked.status, JSON.stringify(asked.body)).toBe(200);
        expect(asked.body.error, JSON.stringify(asked.body)).toBeUndefined();
        const got = await rpc(solo.urls[0]!, 'tasks/get', { taskId }, { name: taskId });
        expect(got.body.result).toMatchObject({ taskId, status: 'failed', error: { data: { reason: 'replica_forgot' } } });
      } finally {
        await solo.teardown();
        await after?.close();
      }
    });
  }
});

describe('an upstream that does not offer the extension', () => {
  it('gets no declaration from the gateway, so it can never answer a task the gateway would take for a result', async () => {
    // It runs tasks for declaring clients all the same (a stale or wrong discover): only the stripped declaration keeps it from making one.
    const silent = await startOwnedTasksUpstream({ name: 'silent', advertise: false });
    // --task-after beyond the call: the gateway makes no task of its own (any slow call would be one), so the answer shows what the upstream did.
    const gateway = await startInProcessStack({ nats, upstreamUrl: silent.url, args: ['--task-after', '5000'] });
    try {
      const discover = await rpc(gateway.urls[0]!, 'server/discover', {});
      expect(discover.body.result.capabilities.extensions[TASKS]).toEqual({});
      const call = await rpc(gateway.urls[0]!, 'tools/call', { name: OwnedTaskTools.SlowCompute, arguments: { seconds: 0.2, label: 'own' } }, { name: OwnedTaskTools.SlowCompute });
      expect(call.body.result, JSON.stringify(call.body)).toMatchObject({ content: [{ text: expect.stringContaining('slow_compute own done') }] });
      expect(silent.taskIds()).toEqual([]);
    } finally {
      await gateway.teardown();
      await silent.close();
    }
  });
});

describe('a plain round-robin balancer in front of the same replicas', () => {
  let proxy: RoundRobinProxy;
  beforeAll(async () => {
    proxy = await startRoundRobinProxy(replicas.map((r) => r.origin));
  });
  afterAll(async () => {
    await proxy?.close();
  });

  it('sends half the polls to the replica that never heard of the task: the flow that works through Tether fails', async () => {
    const url = `${proxy.url}/mcp`;
    const taskId = await create(url, OwnedTaskTools.SlowCompute, { seconds: 0.5 });
    const answers = [];
    for (let i = 0; i < 4; i += 1) answers.push(await rpc(url, 'tasks/get', { taskId }, { name: taskId }));
    const lost = answers.filter((a) => a.body.error?.code === -32602);
    // The rotation alternates: two of four polls reach the other replica, which answers "not found" for a task that exists.
    expect(lost.length).toBe(2);
    const listen = await rpc(url, 'subscriptions/listen', { notifications: { taskIds: [taskId] } });
    const cancel = await rpc(url, 'tasks/cancel', { taskId }, { name: taskId });
    // One of these two lands on the wrong replica too.
    expect(listen.messages[0]?.params?.notifications?.taskIds?.length === 0 || cancel.body.error?.code === -32602).toBe(true);
  });
});
