import type { TaskStatusName } from './task-model.js';

/** The statuses of the Tasks extension (SEP-2663), in the order a filter offers them. */
export const TASK_STATUSES: readonly TaskStatusName[] = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
