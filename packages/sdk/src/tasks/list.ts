import type { Task } from '@modelcontextprotocol/sdk/types.js';
import type { TasksContext } from './context.js';
import { unavailable } from './errors.js';
import { isTaskId } from './ids.js';
import { publicTask } from './record.js';
import { findTask } from './records.js';

/**
 * One page of the tasks `sessionId` may see, in creation order (ids sort by
 * time), after `cursor`. The principal's task subjects come from one
 * STREAM.INFO with a subject filter; each candidate's record is then read,
 * a page at a time, until the page and one more are found (so `nextCursor`
 * is set only when another visible task exists). Cost grows with the
 * principal's task count, not the store's: listing is for people, not hot paths.
 */
export async function listVisibleTasks(ctx: TasksContext, principalKey: string, cursor: string | undefined, sessionId: string | undefined): Promise<{ tasks: Task[]; nextCursor?: string }> {
  const pageSize = ctx.config.listPageSize;
  const ids = (await subjectsOf(ctx, principalKey))
    .map((subject) => subject.slice(subject.lastIndexOf('.') + 1))
    .filter((id) => isTaskId(id) && (cursor === undefined || id > cursor))
    .sort();
  const tasks: Task[] = [];
  let more = false;
  for (let at = 0; at < ids.length && !more; at += pageSize) {
    const found = await Promise.all(ids.slice(at, at + pageSize).map((id) => findTask(ctx, principalKey, id, sessionId)));
    for (const lookup of found) {
      if (lookup.t !== 'visible') continue;
      if (tasks.length === pageSize) {
        more = true;
        break;
      }
      tasks.push(publicTask(lookup.record));
    }
  }
  const last = tasks[tasks.length - 1];
  return more && last !== undefined ? { tasks, nextCursor: last.taskId } : { tasks };
}

async function subjectsOf(ctx: TasksContext, principalKey: string): Promise<string[]> {
  try {
    const info = await ctx.jsm.streams.info(ctx.config.tasksStream, { subjects_filter: ctx.subjects.recordsOf(principalKey) });
    return Object.keys(info.state.subjects ?? {});
  } catch (err) {
    throw unavailable(err, 'list tasks');
  }
}
