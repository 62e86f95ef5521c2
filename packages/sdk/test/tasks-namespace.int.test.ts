import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { TaskErrorCode, isTaskStoreError } from '../src/tasks/index.js';
import { resolveTasksConfig } from '../src/tasks/config.js';
import type { DurableTasks } from '../src/tasks/index.js';
import { startTasksFixture } from './tasks-fixtures.js';
import type { TasksFixture } from './tasks-fixtures.js';

const ALICE = 'Bearer alice';
const SESSION = 'session-1';
const REQUEST = { method: 'tools/call', params: { name: 'x' } };

let fx: TasksFixture;
const stores = new Map<string, DurableTasks>();
beforeAll(async () => {
  fx = await startTasksFixture();
  // The default layout and two namespaces, side by side on one server.
  for (const ns of ['', 'alpha', 'beta']) stores.set(ns, (await fx.open({}, ns === '' ? {} : { namespace: ns })).tasks);
});
afterAll(async () => {
  await fx?.teardown();
});

describe('durable tasks in namespaces', () => {
  it('derive their stream names and subject prefix from the namespace; the default keeps today\'s', async () => {
    expect(resolveTasksConfig({})).toMatchObject({ namespace: '', tasksStream: 'TETHER_TASKS', messagesStream: 'TETHER_TASK_MSGS', subjectPrefix: 'tether.task' });
    expect(resolveTasksConfig({ namespace: 'alpha' })).toMatchObject({ namespace: 'alpha', tasksStream: 'TETHER_TASKS_alpha', messagesStream: 'TETHER_TASK_MSGS_alpha', subjectPrefix: 'tether_alpha.task' });
    expect(resolveTasksConfig({ namespace: 'alpha', tasksStream: 'MINE' }).tasksStream).toBe('MINE');
    const nc = await fx.connection();
    const jsm = await jetstreamManager(nc);
    const subjects = new Map<string, string[]>();
    for await (const info of jsm.streams.list()) subjects.set(info.config.name, info.config.subjects ?? []);
    expect(Object.fromEntries([...subjects].sort(([a], [b]) => a.localeCompare(b)))).toEqual({
      TETHER_TASKS: ['tether.task.rec.>'],
      TETHER_TASKS_alpha: ['tether_alpha.task.rec.>'],
      TETHER_TASKS_beta: ['tether_beta.task.rec.>'],
      TETHER_TASK_MSGS: ['tether.task.msg.>'],
      TETHER_TASK_MSGS_alpha: ['tether_alpha.task.msg.>'],
      TETHER_TASK_MSGS_beta: ['tether_beta.task.msg.>'],
    });
  });

  it('a task of one namespace is not found in another, for the same principal and session', async () => {
    const task = await stores.get('alpha')!.forPrincipal(ALICE).taskStore.createTask({ ttl: 60_000 }, 1, REQUEST, SESSION);
    expect(await stores.get('alpha')!.forPrincipal(ALICE).taskStore.getTask(task.taskId, SESSION)).toMatchObject({ taskId: task.taskId });
    for (const ns of ['beta', '']) {
      const store = stores.get(ns)!.forPrincipal(ALICE).taskStore;
      // The SDK's contract for an unknown task: null.
      expect(await store.getTask(task.taskId, SESSION)).toBeNull();
      const err = await store.getTaskResult(task.taskId, SESSION).then(() => undefined, (e: unknown) => e);
      expect(isTaskStoreError(err) && err.code === TaskErrorCode.taskNotFound).toBe(true);
      expect((await store.listTasks(undefined, SESSION)).tasks.map((t) => t.taskId)).not.toContain(task.taskId);
    }
  });

  it.each([['Alpha'], ['a.b'], ['x'.repeat(33)]])('refuses namespace %j naming it and what is allowed', (namespace) => {
    let caught: unknown;
    try {
      resolveTasksConfig({ namespace });
    } catch (err) {
      caught = err;
    }
    expect(isTaskStoreError(caught) && caught.code === TaskErrorCode.invalidConfig).toBe(true);
    expect((caught as Error).message).toBe(`namespace is ${JSON.stringify(namespace)}, must be 1 to 32 lowercase letters, digits, _ and -, starting with a letter or digit`);
  });
});
