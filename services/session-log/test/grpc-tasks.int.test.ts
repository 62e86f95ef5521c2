import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import type { ClientDuplexStream, ClientReadableStream } from '@grpc/grpc-js';
import { callUnary, CancelAnswer, readCallFailure } from '@tether/cursor-proto';
import type { CursorServiceClient, ServeCancelsRequest, ServeCancelsResponse, WatchTaskResponse } from '@tether/cursor-proto';
import { newTaskId, newWriterId, SessionLog } from '@tether/session-log';
import type { TaskTable } from '@tether/session-log';
import { CursorServiceError, TaskErrorCode, toGrpcStatus } from '@tether/session-log-service';
import { failure, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

/**
 * The task RPCs (cursor.proto, TASKS) against two real service processes on
 * one real nats-server: the library's TaskTable behind them, scoped per
 * caller. Alice and Bob are two callers (tokens); a record created through
 * one instance is read, changed, watched and cancelled through the other.
 */
let fx: ServiceFixture;
let alice: CursorServiceClient;
let aliceOther: CursorServiceClient;
let bob: CursorServiceClient;
let library: SessionLog;
let table: TaskTable;
const TASK_TTL_MS = 3_600_000;

beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start(['--task-ttl', '1h', '--max-payload-bytes', '65536']);
  const second = await fx.start(['--task-ttl', '1h', '--max-payload-bytes', '65536'], 'session-log-2');
  alice = fx.client();
  aliceOther = fx.client({ target: second.target });
  bob = fx.client({ token: TOKENS.bob });
  // The library on the same NATS and names, as a gateway on NATS uses it.
  library = await SessionLog.create({ servers: fx.nats.url });
  table = await library.openTasks(TASK_TTL_MS);
}, 60_000);
afterAll(async () => {
  await library?.close();
  await fx?.teardown();
});

/** A record as a gateway writes it (services/gateway/src/tasks/tool-call.ts). */
function task(over: Record<string, unknown> = {}): Record<string, unknown> {
  const now = Date.now();
  return {
    v: 1,
    taskId: newTaskId(),
    principal: 'principal-digest-of-user-1',
    route: '/mcp',
    tool: 'slow',
    status: 'working',
    createdAtMs: now,
    updatedAtMs: now,
    ttlMs: 60_000,
    pollIntervalMs: 1_000,
    runner: 'writer-aaaaaaaa',
    runnerInstance: 'gw-1',
    attempts: 1,
    reruns: 0,
    rounds: 0,
    idempotent: false,
    params: { name: 'slow', arguments: { ms: 1 } },
    callHeaders: { 'mcp-protocol-version': '2026-07-28' },
    usedKeys: [],
    ...over,
  };
}
const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value), 'utf8');
const parsed = (bytes: Uint8Array | undefined): Record<string, unknown> => JSON.parse(Buffer.from(bytes ?? []).toString('utf8')) as Record<string, unknown>;

function calls(client: CursorServiceClient) {
  return {
    open: (maxTtlMs?: number) => callUnary(client.openTasks.bind(client), { maxTtlMs }),
    create: (record: Buffer) => callUnary(client.createTask.bind(client), { record }),
    get: (taskId: string) => callUnary(client.getTask.bind(client), { taskId }),
    cas: (taskId: string, expectedSeq: number, record: Buffer) => callUnary(client.compareAndSetTask.bind(client), { taskId, expectedSeq, record }),
    cancel: (writer: string, taskId: string, timeoutMs?: number) => callUnary(client.requestCancel.bind(client), { writer, taskId, timeoutMs }),
  };
}

/** A WatchTask call whose records queue up; `opened` settles on its first (empty) response. */
function watch(client: CursorServiceClient, taskId: string) {
  const call: ClientReadableStream<WatchTaskResponse> = client.watchTask({ taskId });
  const records: { record: Record<string, unknown>; seq: number }[] = [];
  const waiters: (() => void)[] = [];
  const opened = new Promise<void>((resolve, reject) => {
    call.once('error', reject);
    call.on('data', (m: WatchTaskResponse) => {
      if (m.task === undefined) return resolve();
      records.push({ record: parsed(m.task.record), seq: m.task.seq });
      for (const w of waiters.splice(0)) w();
    });
  });
  call.on('error', () => undefined);
  const until = async (n: number, ms = 5_000): Promise<typeof records> => {
    const deadline = Date.now() + ms;
    while (records.length < n && Date.now() < deadline) await new Promise<void>((r) => (waiters.push(r), setTimeout(r, 50)));
    return records;
  };
  return { call, opened, records, until };
}

