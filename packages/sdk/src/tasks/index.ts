// Durable tasks (issue 13 item 3): the SDK v1 TaskStore and TaskMessageQueue on JetStream.
export { createDurableTasks } from './durable-tasks.js';
export type { CreateDurableTasksOptions, DurableTasks, PrincipalTasks } from './durable-tasks.js';
export type { DurableTasksOptions } from './config.js';
export { JetStreamTaskStore } from './task-store.js';
export { JetStreamTaskMessageQueue } from './message-queue.js';
export { TaskErrorCode, TaskStoreError, isTaskStoreError } from './errors.js';
export type { TaskErrorFields } from './errors.js';
export { desiredTaskStreams } from './setup.js';
export type { TtlPath } from './setup.js';
export { isTaskId } from './ids.js';
