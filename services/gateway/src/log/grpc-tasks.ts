/**
 * The task record over the session-log service (`--log grpc://`): the
 * gateway's `TaskPort` on the task RPCs, with the library's `TaskTable`
 * behind them on the service, so both log modes serve tasks from one
 * implementation.
 */
import { status } from '@grpc/grpc-js';
import { callUnary, cancelAnswerSpelling, readCallFailure } from '@tether/cursor-proto';
import type { CursorServiceClient } from '@tether/cursor-proto';
import { isTaskId, SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { StoredTask, TaskRecord } from '@tether/session-log';
import { reopening, toLogError } from './grpc-log.js';
import type { TaskPort } from './log-port.js';

/** Writes a task's change function loses to others before `update` gives up (as `TaskTable.update`). */
const TASK_CAS_ATTEMPTS = 8;
/** ErrorDetail codes of the task RPCs (cursor.proto's ERRORS table). */
const TASK_NOT_FOUND = 'task_not_found';
const TASK_CONFLICT = 'task_conflict';

/**
 * The task table over the service's task RPCs (cursor.proto, TASKS): the
 * same `TaskTable` behind it, so a gateway on `--log grpc://` serves tasks
 * exactly as one on NATS. OpenTasks first, with this gateway's `--task-ttl`:
 * a service that would refuse such records, or has no task RPCs, stops the
 * gateway at startup with a sentence saying so.
 */
export async function openTasksOver(client: CursorServiceClient, target: string, deadlineMs: number, maxTtlMs: number): Promise<TaskPort> {
  try {
    await callUnary(client.openTasks.bind(client), { maxTtlMs }, { deadlineMs });
  } catch (err) {
    if (readCallFailure(err).code === status.UNIMPLEMENTED) {
      throw new SessionLogError(SessionLogErrorCode.logUnavailable, `the session-log service at ${target} has no task RPCs (it is older than OpenTasks): upgrade it, or run the gateway with --tasks off`, {}, { cause: err });
    }
    throw toLogError(err);
  }
  /** A task call; a `task_not_found` (unknown, gone, another caller's) or `task_conflict` answer comes back as that word. */
  const taskCall = async <Req, Res>(method: Parameters<typeof callUnary<Req, Res>>[0], request: Req): Promise<Res | 'not_found' | 'conflict'> => {
    try {
      return await callUnary(method.bind(client), request, { deadlineMs });
    } catch (err) {
      const code = readCallFailure(err).detail?.code;
      if (code === TASK_NOT_FOUND) return 'not_found';
      if (code === TASK_CONFLICT) return 'conflict';
      throw toLogError(err);
    }
  };
  const read = async (taskId: string): Promise<StoredTask | undefined> => {
    // Client input: a malformed id is an unknown task, as the table answers it.
    if (!isTaskId(taskId)) return undefined;
    const answer = await taskCall(client.getTask, { taskId });
    if (typeof answer === 'string' || answer.task === undefined) return undefined;
    return storedTaskOf(answer.task, taskId);
  };
  return {
    async create(record) {
      const answer = await taskCall(client.createTask, { record: encodeRecord(record) });
      if (typeof answer === 'string') throw new SessionLogError(SessionLogErrorCode.logUnavailable, `the session-log service answered CreateTask with ${answer}`, {});
      return { record, seq: answer.seq };
    },
    read,
    // TaskTable.update's loop, its compare-and-set a CompareAndSetTask call.
    async update(taskId, change) {
      for (let attempt = 0; attempt < TASK_CAS_ATTEMPTS; attempt += 1) {
        const stored = await read(taskId);
        if (stored === undefined) return undefined;
        const next = change(stored.record);
        if (next === undefined) return stored;
        const answer = await taskCall(client.compareAndSetTask, { taskId, expectedSeq: stored.seq, record: encodeRecord(next) });
        if (answer === 'not_found') return undefined;
        if (answer !== 'conflict') return { record: next, seq: answer.seq };
        // Another instance wrote between our read and write: read again and decide again.
      }
      throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'a task kept changing under concurrent updates', {});
    },
    // One WatchTask call, opened again when it breaks; each (re)opening sends the task as it is
    // then, so nothing is missed across a reconnect, and seqs seen already are dropped.
    watch(taskId, listener) {
      if (!isTaskId(taskId)) return () => undefined;
      const abort = new AbortController();
      let seen = 0;
      void (async () => {
        for await (const task of reopening(() => client.watchTask({ taskId }), (m) => m.task, abort.signal)) {
          const stored = storedTaskOf(task, taskId);
          if (stored === undefined || stored.seq <= seen) continue;
          seen = stored.seq;
          listener(stored);
        }
      })().catch(() => undefined);
      return () => abort.abort();
    },
    serveCancels: (writerId, handler) => serveCancelsOver(client, writerId, handler),
    // The service keeps one index of task writes; each list is one call answering this caller's working tasks.
    openWorking: async () => ({
      list: async () => (await callUnary(client.listWorkingTasks.bind(client), {}, { deadlineMs }).catch((err: unknown) => { throw toLogError(err); })).tasks,
      close: async () => undefined,
    }),
    async requestCancel(writerId, taskId, timeoutMs) {
      const request = { writer: writerId, taskId, timeoutMs: Math.min(5_000, Math.max(10, Math.round(timeoutMs))) };
      try {
        const { answer } = await callUnary(client.requestCancel.bind(client), request, { deadlineMs: request.timeoutMs + deadlineMs });
        return cancelAnswerSpelling(answer) ?? 'silent';
      } catch {
        // As the table answers any failure but "no responders": nobody can say nobody runs it.
        return 'silent';
      }
    },
  };
}

function encodeRecord(record: TaskRecord): Buffer {
  return Buffer.from(JSON.stringify(record), 'utf8');
}

/** A record the service sent; one that is not this task's is read as absent, never as a wrong task (as `decodeTask`). */
function storedTaskOf(task: { record: Buffer; seq: number }, taskId: string): StoredTask | undefined {
  let record: unknown;
  try {
    record = JSON.parse(task.record.toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof record !== 'object' || record === null || (record as { taskId?: unknown }).taskId !== taskId) return undefined;
  return { record: record as TaskRecord, seq: task.seq };
}

/**
 * Serves this writer's cancel requests through the service: one
 * ServeCancels call, answering each question from `handler`. A broken call
 * (the service restarted) is opened again with backoff; meanwhile requests
 * to this writer get GONE, and the requester settles the task itself (the
 * call here then finds it settled and stores nothing).
 */
function serveCancelsOver(client: CursorServiceClient, writerId: string, handler: (taskId: string) => boolean): () => void {
  let closed = false;
  let current: ReturnType<CursorServiceClient['serveCancels']> | undefined;
  void (async () => {
    for (let failures = 0; !closed; ) {
      const call = client.serveCancels();
      current = call;
      const ended = new Promise<void>((resolve) => {
        call.on('data', (question: { question: number; taskId: string }) => {
          failures = 0;
          if (question.question === 0) return;
          let accepted = false;
          try {
            accepted = handler(question.taskId);
          } catch {
            accepted = false;
          }
          call.write({ question: question.question, accepted });
        });
        call.on('error', () => resolve());
        call.on('end', () => resolve());
      });
      call.write({ writer: writerId, question: 0, accepted: false });
      await ended;
      if (closed) return;
      failures += 1;
      await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** failures, 2_000)).unref());
    }
  })();
  return () => {
    closed = true;
    current?.cancel();
  };
}
