import { JsErrCode, jsErrorCode } from '@tether/session-log';

/**
 * Local errors of the durable task store. Callers match on `code`. The SDK
 * turns a thrown error into a JSON-RPC error for the client (its own
 * handlers wrap most of them in `InvalidParams`), so every message names
 * what was wrong without carrying a payload or a raw session id.
 */
export const TaskErrorCode = {
  /** A configuration value is out of range or malformed. */
  invalidConfig: 'invalid_config',
  /** An existing stream disagrees with the configuration. Never changed silently. */
  incompatibleStreams: 'incompatible_streams',
  /** A task id that this store never issues (wrong length or alphabet). */
  invalidTaskId: 'invalid_task_id',
  /** A `listTasks` cursor that is not a task id. */
  invalidCursor: 'invalid_cursor',
  /** A status, TTL or message this store cannot take. */
  invalidArgument: 'invalid_argument',
  /** No such task for this principal and session (absent, expired, or someone else's: same code on purpose). */
  taskNotFound: 'task_not_found',
  /** The task is completed, failed or cancelled: its status can no longer change. */
  taskTerminal: 'task_terminal',
  /** A different result (or final status) is already stored: results are stored once. */
  resultAlreadyStored: 'result_already_stored',
  /** `getTaskResult` on a task that has no result yet. */
  resultNotReady: 'result_not_ready',
  /** The result is larger than the store accepts. */
  resultTooLarge: 'result_too_large',
  /** A queued message is larger than the store accepts. */
  messageTooLarge: 'message_too_large',
  /** `enqueue` with `maxSize` on a queue that already holds that many messages. */
  queueFull: 'queue_full',
  /** Another instance changed the task at the same moment, too many times in a row. */
  contention: 'contention',
  /**
   * JetStream did not answer in time or refused for a reason of its own. A
   * write that ends this way is in doubt: it may have been stored. Every
   * write of this store may be retried with the same arguments.
   */
  unavailable: 'tasks_unavailable',
} as const;
export type TaskErrorCode = (typeof TaskErrorCode)[keyof typeof TaskErrorCode];

/** Structured facts that travel with an error (never payloads, never raw session ids). */
export interface TaskErrorFields {
  readonly taskId?: string;
  readonly status?: string;
  readonly sizeBytes?: number;
  readonly limitBytes?: number;
  readonly detail?: Readonly<Record<string, unknown>>;
}

export class TaskStoreError extends Error {
  override readonly name = 'TaskStoreError';
  readonly code: TaskErrorCode;
  readonly fields: TaskErrorFields;

  constructor(code: TaskErrorCode, message: string, fields: TaskErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.fields = fields;
  }
}

export function isTaskStoreError(err: unknown, code?: TaskErrorCode): err is TaskStoreError {
  return err instanceof TaskStoreError && (code === undefined || err.code === code);
}

/** A compare-and-set publish that lost: the subject changed since it was read. */
export function isWrongLastSequence(err: unknown): boolean {
  return jsErrorCode(err) === JsErrCode.streamWrongLastSequence || /wrong last sequence/i.test(String(err));
}

export function isNoMessageFound(err: unknown): boolean {
  return jsErrorCode(err) === JsErrCode.noMessageFound || /no message found/i.test(String(err));
}

export function isStreamNotFound(err: unknown): boolean {
  return jsErrorCode(err) === JsErrCode.streamNotFound || /stream not found/i.test(String(err));
}

export function unavailable(err: unknown, what: string): TaskStoreError {
  if (err instanceof TaskStoreError) return err;
  return new TaskStoreError(TaskErrorCode.unavailable, `${what}: JetStream request failed: ${String(err)}`, {}, { cause: err });
}

export function taskNotFound(taskId: string): TaskStoreError {
  return new TaskStoreError(TaskErrorCode.taskNotFound, `task ${taskId} not found`, { taskId });
}
