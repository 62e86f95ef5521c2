import { age, table, time } from './admin-format.js';
import type { TaskList, TaskSummary } from './task-model.js';

/**
 * Text views of tether-admin's `tasks` and `task`. They print only what a
 * `TaskSummary` holds (tags, counts, sizes, an error code), and strings that
 * came from a record (tool, route, instance, a failure's message) lose
 * control characters, so a record cannot drive the operator's terminal.
 */

const printable = (text: string): string => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');

/** Time left until the TTL, or `expired`. */
function ttlLeft(t: TaskSummary, nowMs: number): string {
  return t.expiresAtMs > nowMs ? age(t.expiresAtMs - nowMs) : 'expired';
}

/** The gateway that ran the call, or for a route record the replica holding the task (its digest's first 8 characters). */
const runnerOrReplica = (t: TaskSummary): string => (t.replica !== null ? `replica:${t.replica.slice(0, 8)}` : t.runnerInstance === null ? '-' : printable(t.runnerInstance));

const runnerState = (t: TaskSummary): string => (t.runner === 'none' ? '-' : t.runner);

export function formatTasks(list: TaskList, nowMs: number): string {
  if (!list.streamExists) return `no tasks (tasks were never used in this namespace: no stream ${list.stream})\n`;
  if (list.tasks.length === 0) return 'no tasks\n';
  return table([
    ['TASK', 'STATUS', 'TOOL', 'ROUTE', 'PRINCIPAL', 'RUNNER', 'ALIVE', 'ATTEMPTS', 'RERUNS', 'ROUNDS', 'AGE', 'TTL'],
    ...list.tasks.map((t) => [
      t.tag,
      t.status,
      printable(t.tool) || '-',
      printable(t.route) || '-',
      t.principal || '-',
      runnerOrReplica(t),
      runnerState(t),
      String(t.attempts),
      String(t.reruns),
      String(t.rounds),
      age(nowMs - t.createdAtMs),
      ttlLeft(t, nowMs),
    ]),
  ]);
}

/** What the task came to, without its content. */
function outcome(t: TaskSummary): string {
  switch (t.status) {
    case 'working':
      return 'running';
    case 'input_required':
      return `waiting for input (${t.pendingInputs} requests pending, ${t.inputResponses} answered this round)`;
    case 'completed':
      return t.isError === true ? 'completed with a tool error (isError: true)' : 'completed (isError: false)';
    case 'failed':
      return `failed: error code ${t.errorCode ?? '-'}${t.statusMessage === null ? '' : `: ${printable(t.statusMessage)}`}`;
    case 'cancelled':
      return 'cancelled';
    case 'routed':
      return 'held by an upstream replica (its status is the upstream\'s)';
  }
}

export function formatTask(t: TaskSummary, nowMs: number): string {
  const rows: [string, string][] = [
    ['status', t.status],
    ['tool', printable(t.tool) || '-'],
    ['route', printable(t.route) || '-'],
    ['principal', t.principal || '-'],
    t.replica !== null
      ? ['replica', `${printable(t.replica)} (an upstream replica runs it; no gateway call)`]
      : ['runner', `${t.runnerInstance === null ? '-' : printable(t.runnerInstance)} (${t.runner === 'none' ? 'no call running' : t.runner})`],
    ['attempts', `${t.attempts} (reruns ${t.reruns}, input rounds ${t.rounds}; ${t.idempotent ? 'idempotent' : 'not idempotent'})`],
    ['created', `${time(t.createdAtMs)} (${age(nowMs - t.createdAtMs)} ago)`],
    ['updated', `${time(t.updatedAtMs)} (${age(nowMs - t.updatedAtMs)} ago)`],
    ['ttl', `${age(t.ttlMs)}, ${t.expiresAtMs > nowMs ? `expires ${time(t.expiresAtMs)} (in ${ttlLeft(t, nowMs)})` : `expired ${time(t.expiresAtMs)}`}`],
    ['input', `${t.pendingInputs} requests pending, ${t.inputResponses} answered this round`],
    ['outcome', outcome(t)],
    ['sizes', `record ${t.bytes.record} B, params ${t.bytes.params} B, result ${t.bytes.result} B, error ${t.bytes.error} B`],
  ];
  return `task ${t.tag}\n${rows.map(([name, value]) => `  ${name.padEnd(10)}${value}`).join('\n')}\n`;
}
