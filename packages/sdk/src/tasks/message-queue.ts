import type { QueuedMessage, TaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { TasksContext } from './context.js';
import { firstOnSubject, lastOnSubject, messageTtl } from './context.js';
import { isNoMessageFound, isWrongLastSequence, TaskErrorCode, taskNotFound, TaskStoreError, unavailable } from './errors.js';
import { assertTaskId } from './ids.js';
import { CAS_ATTEMPTS, contention, findTask } from './records.js';

const MESSAGE_TYPES: ReadonlySet<string> = new Set(['request', 'notification', 'response', 'error']);

/**
 * The SDK's `TaskMessageQueue` on JetStream, for one principal: one subject
 * per task in the messages stream, FIFO by stream sequence.
 *
 * - A message is taken by deleting it by sequence: the server deletes a
 *   sequence once, so of two instances dequeuing at once exactly one gets
 *   each message. A process that dies between the delete and delivering the
 *   message loses that message (at most once, as the in-memory queue).
 * - Every call looks the task up first: a queue exists only for a task the
 *   caller may see (principal and session), which is stricter than the
 *   SDK's in-memory queue (it ignores the session, stores/in-memory.js
 *   getQueueKey). An unknown task's `enqueue` is `task_not_found`.
 * - A message lives until its task could at the latest expire: the task's
 *   remaining time plus its TTL once more (a final status restarts the TTL).
 */
export class JetStreamTaskMessageQueue implements TaskMessageQueue {
  readonly #ctx: TasksContext;
  readonly #principal: string;

  constructor(ctx: TasksContext, principalKey: string) {
    this.#ctx = ctx;
    this.#principal = principalKey;
  }

  /**
   * Appends a message. With `maxSize` the check and the append are one
   * compare-and-set on the subject's last sequence: the count is read
   * after the last sequence, so an append racing ours makes ours retry
   * and the queue never holds more than `maxSize`.
   */
  async enqueue(taskId: string, message: QueuedMessage, sessionId?: string, maxSize?: number): Promise<void> {
    assertTaskId(taskId);
    if (maxSize !== undefined && (!Number.isInteger(maxSize) || maxSize < 0)) {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `maxSize is ${String(maxSize)}, must be a non-negative integer`, { taskId });
    }
    const data = this.#encode(taskId, message);
    const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
    if (found.t !== 'visible') throw taskNotFound(taskId);
    const now = Date.now();
    const ttl = messageTtl(this.#ctx, found.record.expiresAtMs + (found.record.task.ttl ?? 0), now);
    const subject = this.#ctx.subjects.messages(this.#principal, taskId);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      let expect: { lastSubjectSequence: number } | undefined;
      if (maxSize !== undefined) {
        const last = await lastOnSubject(this.#ctx, this.#ctx.config.messagesStream, subject);
        const size = await this.#size(subject);
        if (size >= maxSize) {
          throw new TaskStoreError(TaskErrorCode.queueFull, `message queue of task ${taskId} is full: ${size} queued, maxSize ${maxSize}`, {
            taskId,
            detail: { size, maxSize },
          });
        }
        expect = { lastSubjectSequence: last?.seq ?? 0 };
      }
      try {
        await this.#ctx.js.publish(subject, data, {
          ...(expect !== undefined ? { expect } : {}),
          ...(ttl !== undefined ? { ttl } : {}),
          timeout: this.#ctx.config.requestTimeoutMs,
        });
        return;
      } catch (err) {
        if (expect !== undefined && isWrongLastSequence(err)) continue;
        throw unavailable(err, `enqueue for task ${taskId} is in doubt`);
      }
    }
    throw contention(taskId);
  }

  async dequeue(taskId: string, sessionId?: string): Promise<QueuedMessage | undefined> {
    assertTaskId(taskId);
    const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
    if (found.t !== 'visible') return undefined;
    return this.#take(taskId);
  }

  /**
   * Takes every queued message. Never rejects: the SDK calls it without
   * awaiting it after `tasks/result` and `tasks/cancel` (protocol.js
   * `_clearTaskQueue` at lines 111 and 152 of 1.32.2), so a rejection would
   * be an unhandled one, which ends a Node process. When JetStream fails
   * midway it returns what it took; the rest expires with the task.
   */
  async dequeueAll(taskId: string, sessionId?: string): Promise<QueuedMessage[]> {
    const out: QueuedMessage[] = [];
    try {
      assertTaskId(taskId);
      const found = await findTask(this.#ctx, this.#principal, taskId, sessionId);
      if (found.t !== 'visible') return out;
      for (let message = await this.#take(taskId); message !== undefined; message = await this.#take(taskId)) out.push(message);
    } catch {
      // See above: returning is the only safe answer here.
    }
    return out;
  }

  async #take(taskId: string): Promise<QueuedMessage | undefined> {
    const stream = this.#ctx.config.messagesStream;
    const subject = this.#ctx.subjects.messages(this.#principal, taskId);
    for (;;) {
      const msg = await firstOnSubject(this.#ctx, stream, subject);
      if (msg === null) return undefined;
      try {
        await this.#ctx.jsm.streams.deleteMessage(stream, msg.seq, false);
      } catch (err) {
        if (isNoMessageFound(err)) continue; // another instance took it first
        throw unavailable(err, `dequeue for task ${taskId}`);
      }
      const message = decodeMessage(msg.data);
      // A message that does not decode was not written by this queue; it is
      // dropped rather than left to block every later one.
      if (message !== undefined) return message;
    }
  }

  async #size(subject: string): Promise<number> {
    try {
      const info = await this.#ctx.jsm.streams.info(this.#ctx.config.messagesStream, { subjects_filter: subject });
      return info.state.subjects?.[subject] ?? 0;
    } catch (err) {
      throw unavailable(err, 'queue size');
    }
  }

  #encode(taskId: string, message: QueuedMessage): Uint8Array {
    if (typeof message !== 'object' || message === null || !MESSAGE_TYPES.has(message.type) || typeof message.message !== 'object' || message.message === null) {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `queued message for task ${taskId} must be {type: request|notification|response|error, message, timestamp}`, { taskId });
    }
    let json: string;
    try {
      json = JSON.stringify(message);
    } catch (err) {
      throw new TaskStoreError(TaskErrorCode.invalidArgument, `queued message for task ${taskId} is not JSON-serializable: ${String(err)}`, { taskId }, { cause: err });
    }
    const data = new TextEncoder().encode(json);
    const limitBytes = this.#ctx.maxQueuedMessageBytes;
    if (data.byteLength > limitBytes) {
      throw new TaskStoreError(TaskErrorCode.messageTooLarge, `queued message for task ${taskId} is ${data.byteLength} bytes as JSON, the store takes at most ${limitBytes}`, {
        taskId,
        sizeBytes: data.byteLength,
        limitBytes,
      });
    }
    return data;
  }
}

function decodeMessage(data: Uint8Array): QueuedMessage | undefined {
  try {
    const value = JSON.parse(new TextDecoder().decode(data)) as QueuedMessage;
    return typeof value === 'object' && value !== null && MESSAGE_TYPES.has(value.type) ? value : undefined;
  } catch {
    return undefined;
  }
}
