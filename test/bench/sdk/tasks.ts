import { randomUUID } from 'node:crypto';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { connect } from '@nats-io/transport-node';
import { createDurableTasks } from '@tether/sdk';
import { progress, summarize } from '../stats.js';
import type { Summary } from '../stats.js';

export const TaskStoreName = { durable: 'createDurableTasks (JetStream)', sdk: 'SDK InMemoryTaskStore' } as const;
export type TaskStoreKind = keyof typeof TaskStoreName;

export interface TaskRow {
  readonly store: TaskStoreKind;
  readonly create: Summary;
  readonly get: Summary;
  /** `getTask` answers that were not the task created (should be 0). */
  readonly misses: number;
}

export interface TasksRun {
  readonly rows: TaskRow[];
  /** What `createDurableTasks` reported about the server. */
  readonly durable: { readonly version: string; readonly ttlPath: string; readonly maxResultBytes: number };
}

const TTL_MS = 60_000;

/**
 * `createTask` then `getTask` latency, one call at a time, `count` tasks of
 * one principal in one session: every `createTask` timed, then `getTask`
 * of the created tasks in random order. The durable store on its own NATS
 * connection (another instance's view would be the same: reads go to the
 * stream leader).
 */
export async function measureTasks(natsUrl: string, count: number, warmup: number): Promise<TasksRun> {
  const nc = await connect({ servers: natsUrl, noAsyncTraces: true });
  const sdk = new InMemoryTaskStore();
  try {
    const durable = await createDurableTasks({ nc });
    const rows = [await measureStore('durable', durable.forPrincipal('Bearer sdk-bench').taskStore, count, warmup), await measureStore('sdk', sdk, count, warmup)];
    return { rows, durable: { version: durable.server.version, ttlPath: durable.server.ttlPath, maxResultBytes: durable.maxResultBytes } };
  } finally {
    // The SDK store holds a cleanup timer per task with a TTL.
    sdk.cleanup();
    await nc.close();
  }
}

async function measureStore(kind: TaskStoreKind, store: TaskStore, count: number, warmup: number): Promise<TaskRow> {
  const sessionId = randomUUID();
  const created: string[] = [];
  const createMs: number[] = [];
  for (let i = 0; i < warmup + count; i += 1) {
    const request = { method: 'tools/call', params: { name: 'slow-report', arguments: { i } } };
    const start = performance.now();
    const task = await store.createTask({ ttl: TTL_MS }, i, request, sessionId);
    if (i >= warmup) createMs.push(performance.now() - start);
    created.push(task.taskId);
  }
  const order = [...created].sort(() => Math.random() - 0.5);
  const getMs: number[] = [];
  let misses = 0;
  for (const [i, taskId] of order.entries()) {
    const start = performance.now();
    const task = await store.getTask(taskId, sessionId);
    if (i >= warmup) getMs.push(performance.now() - start);
    if (task?.taskId !== taskId) misses += 1;
  }
  const row = { store: kind, create: summarize(createMs), get: summarize(getMs), misses };
  progress(`tasks ${kind}: create p50 ${row.create.p50.toFixed(3)} ms, get p50 ${row.get.p50.toFixed(3)} ms (${count} each)`);
  return row;
}
