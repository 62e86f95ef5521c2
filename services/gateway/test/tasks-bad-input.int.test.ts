import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { startTaskUpstream, TaskTools } from '@tether/testing';
import type { TaskUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * What a 2026-07-28 client can send wrong to the gateway's tasks (the Tasks
 * extension): a malformed `_meta` envelope, routing headers that disagree
 * with the body, a missing capability, `tasks/update` params of the wrong
 * shape or size. Each gets its named error and touches nothing: after every
 * test the three tasks made at the start read exactly as before, on both
 * instances, and a new task still runs to completion.
 */

const PROTOCOL = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const baseMeta = (capabilities: unknown): Record<string, unknown> => ({
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'tasks-bad-input', version: '0' },
  [CAPABILITIES]: capabilities,
});
/** Elicitation too: the upstream's input rounds ask only clients that declare it. */
const META = baseMeta({ elicitation: { form: {} }, extensions: { [TASKS]: {} } });
const NO_TASKS_META = baseMeta({ elicitation: { form: {} } });

let upstream: TaskUpstream;
let stack: InProcessStack;

interface Answer {
  readonly status: number;
  readonly text: string;
  readonly body: any;
}

interface RpcOptions {
  /** `Mcp-Name`; absent when undefined. */
  readonly name?: string;
  /** `Mcp-Method`; default the body's method, absent when null. */
  readonly methodHeader?: string | null;
  /** `params._meta`; default {@link META}; `undefined` leaves `_meta` out. */
  readonly meta?: unknown;
  readonly id?: number;
}

let nextId = 1;

async function post(url: string, body: string, headers: Record<string, string>): Promise<Answer> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, ...headers },
    body,
  });
  const text = await res.text();
  let parsed: unknown;
  if (text.trimStart().startsWith('{')) parsed = JSON.parse(text);
  else {
    const data = text.split('\n').filter((l) => l.startsWith('data: {'));
    parsed = data.length === 0 ? undefined : JSON.parse(data.at(-1)!.slice(6));
  }
  return { status: res.status, text, body: parsed };
}

function rpc(url: string, method: string, params: unknown, opts: RpcOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = {};
  const methodHeader = opts.methodHeader === undefined ? method : opts.methodHeader;
  if (methodHeader !== null) headers['mcp-method'] = methodHeader;
  if (opts.name !== undefined) headers['mcp-name'] = opts.name;
  const withMeta =
    typeof params === 'object' && params !== null && !Array.isArray(params) && !('meta' in opts && opts.meta === undefined)
      ? { ...params, _meta: 'meta' in opts ? opts.meta : META }
      : params;
  return post(url, JSON.stringify({ jsonrpc: '2.0', id: opts.id ?? nextId++, method, params: withMeta }), headers);
}

const callTool = (url: string, tool: string, args: Record<string, unknown>, opts: RpcOptions = {}) => rpc(url, 'tools/call', { name: tool, arguments: args }, { name: tool, ...opts });
const taskCall = (url: string, method: string, taskId: string, extra: Record<string, unknown> = {}, opts: RpcOptions = {}) => rpc(url, method, { taskId, ...extra }, { name: taskId, ...opts });

async function createTask(url: string, tool: string, args: Record<string, unknown>): Promise<string> {
  const created = await callTool(url, tool, args);
  expect(created.status).toBe(200);
  expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
  return created.body.result.taskId as string;
}

async function pollTask(url: string, taskId: string, done: (result: any) => boolean, deadlineMs = 10_000): Promise<any> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const answer = await taskCall(url, 'tasks/get', taskId);
    if (answer.body?.result !== undefined && done(answer.body.result)) return answer.body.result;
    if (Date.now() >= deadline) throw new Error(`task never reached the awaited state; last answer ${answer.status} ${answer.text.slice(0, 400)}`);
    await sleep(100);
  }
}

