import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { namespaceNames, newTaskId, newWriterId, principalDigest, principalTag, SessionLog } from '@tether/session-log';
import type { TaskRecord, TaskTable } from '@tether/session-log';
import { natsOperator, openInspectAccess, taskTag } from '@tether/inspect';
import type { InspectAccess, TaskList, TaskSummary } from '@tether/inspect';
import { startSessionLogService } from '@tether/session-log-service';
import type { SessionLogService } from '@tether/session-log-service';
import { pino } from 'pino';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { runAdmin } from '../src/admin-cli.js';
import { startInspectServer } from '../src/inspect-server.js';
import type { InspectServer } from '../src/inspect-server.js';

/**
 * tether-admin tasks/task and the inspector's /api/tasks over task records
 * stored with the gateway's own TaskTable on a real nats-server, read over
 * NATS and through a session-log service's operator API (`--log grpc://`),
 * which must print the same. Every payload field of every record holds
 * SECRET; no output may contain it, nor a full task id or a principal digest.
 */
const SECRET = 'SECRET-PAYLOAD-7f3a9c';
const TOKEN = 'tasks-inspect-token-0123456789';
const OPERATOR_TOKEN = 'tasks-operator-token-0123456789';
const CURSOR_TOKEN = 'tasks-cursor-token-0123456789';
/** A route record's replica digest (22 characters, as `replicaDigest` makes them: never a URL). */
const REPLICA = 'RePLiCa0digest0of0url0';
const namespace = `tsk${process.pid}`;
/** A second namespace with a log but no tasks stream: tasks never used there. */
const unused = `tsk${process.pid}u`;
const prefix = namespaceNames(namespace).subjectPrefix;
const alice = principalDigest(`alice-token-${SECRET}`);
const bob = principalDigest('bob-token');

let nats: NatsServer;
let log: SessionLog;
let unusedLog: SessionLog;
let table: TaskTable;
let access: InspectAccess;
let server: InspectServer;
let nc: NatsConnection;
let held: { close(): Promise<void> };
let service: SessionLogService;
let grpcUrl: string;
const ids: Record<string, string> = {};
const now = Date.now();
const writers = { alive: newWriterId(), gone: newWriterId(), silent: newWriterId() };

/** A record with every payload field holding SECRET (the parts an operator may never see). */
function record(name: string, fields: Partial<TaskRecord>): TaskRecord {
  ids[name] = newTaskId();
  return {
    v: 1,
    taskId: ids[name],
    principal: alice,
    route: '/mcp',
    tool: 'slow_report',
    status: 'working',
    createdAtMs: now,
    updatedAtMs: now,
    ttlMs: 3_600_000,
    pollIntervalMs: 1_000,
    runner: null,
    runnerInstance: 'gw-a',
    attempts: 1,
    reruns: 0,
    rounds: 0,
    idempotent: false,
    params: { name: 'slow_report', arguments: { query: SECRET }, _meta: { note: SECRET } },
    callHeaders: { 'mcp-param-query': SECRET },
    usedKeys: [`${SECRET}-key`],
    ...fields,
  };
}

