import { namespaceNames } from '@tether/session-log';
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

/**
 * The names of a namespace's task streams, derived as the log's are
 * (`namespaceNames` of @tether/session-log): no namespace is today's names;
 * `N` appends `_N` to both streams and makes the subject root `tether_N`
 * (`tether_N.task.rec.…`), a first token no other namespace shares.
 */
export function taskNamespaceNames(namespace: string): { readonly tasksStream: string; readonly messagesStream: string; readonly subjectPrefix: string } {
  if (namespace === '') return { tasksStream: DEFAULT_TASKS_STREAM, messagesStream: DEFAULT_TASK_MESSAGES_STREAM, subjectPrefix: DEFAULT_TASK_SUBJECT_PREFIX };
  return {
    tasksStream: `${DEFAULT_TASKS_STREAM}_${namespace}`,
    messagesStream: `${DEFAULT_TASK_MESSAGES_STREAM}_${namespace}`,
    subjectPrefix: `${namespaceNames(namespace).subjectPrefix}.task`,
  };
}

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