/** A ServeCancels call for `writer` that answers each question with `answer(taskId)` (undefined: no answer). */
async function serve(client: CursorServiceClient, writer: string, answer: (taskId: string) => boolean | undefined) {
  const call: ClientDuplexStream<ServeCancelsRequest, ServeCancelsResponse> = client.serveCancels();
  const asked: string[] = [];
  call.on('error', () => undefined);
  const served = new Promise<void>((resolve) => {
    call.on('data', (m: ServeCancelsResponse) => {
      if (m.question === 0) return resolve();
      asked.push(m.taskId);
      const accepted = answer(m.taskId);
      if (accepted !== undefined) call.write({ question: m.question, accepted });
    });
  });
  call.write({ writer, question: 0, accepted: false });
  await served;
  return { call, asked };
}

describe('task records over gRPC', () => {
  it('OpenTasks says the service TTL and refuses a longer one', async () => {
    expect(await calls(alice).open(TASK_TTL_MS)).toEqual({ maxTtlMs: TASK_TTL_MS });
    expect(await calls(alice).open()).toEqual({ maxTtlMs: TASK_TTL_MS });
    const f = await failure(calls(alice).open(2 * TASK_TTL_MS));
    expect([f.code, f.detail?.code]).toEqual([status.INVALID_ARGUMENT, 'invalid_argument']);
    expect(f.message).toContain("this service's --task-ttl (3600000 ms)");
  });

  it('CreateTask on one instance, GetTask on the other: the same record, without the service key', async () => {
    const record = task();
    const { seq } = await calls(alice).create(json(record));
    expect(seq).toBeGreaterThan(0);
    const got = await calls(aliceOther).get(record['taskId'] as string);
    expect(got.task?.seq).toBe(seq);
    expect(parsed(got.task?.record)).toEqual(record);
    // The library reads the very record (its decodeTask accepts it), with the owner inside.
    const stored = await table.read(record['taskId'] as string);
    expect(stored?.seq).toBe(seq);
    expect(stored?.record).toEqual({ ...record, 'tether.caller': 'alice' });
    // The same record again (a retry after a lost answer) gets its seq; another record with that id is refused.
    expect(await calls(aliceOther).create(json(record))).toEqual({ seq });
    expect((await failure(calls(bob).create(json(record)))).message).toBe('a task with this id exists');
    const again = await failure(calls(alice).create(json({ ...record, status: 'completed' })));
    expect([again.code, again.detail?.code, again.message]).toEqual([status.INVALID_ARGUMENT, 'invalid_argument', 'a task with this id exists']);
    expect((await calls(alice).get(record['taskId'] as string)).task?.seq).toBe(seq);
  });

  it('CompareAndSetTask writes over the seq it was decided on, and only over it', async () => {
    const record = task();
    const taskId = record['taskId'] as string;
    const { seq: first } = await calls(alice).create(json(record));
    const { seq: second } = await calls(aliceOther).cas(taskId, first, json({ ...record, status: 'input_required', runner: null, updatedAtMs: Date.now() + 1 }));
    expect(second).toBeGreaterThan(first);
    // A writer that decided on the first record loses, and is told the seq stored now.
    const lost = await failure(calls(alice).cas(taskId, first, json({ ...record, status: 'cancelled', runner: null })));
    expect([lost.code, lost.detail?.code, lost.detail?.seq, lost.detail?.expectedSeq]).toEqual([status.ABORTED, 'task_conflict', second, first]);
    expect(parsed((await calls(alice).get(taskId)).task?.record)['status']).toBe('input_required');
    // A change written by the library in-process is a conflict too.
    await table.update(taskId, (current) => ({ ...current, updatedAtMs: current.updatedAtMs + 1 }));
    expect((await failure(calls(alice).cas(taskId, second, json({ ...record, status: 'completed' })))).detail?.code).toBe('task_conflict');
    const now = await calls(alice).get(taskId);
    const { seq: third } = await calls(alice).cas(taskId, now.task!.seq, json({ ...parsed(now.task?.record), status: 'completed', result: { content: [] } }));
    expect(await calls(aliceOther).get(taskId)).toMatchObject({ task: { seq: third } });
    expect(parsed((await calls(aliceOther).get(taskId)).task?.record)).toMatchObject({ status: 'completed', result: { content: [] } });
    // The record must name the task of the request; an unknown task is not found.
    const wrongId = await failure(calls(alice).cas(taskId, third, json({ ...record, taskId: newTaskId() })));
    expect([wrongId.code, wrongId.message]).toEqual([status.INVALID_ARGUMENT, 'record.taskId must be the task_id of the request']);
    const unknown = newTaskId();
    expect((await failure(calls(alice).cas(unknown, 1, json({ ...record, taskId: unknown })))).detail?.code).toBe('task_not_found');
  });

  it('WatchTask sends the task as it is now, then every change from any instance, in seq order', async () => {
    const record = task();
    const taskId = record['taskId'] as string;
    const { seq } = await calls(alice).create(json(record));
    const w = watch(alice, taskId);
    await w.opened;
    expect((await w.until(1))[0]).toEqual({ record, seq });
    const { seq: next } = await calls(aliceOther).cas(taskId, seq, json({ ...record, status: 'completed', runner: null }));
    const got = await w.until(2);
    expect(got.map((r) => [r.seq, r.record['status']])).toEqual([[seq, 'working'], [next, 'completed']]);
    expect(got[1]!.record).not.toHaveProperty('tether.caller');
    // A task watched before it exists: the first record is its creation.
    const later = task();
    const early = watch(aliceOther, later['taskId'] as string);
    await early.opened;
    const { seq: created } = await calls(alice).create(json(later));
    expect(await early.until(1)).toEqual([{ record: later, seq: created }]);
    w.call.cancel();
    early.call.cancel();
  });

  it('cancel round trip: RequestCancel on one instance reaches the ServeCancels call on the other', async () => {
    const writer = newWriterId();
    const running = new Set<string>();
    const served = await serve(alice, writer, (taskId) => running.delete(taskId));
    const a = newTaskId();
    running.add(a);
    expect(await calls(aliceOther).cancel(writer, a)).toEqual({ answer: CancelAnswer.ACCEPTED });
    // Asked again, it no longer runs it.
    expect(await calls(aliceOther).cancel(writer, a)).toEqual({ answer: CancelAnswer.NOT_RUNNING });
    expect(served.asked).toEqual([a, a]);
    // A writer nobody serves is gone.
    expect(await calls(aliceOther).cancel(newWriterId(), a)).toEqual({ answer: CancelAnswer.GONE });
    served.call.end();
    served.call.cancel();
    await new Promise((r) => setTimeout(r, 200));
    expect(await calls(alice).cancel(writer, a)).toEqual({ answer: CancelAnswer.GONE });
  });

  it('a writer that does not answer in time is silent', async () => {
    const writer = newWriterId();
    const served = await serve(aliceOther, writer, () => undefined);
    expect(await calls(alice).cancel(writer, newTaskId(), 200)).toEqual({ answer: CancelAnswer.SILENT });
    served.call.cancel();
  });
});

