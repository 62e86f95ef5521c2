/**
 * Stream and subject names of the task store, in one place. Subjects carry
 * digests only: `<prefix>.rec.<principal digest>.<task id>` for a task's
 * record, `<prefix>.msg.<principal digest>.<task id>` for its queued
 * messages. A principal's tasks are one subject filter, and no subject ever
 * spells a credential or a session id.
 */
export const DEFAULT_TASKS_STREAM = 'TETHER_TASKS';
export const DEFAULT_TASK_MESSAGES_STREAM = 'TETHER_TASK_MSGS';
export const DEFAULT_TASK_SUBJECT_PREFIX = 'tether.task';

export interface TaskSubjects {
  readonly recordWildcard: string;
  readonly messageWildcard: string;
  record(principalKey: string, taskId: string): string;
  /** Every record of one principal. */
  recordsOf(principalKey: string): string;
  messages(principalKey: string, taskId: string): string;
}

export function createTaskSubjects(prefix: string): TaskSubjects {
  return {
    recordWildcard: `${prefix}.rec.>`,
    messageWildcard: `${prefix}.msg.>`,
    record: (principalKey, taskId) => `${prefix}.rec.${principalKey}.${taskId}`,
    recordsOf: (principalKey) => `${prefix}.rec.${principalKey}.*`,
    messages: (principalKey, taskId) => `${prefix}.msg.${principalKey}.${taskId}`,
  };
}
