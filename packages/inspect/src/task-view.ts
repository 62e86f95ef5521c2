/**
 * A task record as an operator may see it: the one place where a record's
 * payloads (params, input requests and answers, request state, result,
 * error data, call headers) are left behind. Fields are picked one by one,
 * never spread, so a field added to `TaskRecord` later stays hidden until
 * someone decides it may be shown.
 */
import { callerWriterId, isWriterId, principalTag } from '@tether/session-log';
import type { TaskRecord } from '@tether/session-log';
import { TASK_STATUSES } from './task-statuses.js';
import { principalMatches } from './tag.js';
import type { RunnerState, TaskFilter, TaskStatusName, TaskSummary } from './task-model.js';

/** How many characters of a task id its tag keeps: enough to tell a listing's rows apart, far too few to use the task. */
const TAG_CHARS = 6;
/** A failed task's status message can quote the upstream's error message: bounded. */
const MAX_STATUS_MESSAGE = 200;
const DEFAULT_LIMIT = 50;

/** A task's name in every view: the first 6 characters of its id and `…`. */
export function taskTag(taskId: string): string {
  return `${taskId.slice(0, TAG_CHARS)}…`;
}

export function isTaskStatusName(value: unknown): value is TaskStatusName {
  return typeof value === 'string' && (TASK_STATUSES as readonly string[]).includes(value);
}

/** A stored record, or undefined for a message that is not one: the gateway's own decoder, so the operator sees exactly the tasks the gateway would read. */
export { decodeTask } from '@tether/session-log';

/** Where the session-log service keeps the caller that created a task (tasks created over its API carry it). */
const CALLER_KEY = 'tether.caller';

/**
 * The writer id to probe for a record's runner, or the state that needs no
 * probe. A task created through the session-log service names its caller,
 * and the service holds that caller's writers under ids of their own
 * (`callerWriterId`): the runner is asked there.
 */
export function runnerToProbe(record: TaskRecord): string | Exclude<RunnerState, 'alive' | 'gone' | 'silent'> {
  if (record.runner === null || record.runner === undefined) return 'none';
  if (!isWriterId(record.runner)) return 'unknown';
  const caller = (record as unknown as Readonly<Record<string, unknown>>)[CALLER_KEY];
  return typeof caller === 'string' ? callerWriterId(caller, record.runner) : record.runner;
}

/** Bytes of a value's JSON; 0 when absent. */
function jsonBytes(value: unknown): number {
  return value === undefined ? 0 : Buffer.byteLength(JSON.stringify(value));
}

const count = (value: unknown): number => (Number.isSafeInteger(value) && (value as number) >= 0 ? (value as number) : 0);
const text = (value: unknown): string => (typeof value === 'string' ? value : '');
const keys = (value: unknown): number => (typeof value === 'object' && value !== null ? Object.keys(value).length : 0);

/**
 * The status an operator sees: a route record of an upstream-owned task
 * (`upstream` set) that is still followed is `routed`, not a `working`
 * task without a runner; one settled (a replica found gone) keeps its status.
 */
export function viewStatus(record: TaskRecord): TaskStatusName {
  return record.upstream !== undefined && record.status === 'working' ? 'routed' : record.status;
}

/** A route record's replica digest (never a URL: the record holds none), or null. */
function replicaOf(record: TaskRecord): string | null {
  const replica = record.upstream?.replica;
  return typeof replica === 'string' && replica !== '' ? replica : null;
}

/** The operator's view of one stored record (`recordBytes`: the stored message's size; `runner`: its probed presence). */
export function summarizeTask(taskId: string, record: TaskRecord, recordBytes: number, runner: RunnerState): TaskSummary {
  const failed = record.status === 'failed';
  const message = failed ? text(record.statusMessage) : '';
  const errorCode = failed ? record.error?.['code'] : undefined;
  return {
    tag: taskTag(taskId),
    status: viewStatus(record),
    tool: text(record.tool),
    route: text(record.route),
    principal: principalTag(text(record.principal)),
    runnerInstance: typeof record.runnerInstance === 'string' && record.runnerInstance !== '' ? record.runnerInstance : null,
    runner,
    attempts: count(record.attempts),
    reruns: count(record.reruns),
    rounds: count(record.rounds),
    idempotent: record.idempotent === true,
    createdAtMs: count(record.createdAtMs),
    updatedAtMs: count(record.updatedAtMs),
    ttlMs: count(record.ttlMs),
    expiresAtMs: count(record.createdAtMs) + count(record.ttlMs),
    pendingInputs: keys(record.inputRequests),
    inputResponses: keys(record.inputResponses),
    statusMessage: failed && message !== '' ? (message.length > MAX_STATUS_MESSAGE ? `${message.slice(0, MAX_STATUS_MESSAGE)}…` : message) : null,
    errorCode: typeof errorCode === 'number' && Number.isInteger(errorCode) ? errorCode : null,
    isError: record.status === 'completed' ? record.result?.['isError'] === true : null,
    bytes: { record: recordBytes, params: jsonBytes(record.params), result: jsonBytes(record.result), error: jsonBytes(record.error) },
    replica: replicaOf(record),
  };
}

/**
 * Records through a filter, newest created first, cut to the limit. The
 * principal filter compares no more than a tag shows (`principalMatches`),
 * as the session list does.
 */
export function selectTasks<T extends { readonly record: TaskRecord }>(rows: readonly T[], filter: TaskFilter): T[] {
  const { principal } = filter;
  return rows
    .filter(({ record }) => filter.status === undefined || viewStatus(record) === filter.status)
    .filter(({ record }) => principal === undefined || principalMatches(principalTag(text(record.principal)), principal))
    .sort((a, b) => count(b.record.createdAtMs) - count(a.record.createdAtMs))
    .slice(0, filter.limit ?? DEFAULT_LIMIT);
}