describe('isolation between callers', () => {
  it("another caller's task is not found, its changes never reach another caller, and it cannot be changed", async () => {
    const record = task();
    const taskId = record['taskId'] as string;
    const { seq } = await calls(alice).create(json(record));
    const got = await failure(calls(bob).get(taskId));
    const unknown = await failure(calls(bob).get(newTaskId()));
    for (const f of [got, unknown]) expect([f.code, f.message, f.detail?.code]).toEqual([status.NOT_FOUND, 'task not found', 'task_not_found']);
    const cas = await failure(calls(bob).cas(taskId, seq, json({ ...record, status: 'cancelled' })));
    expect([cas.code, cas.detail?.code]).toEqual([status.NOT_FOUND, 'task_not_found']);
    // Bob's watch opens (a task may not exist yet) but hears nothing of Alice's task.
    const w = watch(bob, taskId);
    await w.opened;
    await calls(alice).cas(taskId, seq, json({ ...record, status: 'completed', runner: null }));
    expect(await w.until(1, 500)).toEqual([]);
    w.call.cancel();
    expect(parsed((await calls(alice).get(taskId)).task?.record)['status']).toBe('completed');
  });

  it("ListWorkingTasks lists the caller's working tasks with their runner, from any instance, and drops them once settled; never another caller's, nor route records", async () => {
    const working = (client: CursorServiceClient) => callUnary(client.listWorkingTasks.bind(client), {}).then((r) => r.tasks);
    const runner = newWriterId();
    const record = task({ runner });
    const taskId = record['taskId'] as string;
    const { seq } = await calls(alice).create(json(record));
    // A route record of an upstream-owned task: the upstream runs it, nothing to sweep.
    const route = task({ runner, upstream: { taskId: 'upstream-1', replica: 'r'.repeat(22) } });
    await calls(alice).create(json(route));
    const listed = async (client: CursorServiceClient): Promise<string[]> => (await working(client)).filter((t) => t.taskId === taskId || t.taskId === route['taskId']).map((t) => `${t.taskId}:${t.runner}`);
    // The index follows writes as they are stored: the service's consumer may see this one a moment later.
    const deadline = Date.now() + 5_000;
    while ((await listed(aliceOther)).length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await listed(aliceOther)).toEqual([`${taskId}:${runner}`]);
    expect(await listed(alice)).toEqual([`${taskId}:${runner}`]);
    expect(await listed(bob)).toEqual([]);
    await calls(alice).cas(taskId, seq, json({ ...record, status: 'completed', runner: null }));
    while ((await listed(alice)).length > 0 && Date.now() < deadline + 5_000) await new Promise((r) => setTimeout(r, 50));
    expect(await listed(alice)).toEqual([]);
  });

  it("a caller's cancel requests reach only its own writers", async () => {
    const writer = newWriterId();
    const served = await serve(alice, writer, () => true);
    expect(await calls(bob).cancel(writer, newTaskId())).toEqual({ answer: CancelAnswer.GONE });
    expect(served.asked).toEqual([]);
    // Bob serving the same writer id does not hear Alice's requests either.
    const squatter = await serve(bob, writer, () => false);
    const taskId = newTaskId();
    expect(await calls(alice).cancel(writer, taskId)).toEqual({ answer: CancelAnswer.ACCEPTED });
    expect([served.asked, squatter.asked]).toEqual([[taskId], []]);
    served.call.cancel();
    squatter.call.cancel();
  });

  it('a task stored by a gateway on NATS in-process has no caller: no caller of the service sees it', async () => {
    const record = task();
    await table.create(record as never);
    expect((await failure(calls(alice).get(record['taskId'] as string))).detail?.code).toBe('task_not_found');
  });
});