beforeAll(async () => {
  nats = await startNatsServer();
  log = await SessionLog.create({ servers: nats.url, namespace });
  unusedLog = await SessionLog.create({ servers: nats.url, namespace: unused });
  table = await log.openTasks(3_600_000);
  nc = await connect({ servers: nats.url });
  held = log.holdPresence(writers.alive, () => false);
  // A presence that never answers: the process is registered but silent.
  nc.subscribe(`${prefix}.writer.${writers.silent}`, { callback: () => undefined });
  await nc.flush();
  await table.create(record('running', { createdAtMs: now - 50_000, runner: writers.alive, statusMessage: `working on ${SECRET}` }));
  await table.create(record('lost', { createdAtMs: now - 40_000, principal: bob, runner: writers.gone, runnerInstance: 'gw-b', attempts: 2, reruns: 1, idempotent: true }));
  await table.create(record('slow', { createdAtMs: now - 35_000, runner: writers.silent, runnerInstance: 'gw-c' }));
  await table.create(
    record('asking', {
      createdAtMs: now - 30_000,
      status: 'input_required',
      rounds: 1,
      attempts: 2,
      statusMessage: 'waiting for input: answer inputRequests with tasks/update',
      inputRequests: { [`${SECRET}-a`]: { method: 'elicitation/create', params: { message: SECRET } }, b: { method: 'sampling/createMessage', params: { prompt: SECRET } } },
      inputResponses: { c: { answer: SECRET } },
      keyMap: { [`${SECRET}-a`]: SECRET },
      requestState: SECRET,
    }),
  );
  await table.create(record('tool-error', { createdAtMs: now - 20_000, status: 'completed', result: { content: [{ type: 'text', text: SECRET }], isError: true }, statusMessage: SECRET }));
  await table.create(
    record('failed', {
      createdAtMs: now - 10_000,
      principal: bob,
      status: 'failed',
      runnerInstance: 'gw-b',
      error: { code: -32603, message: SECRET, data: { reason: 'upstream_http', detail: SECRET } },
      statusMessage: 'the upstream answered HTTP 502',
    }),
  );
  // Route records of tasks an upstream runs itself (owned-record.ts): no runner, no call; the upstream's own id is a bearer handle too.
  const { runnerInstance: _none, ...routed } = record('routed', { createdAtMs: now - 60_000, params: {}, callHeaders: {}, usedKeys: [], upstream: { taskId: `${SECRET}-upstream-id`, replica: REPLICA } });
  await table.create(routed);
  await table.create(
    record('route-lost', {
      createdAtMs: now - 55_000,
      status: 'failed',
      params: {},
      callHeaders: {},
      usedKeys: [],
      upstream: { taskId: `${SECRET}-upstream-id-2`, replica: REPLICA },
      error: { code: -32603, message: 'the upstream replica holding this task no longer accepts connections; the task is lost with it', data: { reason: 'replica_gone' } },
      statusMessage: 'the upstream replica holding this task no longer accepts connections; the task is lost with it',
    }),
  );
  // Not a task record (hand-written): read as absent, as the gateway does.
  await log.connection.request(`${prefix}.edge.task.${newTaskId()}`, `{"v":2,"secret":"${SECRET}"}`).catch(() => undefined);
  access = await openInspectAccess({ servers: nats.url, namespace });
  server = await startInspectServer({ source: natsOperator(access), tokens: [TOKEN] });
  service = await startSessionLogService({
    port: 0,
    nats: nats.url,
    log: { namespace },
    tokens: [`fleet:${CURSOR_TOKEN}`],
    operatorTokens: [`ops:${OPERATOR_TOKEN}`],
    logger: pino({ level: 'silent' }),
  });
  grpcUrl = `grpc://127.0.0.1:${service.port}`;
}, 60_000);

afterAll(async () => {
  await server?.close();
  await service?.close(0);
  await access?.close();
  await held?.close();
  await nc?.close();
  await unusedLog?.close();
  await log?.close();
  await nats?.cleanup();
});

/** tether-admin in this process: status, stdout, stderr. */
async function admin(args: readonly string[], ns = namespace): Promise<{ status: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const status = await runAdmin([...args, '--nats', nats.url, '--namespace', ns], { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env: {} });
  return { status, stdout, stderr };
}

const outputs: string[] = [];
/** Every output is kept for the final check that none holds a payload, a task id or a digest. */
function keep(text: string): string {
  outputs.push(text);
  return text;
}

async function json<T>(args: readonly string[], ns = namespace): Promise<T> {
  const run = await admin([...args, '--json'], ns);
  keep(run.stdout + run.stderr);
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  return JSON.parse(run.stdout) as T;
}

const tagOf = (name: string): string => taskTag(ids[name]!);

