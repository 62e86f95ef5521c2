import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueuedMessage } from '@modelcontextprotocol/sdk/experimental/tasks';
import { TaskErrorCode, isTaskStoreError } from '../src/tasks/index.js';
import type { DurableTasks } from '../src/tasks/index.js';
import { natsVersionAtLeast } from '@tether/testing';
import { eventually, isolatedTaskNames, startTasksFixture } from './tasks-fixtures.js';
import type { TasksFixture } from './tasks-fixtures.js';

const ALICE = 'Bearer alice';
const MALLORY = 'Bearer mallory';
const SESSION = 'session-1';
const REQUEST = { method: 'tools/call', params: { name: 'x' } };
const result = (text: string) => ({ content: [{ type: 'text' as const, text }] });

/** Rejects with a TaskStoreError of `code`; anything else fails the test with what it got. */
async function expectCode(promise: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  const err = await promise.then(
    () => new Error(`expected ${code}, but it resolved`),
    (e: unknown) => e,
  );
  if (!isTaskStoreError(err)) throw new Error(`expected TaskStoreError ${code}, got ${String(err)}`);
  expect(err.code).toBe(code);
  if (message) expect(err.message).toMatch(message);
}

let fx: TasksFixture;
beforeAll(async () => {
  fx = await startTasksFixture();
});
afterAll(async () => {
  await fx?.teardown();
});

async function openStore(options = {}): Promise<{ tasks: DurableTasks; names: ReturnType<typeof isolatedTaskNames> }> {
  const names = isolatedTaskNames();
  const { tasks } = await fx.open(names, options);
  return { tasks, names };
}

