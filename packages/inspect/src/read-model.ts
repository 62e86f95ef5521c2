import type { InspectAccess } from './access.js';
import { checkChains } from './chains.js';
import { isInspectError } from './errors.js';
import type { ChainCheck, SessionSummary, SessionTimeline } from './model.js';
import { listSessions } from './sessions.js';
import type { SessionFilter } from './sessions.js';
import type { TaskFilter, TaskList, TaskSummary } from './task-model.js';
import { listTasks, readTask } from './task-read.js';
import { readTimeline } from './timeline.js';

/**
 * The read model over one deployment's log, in the shape the inspector's
 * page asks for: `readTimeline` answers undefined for a tag no session has
 * (the page's 404), the others throw `InspectError`s.
 */
export interface LogReadModel {
  listSessions(filter: SessionFilter): Promise<SessionSummary[]>;
  readTimeline(tag: string): Promise<SessionTimeline | undefined>;
  /** `session_not_found` (an `InspectError`) for an unknown tag. */
  checkChains(tag: string): Promise<ChainCheck[]>;
  /** The gateway's durable tasks, newest first (`streamExists: false` when tasks were never used). */
  listTasks(filter: TaskFilter): Promise<TaskList>;
  /** One task by its full id: `task_not_found` (an `InspectError`) for an unknown one, `invalid_argument` for a malformed one. */
  readTask(taskId: string): Promise<TaskSummary>;
}

export function createLogReadModel(access: InspectAccess): LogReadModel {
  return {
    listSessions: (filter) => listSessions(access, filter),
    readTimeline: async (tag) => {
      try {
        return await readTimeline(access, tag);
      } catch (err) {
        if (isInspectError(err, 'session_not_found')) return undefined;
        throw err;
      }
    },
    checkChains: (tag) => checkChains(access, tag),
    listTasks: (filter) => listTasks(access, filter),
    readTask: (taskId) => readTask(access, taskId),
  };
}
