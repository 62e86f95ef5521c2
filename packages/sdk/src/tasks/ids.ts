import { createHash, randomBytes } from 'node:crypto';
import { TaskErrorCode, TaskStoreError } from './errors.js';

/**
 * Task ids are 32 lower-case hex characters, like the SDK's in-memory store:
 * 12 of milliseconds since the epoch, then 20 of randomness (80 bits). The
 * time prefix makes ids sort in creation order, so `listTasks` pages in the
 * order tasks were created and a cursor stays valid after its task expired.
 */
const TASK_ID = /^[0-9a-f]{32}$/;
const TIME_HEX_CHARS = 12;

export function newTaskId(nowMs: number = Date.now()): string {
  return nowMs.toString(16).padStart(TIME_HEX_CHARS, '0').slice(-TIME_HEX_CHARS) + randomBytes(10).toString('hex');
}

export function isTaskId(value: unknown): value is string {
  return typeof value === 'string' && TASK_ID.test(value);
}

/** Refuses an id this store never issues before it reaches a subject (a `.` or `*` in it would address other subjects). */
export function assertTaskId(value: unknown, what = 'task id'): asserts value is string {
  if (!isTaskId(value)) {
    const shown = typeof value === 'string' ? `${value.length} characters` : typeof value;
    throw new TaskStoreError(
      what === 'cursor' ? TaskErrorCode.invalidCursor : TaskErrorCode.invalidTaskId,
      `malformed ${what} (${shown}): expected 32 lower-case hex characters as issued by this store`,
    );
  }
}

/**
 * The subject token of a principal: a digest of whatever stable string the
 * caller names it by (a session record's principal digest, an OAuth
 * subject), base64url, so any string is safe in a subject.
 */
export function principalKey(principal: string): string {
  return createHash('sha256').update('tether-task-principal\0').update(principal, 'utf8').digest('base64url');
}

/** What a record keeps of a session id: its digest, for comparison only (records never hold the id itself). */
export function sessionKey(sessionId: string | undefined): string | null {
  if (sessionId === undefined) return null;
  return createHash('sha256').update('tether-task-session\0').update(sessionId, 'utf8').digest('base64url');
}

/** A stable digest of a result and its status, to tell a retried store from a different one. */
export function resultDigest(status: string, resultJson: string): string {
  return createHash('sha256').update(status).update('\0').update(resultJson).digest('base64url');
}