/** -32020 at HTTP 400: a routing header disagrees with the body. */
function expectHeaderMismatch(answer: Answer, id?: number): void {
  expect(answer.status).toBe(400);
  expect(answer.body).toMatchObject({ jsonrpc: '2.0', error: { code: -32020, message: expect.stringMatching(/^Bad Request: the request headers and body disagree/) } });
  if (id !== undefined) expect(answer.body.id).toBe(id);
}

/** -32021 at HTTP 400 naming the Tasks extension. */
function expectMissingCapability(answer: Answer): void {
  expect(answer.status).toBe(400);
  expect(answer.body.error).toMatchObject({ code: -32021, message: expect.stringContaining(TASKS) });
  expect(answer.body.error.data).toEqual({ requiredCapabilities: { extensions: { [TASKS]: {} } } });
}

/**
 * A task method whose `_meta` names no protocol version (none, or no object):
 * the per-request envelope is missing, -32602 at HTTP 400 naming the key, as
 * the SDK's inbound ladder answers it, before the capability is looked at.
 */
function expectMissingEnvelope(answer: Answer): void {
  expect(answer.status).toBe(400);
  expect(answer.body.error).toMatchObject({ code: -32602, message: expect.stringMatching(/missing the required per-request envelope key\(s\): (_meta|io\.modelcontextprotocol\/protocolVersion)/) });
}

/** The three tasks made before any bad input, and what tasks/get answered for each on each instance. */
const tasks = { done: '', asking: '', held: '' };
const HOLD_KEY = `bad-input-${process.pid}`;
let snapshot: string[] = [];

async function readAll(): Promise<string[]> {
  const out: string[] = [];
  for (const url of stack.urls) {
    for (const taskId of Object.values(tasks)) out.push(JSON.stringify((await taskCall(url, 'tasks/get', taskId, {}, { id: 1 })).body));
  }
  return out;
}

beforeAll(async () => {
  upstream = await startTaskUpstream();
  stack = await startInProcessStack({ gateways: 2, upstreamUrl: upstream.url });
  const [a, b] = stack.urls as [string, string];
  tasks.done = await createTask(a, TaskTools.SlowCompute, { seconds: 0.4, label: 'before' });
  tasks.asking = await createTask(b, TaskTools.ConfirmDelete, { path: '/srv/keep.txt' });
  tasks.held = await createTask(a, TaskTools.Hold, { key: HOLD_KEY });
  expect((await pollTask(b, tasks.done, (r) => r.status !== 'working')).status).toBe('completed');
  expect((await pollTask(a, tasks.asking, (r) => r.status !== 'working')).status).toBe('input_required');
  snapshot = await readAll();
  expect(snapshot.map((s) => JSON.parse(s).result.status)).toEqual(['completed', 'input_required', 'working', 'completed', 'input_required', 'working']);
});

afterAll(async () => {
  upstream?.release(HOLD_KEY, 'released');
  await stack?.teardown();
  await upstream?.close();
});

let served = 0;
afterEach(async () => {
  // Nothing above changed the earlier tasks, on either instance…
  expect(await readAll()).toEqual(snapshot);
  // …and a normal task still runs to completion.
  served += 1;
  const url = stack.urls[served % 2]!;
  const taskId = await createTask(url, TaskTools.SlowCompute, { seconds: 0.3, label: `after-${served}` });
  const done = await pollTask(stack.urls[(served + 1) % 2]!, taskId, (r) => r.status !== 'working');
  expect(done.status).toBe('completed');
  expect(done.result.content).toEqual([{ type: 'text', text: `slow_compute after-${served} done after 0.3 s` }]);
});

