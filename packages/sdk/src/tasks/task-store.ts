import type { CreateTaskOptions, TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { Request, RequestId, Result, Task } from '@modelcontextprotocol/sdk/types.js';
import type { TasksContext } from './context.js';
import { TaskErrorCode, taskNotFound, TaskStoreError, unavailable } from './errors.js';
import { assertTaskId, newTaskId, resultDigest, sessionKey } from './ids.js';
import { listVisibleTasks } from './list.js';
import { isTaskStatus, isTerminalStatus, publicTask } from './record.js';
import type { TaskRecord, TaskStatus } from './record.js';
import { CAS_ATTEMPTS, contention, findTask, writeRecord } from './records.js';

/**
 * The SDK's `TaskStore` on JetStream, for one principal. Every method
 * takes the session id the SDK passes; see `findTask` for the binding.
 *
 * Semantics follow the SDK's `InMemoryTaskStore` (stores/in-memory.js):
 * status starts `working`; completed, failed and cancelled are final; a
 * task expires `ttl` ms after creation, and again `ttl` ms after it
 * reaches a final status; an expired task is not found. Where they
 * differ, for durability: `ttl` is capped at `maxTtlMs` (also for `null`),
 * and a retried write is a no-op instead of an error (see storeTaskResult).
 */
export class JetStreamTaskStore implements TaskStore {
  readonly #ctx: TasksContext;
  readonly #principal: string;

  /** @param principalKey `principalKey()` of the caller; use `DurableTasks.forPrincipal`. */
  constructor(ctx: TasksContext, principalKey: string) {
    this.#ctx = ctx;
    this.#principal = principalKey;
  }

  async createTask(taskParams: CreateTaskOptions, _requestId: RequestId, request: Request, sessionId?: string): Promise<Task> {
    const ttl = this.#effectiveTtl(taskParams.ttl);
    const pollInterval = taskParams.pollInterval ?? this.#ctx.config.defaultPollIntervalMs;
    if (!Number.isFinite(pollInterval) || pollInterval <= 0) {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `pollInterval is ${String(pollInterval)}, must be a positive number of ms`);
    }
    const now = Date.now();
    const createdAt = new Date(now).toISOString();
    const task: Task = { taskId: newTaskId(now), status: 'working', ttl, createdAt, lastUpdatedAt: createdAt, pollInterval };
    const record: TaskRecord = { v: 1, task, session: sessionKey(sessionId), method: String(request.method), expiresAtMs: now + ttl };
    // 80 random bits per millisecond: a taken subject means a broken random source, not bad luck.
    if (!(await writeRecord(this.#ctx, this.#principal, record, 0, 'create'))) {
      throw unavailable(new Error('a fresh task id was already taken'), `create of task ${task.taskId}`);
    }
    return { ...task };
  }

  async getTask(taskId: string, sessionId?: string): Promise<Task | null> {
    assertTaskId(taskId);
    const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
    return found.t === 'visible' ? publicTask(found.record) : null;
  }

  /**
   * Stores the result and the final status in one compare-and-set write, so
   * a result is stored exactly once. A worker that lost the ack may call
   * again with the same status and result: that finds its own result and
   * returns quietly. A different result, or any result for a task that
   * already has a final status without one, is `result_already_stored` /
   * `task_terminal` and changes nothing.
   */
  async storeTaskResult(taskId: string, status: 'completed' | 'failed', result: Result, sessionId?: string): Promise<void> {
    assertTaskId(taskId);
    if (status !== 'completed' && status !== 'failed') {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `a result's status must be completed or failed, not ${JSON.stringify(status)}`, { taskId });
    }
    const json = resultJson(taskId, result);
    const sizeBytes = Buffer.byteLength(json, 'utf8');
    const limitBytes = this.#ctx.maxResultBytes;
    if (sizeBytes > limitBytes) {
      throw new TaskStoreError(TaskErrorCode.resultTooLarge, `result of task ${taskId} is ${sizeBytes} bytes as JSON, the store takes at most ${limitBytes}`, {
        taskId,
        sizeBytes,
        limitBytes,
      });
    }
    const digest = resultDigest(status, json);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
      if (found.t !== 'visible') throw taskNotFound(taskId);
      const { record, seq } = found;
      if (isTerminalStatus(record.task.status)) {
        if (record.resultDigest === digest) return;
        if (record.resultDigest !== undefined) {
          throw new TaskStoreError(TaskErrorCode.resultAlreadyStored, `task ${taskId} already has a different result (status ${record.task.status}); results are stored once`, {
            taskId,
            status: record.task.status,
          });
        }
        throw terminal(taskId, record.task.status, status);
      }
      const now = Date.now();
      const next: TaskRecord = {
        ...record,
        task: { ...record.task, status, lastUpdatedAt: new Date(now).toISOString() },
        result: JSON.parse(json) as Result,
        resultDigest: digest,
        expiresAtMs: now + ttlOf(record),
      };
      if (await writeRecord(this.#ctx, this.#principal, next, seq, 'result')) return;
    }
    throw contention(taskId);
  }

  async getTaskResult(taskId: string, sessionId?: string): Promise<Result> {
    assertTaskId(taskId);
    const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
    if (found.t !== 'visible') throw taskNotFound(taskId);
    if (found.record.result === undefined) {
      throw new TaskStoreError(TaskErrorCode.resultNotReady, `task ${taskId} has no result stored (status ${found.record.task.status})`, {
        taskId,
        status: found.record.task.status,
      });
    }
    return found.record.result;
  }

  /**
   * Moves a task to `status`. A final status restarts the TTL, as the SDK's
   * store does. Repeating the final status it already has (a retried
   * cancel) is a no-op; anything else after a final status is `task_terminal`.
   * An empty `statusMessage` is no message, on both paths (as the SDK's
   * store treats it): so a retry of any call that succeeded is a no-op.
   */
  async updateTaskStatus(taskId: string, status: TaskStatus, statusMessage?: string, sessionId?: string): Promise<void> {
    assertTaskId(taskId);
    if (!isTaskStatus(status)) throw new TaskStoreError(TaskErrorCode.invalidArgument, `unknown task status ${JSON.stringify(status)}`, { taskId });
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
      if (found.t !== 'visible') throw taskNotFound(taskId);
      const { record, seq } = found;
      if (isTerminalStatus(record.task.status)) {
        if (record.task.status === status && (!statusMessage || statusMessage === record.task.statusMessage)) return;
        throw terminal(taskId, record.task.status, status);
      }
      const now = Date.now();
      const task: Task = { ...record.task, status, lastUpdatedAt: new Date(now).toISOString(), ...(statusMessage ? { statusMessage } : {}) };
      const expiresAtMs = isTerminalStatus(status) ? now + ttlOf(record) : record.expiresAtMs;
      if (await writeRecord(this.#ctx, this.#principal, { ...record, task, expiresAtMs }, seq, 'status')) return;
    }
    throw contention(taskId);
  }

  async listTasks(cursor?: string, sessionId?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    if (cursor !== undefined) assertTaskId(cursor, 'cursor');
    return listVisibleTasks(this.#ctx, this.#principal, cursor, sessionId);
  }

  #effectiveTtl(requested: number | null | undefined): number {
    const cap = this.#ctx.config.maxTtlMs;
    if (requested === undefined || requested === null) return cap;
    if (typeof requested !== 'number' || !Number.isFinite(requested) || requested <= 0) {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `ttl is ${String(requested)}, must be a positive number of ms or null`);
    }
    return Math.min(Math.ceil(requested), cap);
  }
}

function ttlOf(record: TaskRecord): number {
  // Records always carry a number (null is replaced by the cap at creation).
  return record.task.ttl ?? 0;
}

function terminal(taskId: string, current: TaskStatus, wanted: TaskStatus): TaskStoreError {
  return new TaskStoreError(TaskErrorCode.taskTerminal, `task ${taskId} is ${current}, a final status: it cannot become ${wanted}`, { taskId, status: current });
}

function resultJson(taskId: string, result: Result): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(result);
  } catch (err) {
    throw new TaskStoreError(TaskErrorCode.invalidArgument, `result of task ${taskId} is not JSON-serializable: ${String(err)}`, { taskId }, { cause: err });
  }
  if (json === undefined || typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw new TaskStoreError(TaskErrorCode.invalidArgument, `result of task ${taskId} must be a JSON object`, { taskId });
  }
  return json;
}