describe('tether-admin tasks', () => {
  it('--help names tasks, task <id> and --status', async () => {
    const run = await admin(['--help']);
    expect(run.status).toBe(0);
    for (const word of ['  tasks ', '  task <id> ', '--status S', 'working, input_required, completed, failed, cancelled, routed', 'also over --log grpc://']) expect(run.stdout).toContain(word);
  });

  it('lists every task newest first with its facts, and whether its runner lives', async () => {
    const list = await json<TaskList>(['tasks']);
    expect(list).toMatchObject({ stream: namespaceNames(namespace).tasksStream, streamExists: true });
    expect(list.tasks.map((t) => t.tag)).toEqual(['failed', 'tool-error', 'asking', 'slow', 'lost', 'running', 'route-lost', 'routed'].map(tagOf));
    const by = new Map(list.tasks.map((t) => [t.tag, t]));
    expect(by.get(tagOf('running'))).toMatchObject({ status: 'working', tool: 'slow_report', route: '/mcp', principal: principalTag(alice), runnerInstance: 'gw-a', runner: 'alive', attempts: 1, reruns: 0, rounds: 0, statusMessage: null });
    expect(by.get(tagOf('lost'))).toMatchObject({ status: 'working', principal: principalTag(bob), runnerInstance: 'gw-b', runner: 'gone', attempts: 2, reruns: 1, idempotent: true });
    expect(by.get(tagOf('slow'))).toMatchObject({ runnerInstance: 'gw-c', runner: 'silent' });
    expect(by.get(tagOf('asking'))).toMatchObject({ status: 'input_required', runner: 'none', rounds: 1, pendingInputs: 2, inputResponses: 1, statusMessage: null });
    expect(by.get(tagOf('tool-error'))).toMatchObject({ status: 'completed', isError: true, errorCode: null, statusMessage: null });
    expect(by.get(tagOf('failed'))).toMatchObject({ status: 'failed', errorCode: -32603, isError: null, statusMessage: 'the upstream answered HTTP 502' });
    const running = by.get(tagOf('running'))!;
    expect(running.expiresAtMs - running.createdAtMs).toBe(3_600_000);
    expect(running.bytes.params).toBe(Buffer.byteLength(JSON.stringify({ name: 'slow_report', arguments: { query: SECRET }, _meta: { note: SECRET } })));
    expect(running.bytes.record).toBeGreaterThan(running.bytes.params);
    expect(tagOf('running')).toMatch(/^[A-Za-z0-9_-]{6}…$/);
  });

  it('prints them as a table', async () => {
    const run = await admin(['tasks']);
    keep(run.stdout + run.stderr);
    expect(run.status).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^TASK\s+STATUS\s+TOOL\s+ROUTE\s+PRINCIPAL\s+RUNNER\s+ALIVE\s+ATTEMPTS\s+RERUNS\s+ROUNDS\s+AGE\s+TTL$/);
    expect(lines).toHaveLength(9);
    const row = (name: string): string[] => lines.find((l) => l.startsWith(tagOf(name)))!.split(/\s+/);
    expect(row('running')).toEqual([tagOf('running'), 'working', 'slow_report', '/mcp', principalTag(alice), 'gw-a', 'alive', '1', '0', '0', expect.stringMatching(/^5\ds$/), '59m']);
    expect(row('lost')).toEqual([tagOf('lost'), 'working', 'slow_report', '/mcp', principalTag(bob), 'gw-b', 'gone', '2', '1', '0', expect.stringMatching(/^4\ds$/), '59m']);
    expect(row('asking').slice(5, 10)).toEqual(['gw-a', '-', '2', '0', '1']);
    process.stdout.write(`\n${run.stdout}\n`);
  });

  it('filters by status, principal and limit', async () => {
    expect((await json<TaskList>(['tasks', '--status', 'working'])).tasks.map((t) => t.tag)).toEqual(['slow', 'lost', 'running'].map(tagOf));
    expect((await json<TaskList>(['tasks', '--principal', principalTag(bob)])).tasks.map((t) => t.tag)).toEqual(['failed', 'lost'].map(tagOf));
    expect((await json<TaskList>(['tasks', '--principal', principalTag(alice).slice(0, 5), '--status', 'completed'])).tasks.map((t) => t.tag)).toEqual([tagOf('tool-error')]);
    expect((await json<TaskList>(['tasks', '--limit', '2'])).tasks.map((t) => t.tag)).toEqual(['failed', 'tool-error'].map(tagOf));
    expect((await json<TaskList>(['tasks', '--status', 'cancelled'])).tasks).toEqual([]);
    const none = await admin(['tasks', '--status', 'cancelled']);
    expect(none.stdout).toBe('no tasks\n');
  });

  it('task <id> shows one task by its tag, with its outcome but not its content', async () => {
    const failed = await json<TaskSummary>(['task', ids['failed']!]);
    expect(failed).toMatchObject({ tag: tagOf('failed'), status: 'failed', errorCode: -32603, statusMessage: 'the upstream answered HTTP 502', runner: 'none' });
    expect(failed.bytes.error).toBe(Buffer.byteLength(JSON.stringify({ code: -32603, message: SECRET, data: { reason: 'upstream_http', detail: SECRET } })));
    const toolError = await json<TaskSummary>(['task', ids['tool-error']!]);
    expect(toolError).toMatchObject({ status: 'completed', isError: true, errorCode: null });
    expect(toolError.bytes.result).toBeGreaterThan(SECRET.length);
    expect(await json<TaskSummary>(['task', ids['running']!])).toMatchObject({ runner: 'alive', runnerInstance: 'gw-a' });
    expect(await json<TaskSummary>(['task', ids['lost']!])).toMatchObject({ runner: 'gone', runnerInstance: 'gw-b' });

    const text = await admin(['task', ids['asking']!]);
    keep(text.stdout + text.stderr);
    expect(text.status).toBe(0);
    expect(text.stdout).toContain(`task ${tagOf('asking')}\n`);
    expect(text.stdout).toMatch(/^ {2}status {4}input_required$/m);
    expect(text.stdout).toMatch(/^ {2}runner {4}gw-a \(no call running\)$/m);
    expect(text.stdout).toMatch(/^ {2}attempts {2}2 \(reruns 0, input rounds 1; not idempotent\)$/m);
    expect(text.stdout).toMatch(/^ {2}outcome {3}waiting for input \(2 requests pending, 1 answered this round\)$/m);
    expect(text.stdout).toMatch(/^ {2}sizes {5}record \d+ B, params \d+ B, result 0 B, error 0 B$/m);
    const failedText = await admin(['task', ids['failed']!]);
    keep(failedText.stdout);
    expect(failedText.stdout).toMatch(/^ {2}outcome {3}failed: error code -32603: the upstream answered HTTP 502$/m);
    process.stdout.write(`\n${failedText.stdout}\n`);
  });

  it('refuses bad input by name (exit 2) and unknown tasks (exit 1), never echoing an id', async () => {
    const unknownId = newTaskId();
    const cases: [string[], number, RegExp][] = [
      [['task'], 2, /task needs a task id: tether-admin task <task id>/],
      [['task', `${ids['running']!}x`], 2, /not a task id \(not shown\)/],
      [['task', tagOf('running')], 2, /that looks like a task tag; task needs the full task id/],
      [['task', ids['running']!, ids['lost']!], 2, /unexpected argument \(not shown\) for task/],
      [['tasks', '--status', 'running'], 2, /invalid --status "running"; allowed: working, input_required, completed, failed, cancelled/],
      [['tasks', '--limit', '0'], 2, /invalid --limit "0"/],
      [['tasks', '--principal', `eyJ.${SECRET}`], 2, /invalid --principal \(not shown\)/],
      [['tasks', '--verdict', 'resumed'], 2, /--verdict does not apply to tasks/],
      [['sessions', '--status', 'working'], 2, /--status does not apply to sessions/],
      [['task', ids['running']!, '--limit', '3'], 2, /--limit does not apply to task/],
      [['task', unknownId], 1, /no task with that id in TETHER_EDGE_TASKS_/],
      // Anywhere else a task id is not echoed either.
      [[unknownId], 2, /unknown command \(not shown: it looks like an id\)/],
      [['tasks', unknownId], 2, /unexpected argument \(not shown: it looks like an id\) for tasks/],
      [['show', unknownId], 2, /(that looks like a task id \(not shown\))|(that is a raw session id)/],
    ];
    for (const [args, status, message] of cases) {
      const run = await admin(args);
      keep(run.stdout + run.stderr);
      expect({ args, status: run.status }).toEqual({ args, status });
      expect(run.stderr).toMatch(message);
      expect(run.stderr).not.toContain(unknownId);
    }
    const asJson = await admin(['task', unknownId, '--json']);
    keep(asJson.stdout + asJson.stderr);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ error: { code: 'task_not_found' } });
  });

  it('says tasks were never used in a namespace without a tasks stream', async () => {
    const text = await admin(['tasks'], unused);
    expect(text).toEqual({ status: 0, stdout: `no tasks (tasks were never used in this namespace: no stream ${namespaceNames(unused).tasksStream})\n`, stderr: '' });
    expect(await json<TaskList>(['tasks'], unused)).toEqual({ stream: namespaceNames(unused).tasksStream, streamExists: false, tasks: [] });
    const one = await admin(['task', newTaskId(), '--json'], unused);
    expect(one.status).toBe(1);
    expect(one.stderr).toMatch(/no task with that id: no stream TETHER_EDGE_TASKS_\S+, tasks were never used in this namespace/);
    expect(JSON.parse(one.stdout)).toMatchObject({ error: { code: 'task_not_found' } });
  });

  it('shows the route record of an upstream-owned task as routed, with its replica digest and no runner', async () => {
    const list = await json<TaskList>(['tasks']);
    const by = new Map(list.tasks.map((t) => [t.tag, t]));
    expect(by.get(tagOf('routed'))).toMatchObject({ status: 'routed', replica: REPLICA, runner: 'none', runnerInstance: null, statusMessage: null, errorCode: null });
    expect(by.get(tagOf('route-lost'))).toMatchObject({ status: 'failed', replica: REPLICA, runner: 'none', errorCode: -32603 });
    expect(by.get(tagOf('running'))).toMatchObject({ replica: null });
    expect((await json<TaskList>(['tasks', '--status', 'routed'])).tasks.map((t) => t.tag)).toEqual([tagOf('routed')]);
    const table = await admin(['tasks', '--status', 'routed']);
    keep(table.stdout);
    expect(table.stdout.trimEnd().split('\n')[1]!.split(/\s+/).slice(0, 7)).toEqual([tagOf('routed'), 'routed', 'slow_report', '/mcp', principalTag(alice), `replica:${REPLICA.slice(0, 8)}`, '-']);
    const one = await admin(['task', ids['routed']!]);
    keep(one.stdout);
    expect(one.stdout).toMatch(/^ {2}status {4}routed$/m);
    expect(one.stdout).toMatch(new RegExp(`^ {2}replica {3}${REPLICA} \\(an upstream replica runs it; no gateway call\\)$`, 'm'));
    expect(one.stdout).not.toMatch(/^ {2}runner /m);
    expect(one.stdout).toMatch(/^ {2}outcome {3}held by an upstream replica/m);
  });

  it('prints the same over the operator API (--log grpc://) as over NATS', async () => {
    /** tether-admin on the service's operator API. */
    const overGrpc = async (args: readonly string[], token = OPERATOR_TOKEN) => {
      let stdout = '';
      let stderr = '';
      const status = await runAdmin([...args, '--log', grpcUrl, '--log-token', token], { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t), env: {} });
      keep(stdout + stderr);
      return { status, stdout, stderr };
    };
    // Ages are read at each call: masked in text, absent from the JSON (its times are absolute).
    const masked = (text: string): string => text.replace(/\b\d+(ms|s|m|h|d)\b/g, '#');
    for (const args of [['tasks'], ['tasks', '--status', 'routed'], ['tasks', '--principal', principalTag(bob)], ['tasks', '--limit', '3'], ['task', ids['asking']!], ['task', ids['routed']!], ['task', ids['lost']!]]) {
      const viaNats = await admin([...args, '--json']);
      const viaGrpc = await overGrpc([...args, '--json']);
      keep(viaNats.stdout);
      expect({ args: args.map((a) => a.slice(0, 8)), status: viaGrpc.status, stderr: viaGrpc.stderr }).toEqual({ args: args.map((a) => a.slice(0, 8)), status: 0, stderr: '' });
      expect(JSON.parse(viaGrpc.stdout)).toEqual(JSON.parse(viaNats.stdout));
      const text = await overGrpc(args);
      expect(masked(text.stdout)).toEqual(masked(keep((await admin(args)).stdout)));
    }
    // The same refusals: an unknown task (exit 1, never the id), and a cursor token, which is no operator's.
    const unknownId = newTaskId();
    const unknown = await overGrpc(['task', unknownId, '--json']);
    expect(unknown.status).toBe(1);
    expect(JSON.parse(unknown.stdout)).toMatchObject({ error: { code: 'task_not_found' } });
    expect(unknown.stdout + unknown.stderr).not.toContain(unknownId);
    const cursorToken = await overGrpc(['tasks'], CURSOR_TOKEN);
    expect(cursorToken.status).not.toBe(0);
    expect(cursorToken.stderr).toMatch(/missing or invalid operator credentials/);
  });

  it('runs from the committed bin', async () => {
    const bin = fileURLToPath(new URL('../bin/tether-admin.js', import.meta.url));
    const run = await new Promise<{ code: number; stdout: string }>((resolve) => {
      execFile(process.execPath, [bin, 'tasks', '--json', '--nats', nats.url, '--namespace', namespace], { timeout: 20_000, env: { ...process.env, TETHER_NATS_URL: '', TETHER_NAMESPACE: '' } }, (err, stdout) => resolve({ code: err === null ? 0 : 1, stdout }));
    });
    keep(run.stdout);
    expect(run.code).toBe(0);
    expect((JSON.parse(run.stdout) as TaskList).tasks).toHaveLength(8);
  });
});