describe('malformed input is refused, naming what is wrong, and nothing is stored', () => {
  const cases: [string, (r: Record<string, unknown>) => Buffer, string][] = [
    ['not JSON', () => Buffer.from('{"v":1,'), 'record is not UTF-8 JSON'],
    ['not an object', () => json([1, 2]), 'record must be a JSON object (a TaskRecord)'],
    ['another version', (r) => json({ ...r, v: 2 }), 'record.v must be 1'],
    ['a bad task id', (r) => json({ ...r, taskId: 'short' }), 'record.taskId must be 22 base64url characters'],
    ['no principal', (r) => json({ ...r, principal: undefined }), 'record.principal must be a string'],
    ['an unknown status', (r) => json({ ...r, status: 'running' }), 'record.status must be one of working, input_required, completed, failed, cancelled'],
    ['a TTL past --task-ttl', (r) => json({ ...r, ttlMs: TASK_TTL_MS + 1 }), "record.ttlMs must be a whole number of ms from 1 to 3600000 (this service's --task-ttl)"],
    ['a fractional creation time', (r) => json({ ...r, createdAtMs: 1.5 }), 'record.createdAtMs must be a whole number of ms'],
    ['params not an object', (r) => json({ ...r, params: 'x' }), 'record.params must be a JSON object'],
    ["the service's own key", (r) => json({ ...r, 'tether.caller': 'bob' }), "record key 'tether.caller' is reserved"],
  ];
  it.each(cases)('%s', async (_name, make, message) => {
    const record = task();
    const f = await failure(calls(alice).create(make(record)));
    expect([f.code, f.detail?.code]).toEqual([status.INVALID_ARGUMENT, 'invalid_argument']);
    expect(f.message).toContain(message);
    expect(await table.read(record['taskId'] as string)).toBeUndefined();
  });

  it('a record over --max-payload-bytes is payload_too_large; a malformed task_id is INVALID_ARGUMENT', async () => {
    const record = task({ params: { name: 'slow', arguments: { blob: 'x'.repeat(70_000) } } });
    const big = await failure(calls(alice).create(json(record)));
    expect([big.code, big.detail?.code, big.detail?.facts['maxBytes']]).toEqual([status.RESOURCE_EXHAUSTED, 'payload_too_large', '65536']);
    const bad = await failure(calls(alice).get('not-a-task'));
    expect([bad.code, bad.message]).toEqual([status.INVALID_ARGUMENT, 'task_id must be 22 base64url characters']);
    const watchBad = watch(alice, 'x');
    const err = await watchBad.opened.then(() => undefined, (e: unknown) => readCallFailure(e));
    expect(err?.code).toBe(status.INVALID_ARGUMENT);
    const writerBad = await failure(calls(alice).cancel('w', newTaskId()));
    expect(writerBad.message).toContain('writer is malformed');
  });

  it('maps the task codes to their statuses (the ERRORS table)', () => {
    expect(toGrpcStatus(new CursorServiceError(TaskErrorCode.taskNotFound, 'task not found')).code).toBe(status.NOT_FOUND);
    expect(toGrpcStatus(new CursorServiceError(TaskErrorCode.taskConflict, 'conflict')).code).toBe(status.ABORTED);
  });
});
