/**
 * Reads the gateway's durable tasks for operators: the records of
 * `TETHER_EDGE_TASKS[_<namespace>]` (one message per task subject, the
 * newest is the task), and whether each running task's runner still lives.
 * Read-only: the stream is never created here, and a stream that does not
 * exist means tasks were never used in the namespace.
 */
import { EXPIRED_GRACE_MS, isSessionLogError, isTaskId, jsErrorCode, JsErrCode, probeWriter, SessionLogErrorCode } from '@tether/session-log';
import type { TaskRecord } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';
import { readAll } from './read.js';
import type { RunnerState, TaskFilter, TaskList, TaskSummary } from './task-model.js';
import { decodeTask, runnerToProbe, selectTasks, summarizeTask } from './task-view.js';

/**
 * How long a runner has to answer a presence probe. A live gateway answers
 * from its subscription callback in well under this; the probes of a
 * listing run in parallel, so a silent runner costs the listing this once.
 */
export const RUNNER_PROBE_TIMEOUT_MS = 1_000;

interface StoredRow {
  readonly taskId: string;
  readonly record: TaskRecord;
  readonly bytes: number;
}

const taskSubject = (access: InspectAccess, taskId: string): string => access.subjects.task(taskId);

const isStreamNotFound = (err: unknown): boolean => jsErrorCode(err) === JsErrCode.streamNotFound || /stream not found/i.test(String(err));

/** Whether the tasks stream exists; `unavailable` when JetStream cannot say. */
async function tasksStreamExists(access: InspectAccess): Promise<boolean> {
  try {
    await access.jsm.streams.info(access.tasksStream);
    return true;
  } catch (err) {
    if (isStreamNotFound(err)) return false;
    throw new InspectError(InspectErrorCode.unavailable, `cannot read stream ${access.tasksStream}: ${String(err)}`, { cause: err });
  }
}

/**
 * The tasks, newest created first, filtered and cut before the runners of
 * the listed ones are probed (each distinct runner once, in parallel). One
 * consumer over `<prefix>.edge.task.>` delivering the last message of each
 * subject; a message that is not a task record is skipped, as the gateway
 * reads it as absent.
 */
export async function listTasks(access: InspectAccess, filter: TaskFilter = {}): Promise<TaskList> {
  if (!(await tasksStreamExists(access))) return { stream: access.tasksStream, streamExists: false, tasks: [] };
  const prefix = taskSubject(access, '');
  const rows = await readAll<StoredRow>(
    access,
    access.tasksStream,
    `${prefix}>`,
    (msg) => {
      const taskId = msg.subject.slice(prefix.length);
      const record = decodeTask(msg.data, taskId);
      return record === undefined ? undefined : { taskId, record, bytes: msg.data.length };
    },
    true,
  );
  const listed = selectTasks(rows, filter);
  const states = await probeRunners(access, listed.map((r) => r.record));
  return { stream: access.tasksStream, streamExists: true, tasks: listed.map((r) => summarizeTask(r.taskId, r.record, r.bytes, stateOf(r.record, states))) };
}

/**
 * One task by its full id. `invalid_argument` for something that is not a
 * task id, `task_not_found` for an id no task has (or when tasks were never
 * used in the namespace). Messages never repeat the id.
 */
export async function readTask(access: InspectAccess, taskId: string): Promise<TaskSummary> {
  if (!isTaskId(taskId)) throw new InspectError(InspectErrorCode.invalidArgument, 'not a task id (not shown): a task id is 22 characters of A-Z a-z 0-9 _ -');
  let msg;
  try {
    msg = await access.jsm.streams.getMessage(access.tasksStream, { last_by_subj: taskSubject(access, taskId) });
  } catch (err) {
    if (isStreamNotFound(err)) throw new InspectError(InspectErrorCode.taskNotFound, `no task with that id: no stream ${access.tasksStream}, tasks were never used in this namespace`);
    if (jsErrorCode(err) !== JsErrCode.noMessageFound && !/no message found/i.test(String(err))) {
      throw new InspectError(InspectErrorCode.unavailable, `cannot read the task from ${access.tasksStream}: ${String(err)}`, { cause: err });
    }
    msg = null;
  }
  const record = msg === null ? undefined : decodeTask(msg.data, taskId);
  if (msg === null || record === undefined) throw new InspectError(InspectErrorCode.taskNotFound, `no task with that id in ${access.tasksStream} (a task is gone ${EXPIRED_GRACE_MS / 60_000} minutes after its TTL ends)`);
  const states = await probeRunners(access, [record]);
  return summarizeTask(taskId, record, msg.data.length, stateOf(record, states));
}

function stateOf(record: TaskRecord, states: ReadonlyMap<string, RunnerState>): RunnerState {
  const probe = runnerToProbe(record);
  return probe === 'none' || probe === 'unknown' ? probe : (states.get(probe) ?? 'unknown');
}

/** Each distinct runner of `records` probed once, in parallel. */
async function probeRunners(access: InspectAccess, records: readonly TaskRecord[]): Promise<Map<string, RunnerState>> {
  const ids = [...new Set(records.map(runnerToProbe).filter((p) => p !== 'none' && p !== 'unknown'))];
  const states = await Promise.all(ids.map((id) => probeRunner(access, id)));
  return new Map(ids.map((id, i) => [id, states[i]!]));
}

/**
 * Asks a runner's presence whether it lives, as the gateway's instances do
 * (`probeWriter` of @tether/session-log): "no responders" means no process
 * holds it. Throws `unavailable` only when this process has lost NATS itself.
 */
export async function probeRunner(access: InspectAccess, writerId: string, timeoutMs = RUNNER_PROBE_TIMEOUT_MS): Promise<RunnerState> {
  try {
    const state = await probeWriter(access.nc, access.subjects, writerId, timeoutMs);
    return state === 'gone' || state === 'silent' ? state : 'alive';
  } catch (err) {
    if (isSessionLogError(err, SessionLogErrorCode.logUnavailable)) throw new InspectError(InspectErrorCode.unavailable, `cannot probe a runner: ${err.message}`, { cause: err });
    throw err;
  }
}