describe('durable task store', () => {
  it('keeps status transitions, results and final states as the SDK store does', async () => {
    const { tasks } = await openStore();
    const { taskStore } = tasks.forPrincipal(ALICE);
    const task = await taskStore.createTask({ ttl: 60_000, pollInterval: 250 }, 1, REQUEST, SESSION);
    expect(task).toMatchObject({ status: 'working', ttl: 60_000, pollInterval: 250 });
    expect(task.taskId).toMatch(/^[0-9a-f]{32}$/);
    await taskStore.updateTaskStatus(task.taskId, 'input_required', 'need a name', SESSION);
    expect(await taskStore.getTask(task.taskId, SESSION)).toMatchObject({ status: 'input_required', statusMessage: 'need a name' });
    await expectCode(taskStore.getTaskResult(task.taskId, SESSION), TaskErrorCode.resultNotReady, /has no result stored/);
    await taskStore.storeTaskResult(task.taskId, 'completed', result('done'), SESSION);
    expect(await taskStore.getTask(task.taskId, SESSION)).toMatchObject({ status: 'completed' });
    expect(await taskStore.getTaskResult(task.taskId, SESSION)).toEqual(result('done'));
    await expectCode(taskStore.updateTaskStatus(task.taskId, 'working', undefined, SESSION), TaskErrorCode.taskTerminal, /completed, a final status/);
    // ttl null (the SDK's "forever") is capped, and the task says so.
    const unlimited = await taskStore.createTask({ ttl: null }, 2, REQUEST, SESSION);
    expect(unlimited.ttl).toBe(24 * 3_600_000);
  });

  it('takes a retried final status with an empty message as the no-op it is (found by the fuzz suite)', async () => {
    const { tasks } = await openStore();
    const { taskStore } = tasks.forPrincipal(ALICE);
    const task = await taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    // '' sets no message (as the SDK's store), so the same call again must change nothing and succeed.
    await taskStore.updateTaskStatus(task.taskId, 'cancelled', '', SESSION);
    await taskStore.updateTaskStatus(task.taskId, 'cancelled', '', SESSION);
    await taskStore.updateTaskStatus(task.taskId, 'cancelled', undefined, SESSION);
    expect(await taskStore.getTask(task.taskId, SESSION)).toMatchObject({ status: 'cancelled' });
    expect((await taskStore.getTask(task.taskId, SESSION))?.statusMessage).toBeUndefined();
    // Another final status, or another message, is still refused.
    await expectCode(taskStore.updateTaskStatus(task.taskId, 'failed', '', SESSION), TaskErrorCode.taskTerminal);
    await expectCode(taskStore.updateTaskStatus(task.taskId, 'cancelled', 'changed my mind', SESSION), TaskErrorCode.taskTerminal);
  });

  it('binds a task to its principal and session; the stateless era binds to the principal', async () => {
    const { tasks } = await openStore();
    const alice = tasks.forPrincipal(ALICE);
    const mallory = tasks.forPrincipal(MALLORY);
    const inSession = await alice.taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    const stateless = await alice.taskStore.createTask({ ttl: 60_000 }, 2, REQUEST);
    expect(await mallory.taskStore.getTask(inSession.taskId, SESSION)).toBeNull();
    expect(await mallory.taskStore.getTask(stateless.taskId)).toBeNull();
    await expectCode(mallory.taskStore.storeTaskResult(inSession.taskId, 'completed', result('x'), SESSION), TaskErrorCode.taskNotFound);
    await expectCode(mallory.taskMessageQueue.enqueue(stateless.taskId, notification(1)), TaskErrorCode.taskNotFound);
    expect(await alice.taskStore.getTask(inSession.taskId, 'session-2')).toBeNull();
    expect(await alice.taskStore.getTask(inSession.taskId)).toBeNull();
    expect(await alice.taskStore.getTask(stateless.taskId, SESSION)).toBeNull();
    expect(await alice.taskStore.getTask(stateless.taskId)).toMatchObject({ taskId: stateless.taskId });
    expect((await mallory.taskStore.listTasks(undefined, SESSION)).tasks).toEqual([]);
    expect((await alice.taskStore.listTasks(undefined, SESSION)).tasks.map((t) => t.taskId)).toEqual([inSession.taskId]);
    expect((await alice.taskStore.listTasks()).tasks.map((t) => t.taskId)).toEqual([stateless.taskId]);
  });

  it('refuses bad input with errors that name it', async () => {
    const { tasks } = await openStore({ maxResultBytes: 1024 });
    const { taskStore, taskMessageQueue } = tasks.forPrincipal(ALICE);
    await expectCode(taskStore.getTask('../../etc', SESSION), TaskErrorCode.invalidTaskId, /malformed task id \(9 characters\)/);
    await expectCode(taskStore.getTask('tt.*.>', SESSION), TaskErrorCode.invalidTaskId);
    await expectCode(taskStore.listTasks('nope', SESSION), TaskErrorCode.invalidCursor, /malformed cursor/);
    const unknown = 'f'.repeat(32);
    expect(await taskStore.getTask(unknown, SESSION)).toBeNull();
    await expectCode(taskStore.getTaskResult(unknown, SESSION), TaskErrorCode.taskNotFound, new RegExp(`task ${unknown} not found`));
    await expectCode(taskStore.updateTaskStatus(unknown, 'cancelled', undefined, SESSION), TaskErrorCode.taskNotFound);
    await expectCode(taskMessageQueue.enqueue(unknown, notification(1), SESSION), TaskErrorCode.taskNotFound);
    await expectCode(taskStore.createTask({ ttl: -5 }, 1, REQUEST, SESSION), TaskErrorCode.invalidArgument, /ttl is -5/);
    const task = await taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    await expectCode(taskStore.updateTaskStatus(task.taskId, 'done' as 'completed', undefined, SESSION), TaskErrorCode.invalidArgument, /unknown task status "done"/);
    await expectCode(
      taskStore.storeTaskResult(task.taskId, 'completed', result('x'.repeat(2000)), SESSION),
      TaskErrorCode.resultTooLarge,
      /is 20\d\d bytes as JSON, the store takes at most 1024/,
    );
    // Nothing was half-written: the task still takes a result.
    expect(await taskStore.getTask(task.taskId, SESSION)).toMatchObject({ status: 'working' });
    await taskStore.storeTaskResult(task.taskId, 'completed', result('small'), SESSION);
  });

  it('stores a result exactly once when the worker retries after a lost ack', async () => {
    let loseNextAck = false;
    const names = isolatedTaskNames();
    const { tasks, nc } = await fx.open(names, {
      requestTimeoutMs: 1000,
      faults: {
        async beforeCommit(what) {
          // SIGSTOP between the read and the write: the write sits in the
          // server's socket, the client times out, SIGCONT stores it.
          if (what === 'result' && loseNextAck) await fx.server.freeze();
        },
      },
    });
    const { taskStore } = tasks.forPrincipal(ALICE);
    const task = await taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    loseNextAck = true;
    await expectCode(taskStore.storeTaskResult(task.taskId, 'completed', result('once'), SESSION), TaskErrorCode.unavailable, /in doubt/);
    loseNextAck = false;
    await fx.server.thaw();
    // The worker retries the same store: it finds its own result and returns.
    await taskStore.storeTaskResult(task.taskId, 'completed', result('once'), SESSION);
    await taskStore.storeTaskResult(task.taskId, 'completed', result('once'), SESSION);
    expect(await taskStore.getTaskResult(task.taskId, SESSION)).toEqual(result('once'));
    // Two writes ever reached the records stream: the create and one result.
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info(names.tasksStream!)).state.last_seq).toBe(2);
    // A different result is refused, and changes nothing.
    await expectCode(taskStore.storeTaskResult(task.taskId, 'completed', result('twice'), SESSION), TaskErrorCode.resultAlreadyStored, /already has a different result/);
    await expectCode(taskStore.storeTaskResult(task.taskId, 'failed', result('once'), SESSION), TaskErrorCode.resultAlreadyStored);
    expect(await taskStore.getTaskResult(task.taskId, SESSION)).toEqual(result('once'));
    expect((await jsm.streams.info(names.tasksStream!)).state.last_seq).toBe(2);
  });

  it('lets exactly one of two racing workers on two connections store its result', async () => {
    const names = isolatedTaskNames();
    const a = (await fx.open(names)).tasks.forPrincipal(ALICE).taskStore;
    const b = (await fx.open(names)).tasks.forPrincipal(ALICE).taskStore;
    for (let round = 0; round < 5; round += 1) {
      const task = await a.createTask({ ttl: 60_000 }, round, REQUEST, SESSION);
      const outcomes = await Promise.allSettled([
        a.storeTaskResult(task.taskId, 'completed', result('from a'), SESSION),
        b.storeTaskResult(task.taskId, 'completed', result('from b'), SESSION),
      ]);
      const won = outcomes.filter((o) => o.status === 'fulfilled');
      expect(won).toHaveLength(1);
      const lost = outcomes.find((o) => o.status === 'rejected');
      expect(isTaskStoreError(lost?.reason, TaskErrorCode.resultAlreadyStored)).toBe(true);
      const stored = await b.getTaskResult(task.taskId, SESSION);
      expect(stored).toEqual(outcomes[0]?.status === 'fulfilled' ? result('from a') : result('from b'));
    }
  });

  it('survives its process: a store on another connection reads status, result and queued messages', async () => {
    const names = isolatedTaskNames();
    const first = await fx.open(names);
    const { taskStore, taskMessageQueue } = first.tasks.forPrincipal(ALICE);
    const task = await taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    await taskMessageQueue.enqueue(task.taskId, notification(1), SESSION);
    await taskMessageQueue.enqueue(task.taskId, notification(2), SESSION);
    await taskStore.storeTaskResult(task.taskId, 'failed', { content: [{ type: 'text', text: 'boom' }], isError: true }, SESSION);
    await first.nc.close();
    const second = (await fx.open(names)).tasks.forPrincipal(ALICE);
    expect(await second.taskStore.getTask(task.taskId, SESSION)).toMatchObject({ taskId: task.taskId, status: 'failed' });
    expect(await second.taskStore.getTaskResult(task.taskId, SESSION)).toMatchObject({ isError: true });
    expect(await second.taskMessageQueue.dequeue(task.taskId, SESSION)).toEqual(notification(1));
    expect(await second.taskMessageQueue.dequeueAll(task.taskId, SESSION)).toEqual([notification(2)]);
    expect(await second.taskMessageQueue.dequeue(task.taskId, SESSION)).toBeUndefined();
  });

  it('queues FIFO, enforces maxSize, and hands each message to one of two dequeuers', async () => {
    const names = isolatedTaskNames();
    const a = (await fx.open(names)).tasks.forPrincipal(ALICE);
    const b = (await fx.open(names)).tasks.forPrincipal(ALICE);
    const task = await a.taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    // Concurrent enqueues with maxSize from two instances never overfill the queue.
    const results = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).taskMessageQueue.enqueue(task.taskId, notification(i), SESSION, 5)));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(5);
    for (const r of results) if (r.status === 'rejected') expect(isTaskStoreError(r.reason, TaskErrorCode.queueFull) || isTaskStoreError(r.reason, TaskErrorCode.contention)).toBe(true);
    const taken = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).taskMessageQueue.dequeue(task.taskId, SESSION)));
    const got = taken.filter((m): m is QueuedMessage => m !== undefined);
    expect(got).toHaveLength(5);
    expect(new Set(got.map((m) => JSON.stringify(m))).size).toBe(5);
    // FIFO on one consumer.
    for (let i = 0; i < 3; i += 1) await a.taskMessageQueue.enqueue(task.taskId, notification(100 + i), SESSION);
    expect(await b.taskMessageQueue.dequeueAll(task.taskId, SESSION)).toEqual([notification(100), notification(101), notification(102)]);
  });

  it('pages listTasks in creation order', async () => {
    const { tasks } = await openStore({ listPageSize: 3 });
    const { taskStore } = tasks.forPrincipal(ALICE);
    const ids: string[] = [];
    for (let i = 0; i < 7; i += 1) ids.push((await taskStore.createTask({ ttl: 60_000 }, i, REQUEST, SESSION)).taskId);
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await taskStore.listTasks(cursor, SESSION);
      seen.push(...page.tasks.map((t) => t.taskId));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(seen).toEqual([...ids].sort());
    expect(new Set(seen)).toEqual(new Set(ids));
  });

  it('expires a short-TTL task: not found, not listed, its queue gone', async () => {
    const names = isolatedTaskNames();
    const { tasks, nc } = await fx.open(names);
    const { taskStore, taskMessageQueue } = tasks.forPrincipal(ALICE);
    const expectedPath = natsVersionAtLeast(fx.server.version, 2, 11) ? 'per-message-ttl' : 'max-age-and-read-check';
    if (expectedPath !== 'per-message-ttl') console.warn(`nats-server ${fx.server.version} has no per-message TTL (2.11+): expiry runs on max_age and read checks`);
    expect(tasks.server.ttlPath).toBe(expectedPath);
    const short = await taskStore.createTask({ ttl: 1000 }, 1, REQUEST, SESSION);
    const long = await taskStore.createTask({ ttl: 60_000 }, 2, REQUEST, SESSION);
    await taskMessageQueue.enqueue(short.taskId, notification(1), SESSION);
    await eventually('the short task to expire', async () => ((await taskStore.getTask(short.taskId, SESSION)) === null ? true : undefined));
    expect((await taskStore.listTasks(undefined, SESSION)).tasks.map((t) => t.taskId)).toEqual([long.taskId]);
    await expectCode(taskStore.storeTaskResult(short.taskId, 'completed', result('late'), SESSION), TaskErrorCode.taskNotFound);
    expect(await taskMessageQueue.dequeue(short.taskId, SESSION)).toBeUndefined();
    // The record itself leaves the stream: removed by the server's TTL on
    // 2.11+, purged by the read that found it expired on older servers.
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const jsm = await jetstreamManager(nc);
    await eventually('the expired record to leave the stream', async () => {
      const info = await jsm.streams.info(names.tasksStream!, { subjects_filter: '>' });
      return Object.keys(info.state.subjects ?? {}).some((s) => s.endsWith(short.taskId)) ? undefined : true;
    });
    expect(await taskStore.getTask(long.taskId, SESSION)).toMatchObject({ status: 'working' });
  });
});

function notification(n: number): QueuedMessage {
  return { type: 'notification', timestamp: 1_700_000_000_000 + n, message: { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: n } } };
}
