import type { TaskStatusName } from './task-model.js';

/** The statuses of the Tasks extension (SEP-2663) and `routed` (an upstream-owned task's route), in the order a filter offers them. */
export const TASK_STATUSES: readonly TaskStatusName[] = ['working', 'input_required', 'completed', 'failed', 'cancelled', 'routed'];
