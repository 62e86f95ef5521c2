import type { TasksContext } from './context.js';
import { lastOnSubject, messageTtl, purgeSubject } from './context.js';
import { isWrongLastSequence, TaskErrorCode, TaskStoreError, unavailable } from './errors.js';
import { sessionKey } from './ids.js';
import { decodeRecord, encodeRecord } from './record.js';
import type { TaskRecord } from './record.js';

/** A task as one caller may see it. `seq` is the record's stream sequence: the revision a write compares against. */
export type Lookup =
  | { readonly t: 'visible'; readonly record: TaskRecord; readonly seq: number }
  /** Never created, removed, unreadable, or another session's: the caller cannot tell these apart. */
  | { readonly t: 'absent' }
  /** Past its expiry but not yet removed (fallback path, or the server's TTL has not fired yet). */
  | { readonly t: 'expired' };

/**
 * The record of `taskId` under this principal's subject, if `sessionId`
 * may see it. Another principal's task is a different subject and reads as
 * absent without being touched; another session's is read and refused.
 *
 * Binding is exact, where the SDK's in-memory store is lenient (a call
 * without a session sees every task there, interfaces.d.ts TaskStore doc):
 * a task created in a session is found only in that session, and a task
 * created without one (the stateless era) only without one. The SDK passes
 * the transport's session id on every call it makes (protocol.js
 * requestTaskStore and the tasks/* handlers), so exact binding costs its
 * own flows nothing.
 */
export async function findTask(ctx: TasksContext, principalKey: string, taskId: string, sessionId: string | undefined): Promise<Lookup> {
  const subject = ctx.subjects.record(principalKey, taskId);
  let msg = await lastOnSubject(ctx, ctx.config.tasksStream, subject);
  if (msg === null && ctx.config.replicas > 1) {
    // A stream leader cut off from its peers answers "no message" for a task
    // created through the leader the others elected meanwhile: believed only
    // if one leader with a quorum answers the check and the read, asked
    // again after it, still finds nothing (LeaderQuorumCheck.recheck). R1:
    // the one server is the store.
    const checked = await ctx.quorum.recheck(ctx.config.tasksStream, async () => (await lastOnSubject(ctx, ctx.config.tasksStream, subject)) ?? undefined, subject);
    if (checked.doubt !== undefined) throw new TaskStoreError(TaskErrorCode.unavailable, `task ${taskId} not found by a leader that may not be the only one: ${checked.doubt}`, { taskId });
    msg = checked.value ?? null;
  }
  if (msg === null) return { t: 'absent' };
  const record = decodeRecord(msg.data);
  if (record === undefined || record.task.taskId !== taskId || record.session !== sessionKey(sessionId)) return { t: 'absent' };
  if (Date.now() >= record.expiresAtMs) {
    // On the fallback path nothing else removes it before `max_age`: do it
    // now (nothing may write an expired task, so no write races this).
    if (ctx.ttlPath !== 'per-message-ttl') {
      await purgeSubject(ctx, ctx.config.tasksStream, subject);
      await purgeSubject(ctx, ctx.config.messagesStream, ctx.subjects.messages(principalKey, taskId));
    }
    return { t: 'expired' };
  }
  return { t: 'visible', record, seq: msg.seq };
}

/**
 * Publishes `record` if the subject's newest message is still `expectSeq`
 * (0: the subject must be empty). Returns false when another write won, so
 * the caller re-reads and decides again. `msgID` makes a create retried
 * within the duplicate window land once.
 */
export async function writeRecord(
  ctx: TasksContext,
  principalKey: string,
  record: TaskRecord,
  expectSeq: number,
  what: 'create' | 'status' | 'result',
): Promise<boolean> {
  const data = encodeRecord(record);
  const now = Date.now();
  const ttl = messageTtl(ctx, record.expiresAtMs, now);
  await ctx.faults.beforeCommit?.(what);
  try {
    await ctx.js.publish(ctx.subjects.record(principalKey, record.task.taskId), data, {
      expect: { lastSubjectSequence: expectSeq },
      ...(what === 'create' ? { msgID: `create-${record.task.taskId}` } : {}),
      ...(ttl !== undefined ? { ttl } : {}),
      timeout: ctx.config.requestTimeoutMs,
    });
    return true;
  } catch (err) {
    if (isWrongLastSequence(err)) return false;
    throw unavailable(err, `${what} of task ${record.task.taskId} is in doubt (retry it with the same arguments)`);
  }
}

/** How many times a write re-reads after losing a compare-and-set before it gives up. */
export const CAS_ATTEMPTS = 8;

export function contention(taskId: string): TaskStoreError {
  return new TaskStoreError(TaskErrorCode.contention, `task ${taskId} changed concurrently ${CAS_ATTEMPTS} times in a row`, { taskId });
}