describe('the inspector: /api/tasks', () => {
  const get = async (path: string): Promise<Response> => fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });

  it('lists the same facts as tether-admin, filtered the same way', async () => {
    const res = await get('/api/tasks');
    expect(res.status).toBe(200);
    const body = keep(await res.text());
    const list = JSON.parse(body) as TaskList;
    const fromAdmin = await json<TaskList>(['tasks']);
    // Ages and presence are read at each call; everything else is the same.
    expect(list.tasks.map((t) => [t.tag, t.status, t.runner, t.runnerInstance, t.attempts, t.reruns, t.rounds, t.errorCode, t.isError])).toEqual(fromAdmin.tasks.map((t) => [t.tag, t.status, t.runner, t.runnerInstance, t.attempts, t.reruns, t.rounds, t.errorCode, t.isError]));
    const failed = JSON.parse(keep(await (await get('/api/tasks?status=failed')).text())) as TaskList;
    expect(failed.tasks.map((t) => t.tag)).toEqual(['failed', 'route-lost'].map(tagOf));
    const bobs = JSON.parse(keep(await (await get(`/api/tasks?principal=${principalTag(bob)}`)).text())) as TaskList;
    expect(bobs.tasks.map((t) => t.tag)).toEqual(['failed', 'lost'].map(tagOf));
    expect((await get(`/api/tasks/${ids['running']!}`)).status).toBe(404);
    expect((await fetch(`${server.url}/api/tasks`)).status).toBe(401);
  });
});

describe('what no output holds', () => {
  it('has no payload, no full task id and no principal digest anywhere', () => {
    expect(outputs.length).toBeGreaterThan(20);
    const all = outputs.join('\n');
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain('SECRET');
    for (const id of Object.values(ids)) expect(all).not.toContain(id);
    for (const digest of [alice, bob]) expect(all).not.toContain(digest);
  });
});