describe('tasks: bad input', () => {
  it('a malformed _meta envelope declares no extension: tasks/* are -32021 (HTTP 400), or -32602 when it names no protocol version; a required tool -32021; an optional one is not made a task', async () => {
    const url = stack.urls[0]!;
    const envelopes: unknown[] = [
      'x',
      [],
      null,
      baseMeta('tasks'),
      baseMeta([]),
      baseMeta(null),
      baseMeta(42),
      baseMeta({ extensions: [] }),
      baseMeta({ extensions: [TASKS] }),
      baseMeta({ extensions: TASKS }),
      baseMeta({ extensions: { [TASKS]: true } }),
      baseMeta({ extensions: { [TASKS]: [] } }),
      baseMeta({ [TASKS]: {} }),
    ];
    const failingCalls = upstream.calls(TaskTools.FailingJob);
    for (const meta of envelopes) {
      for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
        const extra = method === 'tasks/update' ? { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } } : {};
        const answer = await taskCall(url, method, method === 'tasks/get' ? tasks.done : tasks.asking, extra, { meta });
        if (typeof meta === 'object' && meta !== null && !Array.isArray(meta)) expectMissingCapability(answer);
        else expectMissingEnvelope(answer);
      }
      expectMissingCapability(await callTool(url, TaskTools.FailingJob, {}, { meta }));
      const optional = await callTool(url, TaskTools.SlowCompute, { seconds: 0, label: 'no-task' }, { meta });
      expect(optional.status).toBeLessThan(500);
      expect(optional.body?.result?.resultType).not.toBe('task');
    }
    // params that is no object at all carries no envelope either.
    for (const params of ['x', [tasks.done], 7]) expectMissingEnvelope(await rpc(url, 'tasks/get', params, { name: tasks.done }));
    expect(upstream.calls(TaskTools.FailingJob)).toBe(failingCalls);
  });

  it('tasks/* without the capability: -32021, HTTP 400, data.requiredCapabilities names the extension (without any envelope: -32602)', async () => {
    const url = stack.urls[1]!;
    for (const meta of [NO_TASKS_META, undefined, baseMeta({}), baseMeta({ extensions: {} }), baseMeta({ extensions: { 'io.modelcontextprotocol/other': {} } })]) {
      for (const taskId of [tasks.done, tasks.asking, tasks.held]) {
        for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
          const extra = method === 'tasks/update' ? { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } } : {};
          const answer = await taskCall(url, method, taskId, extra, { meta, id: 21 });
          expect(answer.body.id).toBe(21);
          if (meta === undefined) {
            expectMissingEnvelope(answer);
            continue;
          }
          expectMissingCapability(answer);
          expect(answer.body.error.message).toContain(method);
        }
      }
    }
  });

  it('a required tool (failing_job, test_tool_with_task) from a client without the extension: -32021, HTTP 400, the upstream never called', async () => {
    const url = stack.urls[0]!;
    for (const tool of [TaskTools.FailingJob, TaskTools.ToolWithTask]) {
      const before = upstream.calls(tool);
      for (const meta of [NO_TASKS_META, undefined]) {
        const answer = await callTool(url, tool, {}, { meta, id: 31 });
        expectMissingCapability(answer);
        expect(answer.body.id).toBe(31);
        expect(answer.body.error.message).toContain(JSON.stringify(tool));
      }
      expect(upstream.calls(tool)).toBe(before);
    }
  });

  it('Mcp-Name missing or naming another task: -32020 (HTTP 400) on tasks/get, update and cancel, and nothing happens', async () => {
    const url = stack.urls[1]!;
    const answer = { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } };
    for (const [method, taskId, extra] of [
      ['tasks/get', tasks.done, {}],
      ['tasks/update', tasks.asking, answer],
      ['tasks/cancel', tasks.held, {}],
      ['tasks/cancel', tasks.asking, {}],
    ] as const) {
      const missing = await rpc(url, method, { taskId, ...extra }, { id: 41 });
      expectHeaderMismatch(missing, 41);
      expect(missing.body.error.message).toContain('absent');
      for (const name of [tasks.done === taskId ? tasks.held : tasks.done, taskId.toLowerCase() === taskId ? taskId.toUpperCase() : taskId.toLowerCase(), '', `${taskId}x`, taskId.slice(1)]) {
        expectHeaderMismatch(await taskCall(url, method, taskId, extra, { name, id: 42 }), 42);
      }
    }
    // A task tool's call with a wrong or missing Mcp-Name: the upstream's -32020 comes back as it answered, and no task is made.
    const holdCalls = upstream.calls(TaskTools.Hold);
    for (const name of [TaskTools.Greet, undefined]) {
      const call = await rpc(url, 'tools/call', { name: TaskTools.Hold, arguments: { key: 'never' } }, { ...(name === undefined ? {} : { name }), id: 43 });
      expect(call.status).toBe(400);
      expect(call.body).toMatchObject({ id: 43, error: { code: -32020 } });
    }
    expect(upstream.calls(TaskTools.Hold)).toBe(holdCalls);
    // Surrounding whitespace is not part of the value (RFC 9110): accepted.
    const padded = await taskCall(url, 'tasks/get', tasks.done, {}, { name: `  ${tasks.done}\t` });
    expect(padded.status).toBe(200);
    expect(padded.body.result.status).toBe('completed');
  });

  it('Mcp-Method missing or naming another method: -32020 (HTTP 400), and nothing happens', async () => {
    const url = stack.urls[0]!;
    for (const [method, taskId] of [
      ['tasks/get', tasks.done],
      ['tasks/cancel', tasks.held],
      ['tasks/cancel', tasks.asking],
      ['tasks/update', tasks.asking],
    ] as const) {
      const extra = method === 'tasks/update' ? { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } } : {};
      for (const methodHeader of [null, 'tasks/get' === method ? 'tasks/cancel' : 'tasks/get', 'tools/call', method.toUpperCase(), '']) {
        const answer = await taskCall(url, method, taskId, extra, { methodHeader, id: 51 });
        expectHeaderMismatch(answer, 51);
        expect(answer.body.error.message).toContain(method);
      }
    }
  });

  it('tasks/update with inputResponses that is no object (null, an array, a string, a number, absent): -32602 naming it', async () => {
    const url = stack.urls[1]!;
    const cases: [unknown, string][] = [
      [null, 'got null'],
      [[{ action: 'accept', content: { confirm: true } }], 'got an array'],
      ['confirm', 'got string'],
      [1, 'got number'],
      [true, 'got boolean'],
    ];
    for (const taskId of [tasks.asking, tasks.held, tasks.done]) {
      for (const [inputResponses, named] of cases) {
        const answer = await taskCall(url, 'tasks/update', taskId, { inputResponses }, { id: 61 });
        expect(answer.status).toBe(200);
        expect(answer.body).toEqual({ jsonrpc: '2.0', id: 61, error: { code: -32602, message: expect.stringContaining(named) } });
        expect(answer.body.error.message).toContain('params.inputResponses');
      }
      const absent = await taskCall(url, 'tasks/update', taskId, {}, { id: 62 });
      expect(absent.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('got undefined') });
    }
  });

  it('tasks/update with inputResponses over 256 KiB: -32602 naming the size, even for the outstanding key', async () => {
    const url = stack.urls[0]!;
    const big = 'x'.repeat(256 * 1024);
    for (const inputResponses of [{ confirm: { action: 'accept', content: { confirm: true, note: big } } }, { unknown: big }]) {
      const size = Buffer.byteLength(JSON.stringify(inputResponses));
      const answer = await taskCall(url, 'tasks/update', tasks.asking, { inputResponses }, { id: 71 });
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ jsonrpc: '2.0', id: 71, error: { code: -32602, message: `tasks/update params.inputResponses is ${size} bytes, more than the 262144 accepted` } });
    }
  });

  it('tasks/update with unknown keys (in params and in inputResponses) is acknowledged and changes nothing', async () => {
    const url = stack.urls[1]!;
    const ack = { resultType: 'complete' };
    const extras = [
      { inputResponses: { nope: { action: 'accept', content: { confirm: true } } } },
      { inputResponses: { 'confirm.2': { action: 'accept', content: { confirm: true } }, CONFIRM: { action: 'accept', content: { confirm: true } } } },
      { inputResponses: {}, status: 'completed', result: { content: [] }, runner: null, ttlMs: 1, principal: 'someone' },
      { inputResponses: { nope: {} }, requestState: 'forged', inputRequests: { extra: {} } },
    ];
    for (const taskId of [tasks.asking, tasks.held, tasks.done]) {
      for (const extra of extras) {
        const answer = await taskCall(url, 'tasks/update', taskId, extra, { id: 81 });
        expect(answer.status).toBe(200);
        expect(answer.body).toEqual({ jsonrpc: '2.0', id: 81, result: ack });
      }
    }
    // An answer to a task that is not waiting for input (working, completed) is ignored too.
    for (const taskId of [tasks.held, tasks.done]) {
      const answer = await taskCall(url, 'tasks/update', taskId, { inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } });
      expect(answer.body.result).toEqual(ack);
    }
  });

  it('a tools/call whose arguments would make the task record larger than one NATS message (1 MiB) is not told "unavailable, retry"', async () => {
    const url = stack.urls[0]!;
    const label = 'l'.repeat(1_100_000);
    const answer = await callTool(url, TaskTools.SlowCompute, { seconds: 0.6, label }, { id: 101 });
    // Either the call goes on without a task (its result comes back), or a named error says what was too large: never a 503 inviting a retry that cannot succeed.
    const summary = { status: answer.status, error: answer.body?.error, text: answer.body?.result?.content?.[0]?.text?.slice(0, 13) };
    expect(summary.status, JSON.stringify(summary)).toBeLessThan(500);
    if (summary.error !== undefined) expect(summary.error.message).toMatch(/bytes|too large/i);
    else expect(summary.text).toBe('slow_compute ');
  });

  it('an upstream result larger than one NATS message settles the task (a named failure), never leaves it working', async () => {
    const [a, b] = stack.urls as [string, string];
    const key = `big-result-${process.pid}`;
    const taskId = await createTask(a, TaskTools.Hold, { key });
    upstream.release(key, 'r'.repeat(1_100_000));
    // Read through the other instance: the runner is alive there, so nothing but the runner can settle it.
    const settled = await pollTask(b, taskId, (r) => r.status !== 'working', 8_000);
    expect(['completed', 'failed']).toContain(settled.status);
    if (settled.status === 'failed') {
      expect(settled.error.message).toMatch(/bytes|too large/i);
      expect(settled.error.data?.reason).not.toBe('runner_lost');
    }
    // The runner's own read says the same.
    expect((await taskCall(a, 'tasks/get', taskId)).body.result).toEqual(settled);
  });

  it('tasks/update whose inputResponses keys are Object.prototype names (constructor, toString, __proto__) is ignored like any unknown key', async () => {
    const url = stack.urls[0]!;
    for (const key of ['constructor', 'toString', 'hasOwnProperty', '__proto__']) {
      // Written by hand: an object literal's __proto__ would set a prototype, not a key.
      const params = `{"taskId":${JSON.stringify(tasks.asking)},"inputResponses":{${JSON.stringify(key)}:{"action":"accept","content":{"confirm":true}}},"_meta":${JSON.stringify(META)}}`;
      const answer = await post(url, `{"jsonrpc":"2.0","id":91,"method":"tasks/update","params":${params}}`, { 'mcp-method': 'tasks/update', 'mcp-name': tasks.asking });
      expect(answer.status).toBe(200);
      expect(answer.body).toEqual({ jsonrpc: '2.0', id: 91, result: { resultType: 'complete' } });
      // Checked per key, so the failure names the first key that changed the task.
      expect({ key, after: await readAll() }).toEqual({ key, after: snapshot });
    }
  });

  it('the _meta protocol version must be there (-32602), equal the MCP-Protocol-Version header (-32020) and be one the gateway serves (-32022), each at HTTP 400', async () => {
    const url = stack.urls[0]!;
    const body = (version: unknown, id: number): string => JSON.stringify({ jsonrpc: '2.0', id, method: 'tasks/get', params: { taskId: tasks.done, _meta: { ...META, 'io.modelcontextprotocol/protocolVersion': version } } });
    const headers = { 'mcp-method': 'tasks/get', 'mcp-name': tasks.done };
    const other = await post(url, body('2025-11-25', 51), headers);
    expectHeaderMismatch(other, 51);
    expect(other.body.error.message).toContain('the body envelope names protocol version 2025-11-25 but the MCP-Protocol-Version header names 2026-07-28');
    const notString = await post(url, body(20260728, 52), headers);
    expect(notString.status).toBe(400);
    expect(notString.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('io.modelcontextprotocol/protocolVersion') });
    const later = await post(url, body('2027-01-01', 53), { ...headers, 'mcp-protocol-version': '2027-01-01' });
    expect(later.status).toBe(400);
    expect(later.body).toMatchObject({ id: 53, error: { code: -32022, data: { supported: ['2026-07-28'], requested: '2027-01-01' } } });
  });

  it('a listen naming task ids needs Mcp-Method too: absent or another method is -32020 (HTTP 400)', async () => {
    const url = stack.urls[1]!;
    const params = { notifications: { taskIds: [tasks.done] } };
    expectHeaderMismatch(await rpc(url, 'subscriptions/listen', params, { methodHeader: null, id: 61 }), 61);
    expectHeaderMismatch(await rpc(url, 'subscriptions/listen', params, { methodHeader: 'tasks/get', id: 62 }), 62);
  });

  it('Mcp-Name in its =?base64?…?= form is decoded before it is compared; an invalid sentinel is -32020', async () => {
    const url = stack.urls[0]!;
    const sentinel = (text: string): string => `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;
    const served = await taskCall(url, 'tasks/get', tasks.done, {}, { name: sentinel(tasks.done), id: 71 });
    expect(served.status).toBe(200);
    expect(served.body.result).toMatchObject({ taskId: tasks.done, status: 'completed' });
    expectHeaderMismatch(await taskCall(url, 'tasks/get', tasks.done, {}, { name: sentinel(tasks.held), id: 72 }), 72);
    const invalid = await taskCall(url, 'tasks/get', tasks.done, {}, { name: '=?base64?not base64!?=', id: 73 });
    expectHeaderMismatch(invalid, 73);
    expect(invalid.body.error.message).toContain('invalid Base64 sentinel');
  });

  it('tasks/result and tasks/list (the 2025-11-25 tasks, removed by SEP-2663) are -32601 from the gateway itself', async () => {
    for (const [method, params] of [['tasks/result', { taskId: tasks.done }], ['tasks/list', {}]] as const) {
      const answer = await rpc(stack.urls[1]!, method, params, { ...(method === 'tasks/result' ? { name: tasks.done } : {}), id: 81 });
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ id: 81, error: { code: -32601, message: expect.stringContaining(`${method} is not part of the Tasks extension`) } });
    }
  });

  it('an input round that asks nothing and carries only requestState is followed by the runner, not failed: the task stays working and completes', async () => {
    const [a, b] = stack.urls as [string, string];
    const taskId = await createTask(a, TaskTools.StateLegs, {});
    const seen = new Set<string>();
    const done = await pollTask(b, taskId, (r) => {
      seen.add(r.status);
      return r.status !== 'working';
    });
    expect(done).toMatchObject({ status: 'completed', result: { content: [{ type: 'text', text: 'legs 2' }] } });
    expect(done.requestState).toBeUndefined();
    expect([...seen]).not.toContain('input_required');
  });
});
