/**
 * The task checker: from what each task client did and saw (`TaskCall`,
 * facts only) and the store's records after the run, judge every task a
 * client created. A task must end `completed` with the upstream's exact
 * result, or explicitly `failed` (a JSON-RPC `error` with a numeric `code`)
 * or `cancelled` (only when its client asked). Anything else is a violation:
 * a different result, a status that changes after it was terminal, a task
 * still `working`/`input_required` 30 s past its tool's duration (`stuck`),
 * a created task answered "not found", a 200 answer with a body that does
 * not parse, a non-idempotent call run again, a store whose outcome
 * differs from the one the client was told.
 */
import type { StoredTaskFacts } from './task-records.js';
import { bump } from './util.js';

export const TERMINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'cancelled']);

/** The reasons a gateway names when an upstream replica lost a task it held (`tasks/owned-record.ts`). */
export const REPLICA_LOST_REASONS: ReadonlySet<string> = new Set(['replica_gone', 'replica_forgot', 'replica_removed']);

/** The named reason of a failed task's error (`error.data.reason`), if any. */
export function lostReason(error: unknown): string | undefined {
  const reason = (error as { data?: { reason?: unknown } } | undefined)?.data?.reason;
  return typeof reason === 'string' ? reason : undefined;
}


/** What the upstream must answer: exactly `exact`, or text matching `pattern`. */
export interface Expected {
  readonly exact?: string;
  readonly pattern?: RegExp;
  /** The tool may ask for input (an input round). */
  readonly asks: boolean;
  /** The upstream annotates it `idempotentHint`: a lost runner may rerun it. */
  readonly idempotent: boolean;
}

/** One tools/call of a task client and everything it saw of it (the client records, the checker judges). */
export interface TaskCall {
  readonly client: string;
  readonly n: number;
  readonly tool: string;
  readonly expected: Expected;
  /** A victim of the runner kill (`gateway_sigkill` aimed at the gateway running it). */
  readonly victim: boolean;
  readonly startedAt: number;
  /** `pending` until the tools/call answered: a task, a direct answer, or a failed call (no task id). */
  call: 'pending' | 'task' | 'direct' | 'call_failed';
  callDetail?: string;
  taskId?: string;
  /** Status changes seen through tasks/get, in order, consecutive repeats folded. */
  readonly statuses: string[];
  /** The first terminal answer: its status and its result or error. */
  terminal?: { readonly status: string; readonly body: string; readonly result?: unknown; readonly error?: unknown; readonly updatedAt?: number };
  /** Later tasks/get answers (after the first terminal one) that differed from it; the first such answer. */
  laterDiffers: number;
  laterExample?: string;
  /** Later reads that said `failed` with a replica reason after it had ended (its replica died after; judged with the kills). */
  lostAfterTerminal: number;
  polls: number;
  /** tasks/get retried after a network error or a 502/503. */
  retries: number;
  /** Time spent on reads the gateways could not answer (moves the deadline, `UNREADABLE_GRACE_MAX_MS`). */
  unreadableMs: number;
  /** JSON-RPC errors answered to tasks/*, by `code message`. */
  readonly rpcErrors: Record<string, number>;
  /** 200 answers whose body did not parse as our JSON-RPC answer (any request of the task), and the first. */
  unparseable: number;
  unparseableExample?: string;
  cancelSent: boolean;
  /** The input round answered (acknowledged), and an input round seen again after it. */
  answered: boolean;
  askedAgain: number;
  /** When the client stopped following it: terminal, or its deadline passed. */
  end: 'terminal' | 'deadline' | 'none';
  /** The direct answer's result, for `direct`. */
  directResult?: unknown;
  /** The instance the runner kill took (victims). */
  killed?: string;
  /** The store's record after the run. */
  record?: StoredTaskFacts | 'absent' | 'unreadable';
  /** For a task settled `runner_lost`: its runner instance still ran a second after (the harness saw its process). */
  runnerAlive?: boolean;
}

export interface TaskViolation {
  readonly kind: string;
  readonly client: string;
  readonly task: string;
  readonly tool: string;
  readonly detail: string;
}

/** The task part of the chaos report. */
export interface TaskReport {
  readonly clients: number;
  /** tools/call sent. */
  readonly calls: number;
  /** Tasks created (a CreateTaskResult with a task id came back). */
  readonly created: number;
  /** Answered directly, under --task-after (or a tool without task support). */
  readonly direct: number;
  readonly completed: number;
  /**
   * `runnerAlive`: settled `runner_lost` while the instance named as its
   * runner was still running (its outcome was not stored, and its own next
   * read settled it): explicit, but not a lost runner.
   */
  readonly failed: { readonly runner_lost: number; readonly runnerAlive: number; readonly other: number; readonly byReason: Readonly<Record<string, number>> };
  readonly cancelled: number;
  readonly stuck: number;
  /** The tools/call failed before an answer with a task id (network error, 5xx, an error answer): no task to follow. */
  readonly call_failed: number;
  readonly callFailures: Readonly<Record<string, number>>;
  /** Idempotent tasks the store shows run again after a lost runner, and how many of them completed. */
  readonly reruns: { readonly tasks: number; readonly completed: number };
  readonly inputRounds: number;
  readonly cancelsSent: number;
  /** Runner kills aimed at a task (victims): created, killed, and how each ended. */
  readonly runnerKills: { readonly victims: number; readonly killed: number; readonly byEnd: Readonly<Record<string, number>> };
  readonly polls: number;
  readonly pollRetries: number;
  /** Tasks in the store at the end (including ones whose creation the client never heard of). */
  readonly inStore: number | undefined;
  /**
   * Upstream-owned tasks (`--task-upstream owned`) and the replica kills:
   * `held`, tasks a killed replica held when it stopped; `failedNamed`,
   * tasks of this run that ended failed with a replica reason (each one
   * held by a killed replica, else a violation); `lostAfterTerminal`, tasks
   * read terminal, then read lost with their replica after it died.
   */
  readonly replicaLoss?: { readonly held: number; readonly failedNamed: number; readonly lostAfterTerminal: number };
  readonly violations: { readonly total: number; readonly byKind: Readonly<Record<string, number>>; readonly examples: readonly TaskViolation[] };
}

/** What `runChaos` reports when no task client ran, and why. */
export interface TasksSkipped {
  readonly skipped: string;
}

const EXAMPLES = 20;

/** Text of a tool result's first content item. */
export function resultText(result: unknown): string | undefined {
  const content = (result as { content?: Array<{ text?: unknown }> } | undefined)?.content;
  const text = content?.[0]?.text;
  return typeof text === 'string' ? text : undefined;
}

function matches(expected: Expected, result: unknown): boolean {
  if ((result as { isError?: unknown } | undefined)?.isError === true) return false;
  const text = resultText(result);
  if (text === undefined) return false;
  if (expected.exact !== undefined) return text === expected.exact;
  return expected.pattern?.test(text) ?? false;
}

function errorReason(error: unknown): string {
  const data = (error as { data?: { reason?: unknown } } | undefined)?.data;
  return typeof data?.reason === 'string' ? data.reason : `code ${String((error as { code?: unknown } | undefined)?.code)}`;
}

/**
 * Judges every call; `inStore` is the store's task count at the end.
 * `lostWithReplica` (upstream-owned tasks): each task a killed replica held
 * and when it was killed. Only those may end `failed` with a replica
 * reason (`replica_gone`, `replica_forgot`, `replica_removed`); any other
 * task so failed is `replica_failure_unexplained`, and a killed replica's
 * task that completed after the kill is `outlived_its_replica` (nobody
 * holds its result any more).
 */
export function checkTasks(calls: readonly TaskCall[], clients: number, inStore: number | undefined, lostWithReplica?: ReadonlyMap<string, number>): TaskReport {
  const violations: TaskViolation[] = [];
  const byKind: Record<string, number> = {};
  const byReason: Record<string, number> = {};
  const callFailures: Record<string, number> = {};
  const victimEnds: Record<string, number> = {};
  let created = 0, direct = 0, completed = 0, runnerLost = 0, runnerAlive = 0, otherFailed = 0, cancelled = 0, stuck = 0, callFailed = 0;
  let replicaFailed = 0, lostAfterTerminal = 0;
  let rerunTasks = 0, rerunCompleted = 0, inputRounds = 0, cancels = 0, polls = 0, retries = 0, victims = 0, killed = 0;
  for (const c of calls) {
    const flag = (kind: string, detail: string): void => {
      bump(byKind, kind);
      if (violations.length < EXAMPLES) violations.push({ kind, client: c.client, task: c.taskId === undefined ? `#${c.n}` : `${c.taskId.slice(0, 6)}…`, tool: c.tool, detail: detail.slice(0, 300) });
    };
    polls += c.polls;
    retries += c.retries;
    if (c.cancelSent) cancels += 1;
    if (c.unparseable > 0) flag('unparseable', `${c.unparseable} answers with status 200 did not parse: ${c.unparseableExample ?? ''}`);
    if (c.victim) victims += 1;
    if (c.call === 'direct') {
      direct += 1;
      const round = (c.directResult as { resultType?: unknown } | undefined)?.resultType === 'input_required';
      if (!(round && c.expected.asks) && !matches(c.expected, c.directResult)) flag('wrong_result', `direct answer ${JSON.stringify(c.directResult)}`);
      continue;
    }
    if (c.call !== 'task') {
      if (c.call === 'call_failed') {
        callFailed += 1;
        bump(callFailures, c.callDetail ?? 'unknown');
      }
      continue;
    }
    created += 1;
    if (c.killed !== undefined) killed += 1;
    if (c.statuses.includes('input_required')) inputRounds += 1;
    for (const [key, n] of Object.entries(c.rpcErrors)) {
      if (key.startsWith('-32602')) flag(/expired/i.test(key) ? 'task_expired' : 'task_not_found', `${n}x ${key} for a task its client created`);
      else flag('task_method_error', `${n}x ${key}`);
    }
    if (!c.expected.asks && c.statuses.includes('input_required')) flag('input_round_unexpected', `statuses ${c.statuses.join(' → ')}`);
    if (c.askedAgain > 0) flag('input_asked_again', `input_required again after the round was answered (${c.askedAgain} reads); statuses ${c.statuses.join(' → ')}`);
    const killedAt = c.taskId === undefined ? undefined : lostWithReplica?.get(c.taskId);
    if (c.lostAfterTerminal > 0) {
      if (killedAt === undefined) flag('replica_failure_unexplained', `read ${c.terminal?.status ?? '?'}, then ${c.lostAfterTerminal}x failed with a replica reason, but no replica holding it was killed`);
      else lostAfterTerminal += 1;
    }
    if (c.laterDiffers > 0) flag('changed_after_terminal', `${c.laterDiffers} later reads differed from ${c.terminal?.body ?? '?'}: ${c.laterExample ?? ''}`);
    const record = typeof c.record === 'object' ? c.record : undefined;
    if (record !== undefined && record.reruns > 0) {
      rerunTasks += 1;
      if (!c.expected.idempotent) flag('non_idempotent_rerun', `the store shows ${record.reruns} reruns of a tool that is not idempotent`);
    }
    const t = c.terminal;
    if (t === undefined) {
      stuck += 1;
      flag('stuck', `still ${c.statuses.at(-1) ?? 'unread'} at its deadline; statuses ${c.statuses.join(' → ')}; ${c.polls} reads, ${c.retries} unanswered (${(c.unreadableMs / 1000).toFixed(1)} s); store: ${describeRecord(c.record)}`);
      if (c.victim) bump(victimEnds, `stuck${c.killed === undefined ? '' : ' (killed)'}`);
      continue;
    }
    if (record !== undefined && record.status !== t.status) flag('record_mismatch', `the client was told ${t.status}, the store holds ${record.status}`);
    if (c.record === 'absent') flag('record_mismatch', `the client was told ${t.status}, the store holds no record`);
    let end: string = t.status;
    switch (t.status) {
      case 'completed':
        completed += 1;
        if (record !== undefined && record.reruns > 0) rerunCompleted += 1;
        if (!matches(c.expected, t.result)) flag('wrong_result', `completed with ${JSON.stringify(t.result)}, expected ${c.expected.exact ?? String(c.expected.pattern)}`);
        if (killedAt !== undefined && t.updatedAt !== undefined && t.updatedAt > killedAt) flag('outlived_its_replica', `completed at ${new Date(t.updatedAt).toISOString()}, after its replica was killed at ${new Date(killedAt).toISOString()}`);
        break;
      case 'failed': {
        const error = t.error as { code?: unknown } | undefined;
        if (typeof error !== 'object' || error === null || typeof error.code !== 'number') flag('failed_without_error', `failed with error ${JSON.stringify(t.error)}`);
        const reason = errorReason(t.error);
        bump(byReason, reason);
        if (reason === 'runner_lost') runnerLost += 1;
        else otherFailed += 1;
        if (reason === 'runner_lost' && c.runnerAlive === true) runnerAlive += 1;
        if (REPLICA_LOST_REASONS.has(lostReason(t.error) ?? '')) {
          replicaFailed += 1;
          if (killedAt === undefined) flag('replica_failure_unexplained', `failed ${reason}, but no replica holding it was killed`);
        }
        end = `failed ${reason}`;
        break;
      }
      case 'cancelled':
        cancelled += 1;
        if (!c.cancelSent) flag('cancelled_unasked', 'cancelled, but its client never sent tasks/cancel');
        break;
    }
    if (c.victim) bump(victimEnds, `${end}${c.killed === undefined ? ' (not killed)' : record !== undefined && record.reruns > 0 ? ' after a rerun' : ''}`);
  }
  return {
    clients,
    calls: calls.length,
    created,
    direct,
    completed,
    failed: { runner_lost: runnerLost, runnerAlive, other: otherFailed, byReason },
    cancelled,
    stuck,
    call_failed: callFailed,
    callFailures,
    reruns: { tasks: rerunTasks, completed: rerunCompleted },
    inputRounds,
    cancelsSent: cancels,
    runnerKills: { victims, killed, byEnd: victimEnds },
    polls,
    pollRetries: retries,
    inStore,
    ...(lostWithReplica === undefined ? {} : { replicaLoss: { held: lostWithReplica.size, failedNamed: replicaFailed, lostAfterTerminal } }),
    violations: { total: Object.values(byKind).reduce((a, b) => a + b, 0), byKind, examples: violations },
  };
}

function describeRecord(record: TaskCall['record']): string {
  if (record === undefined) return 'not read';
  if (typeof record === 'string') return record;
  return `${record.status}, runner ${record.runner ?? 'none'} (${record.runnerInstance ?? '?'}), attempts ${record.attempts}, reruns ${record.reruns}`;
}

/** The summary's lines for the task part. */
export function formatTaskSummary(tasks: TaskReport | TasksSkipped): string[] {
  if ('skipped' in tasks) return [`tasks:               none (${tasks.skipped})`];
  const f = tasks.failed;
  const lines = [
    `tasks:               ${tasks.clients} task clients (2026-07-28, the Tasks extension, route /tasks/mcp), ${tasks.calls} tools/call: ${tasks.created} tasks created, ${tasks.direct} answered directly, ${tasks.call_failed} calls failed before a task id`,
    `  completed ${tasks.completed}, failed ${f.runner_lost + f.other} (runner_lost ${f.runner_lost}, other ${f.other}), cancelled ${tasks.cancelled}, stuck ${tasks.stuck}; task violations ${tasks.violations.total}`,
    `  runner_lost while the runner instance still ran (its outcome not stored, settled by its own next read): ${f.runnerAlive}`,
    `  ${tasks.reruns.tasks} idempotent tasks rerun after a lost runner (${tasks.reruns.completed} completed), ${tasks.inputRounds} input rounds, ${tasks.cancelsSent} cancels sent; ${tasks.polls} tasks/get (${tasks.pollRetries} retried); ${tasks.inStore ?? '?'} tasks in the store`,
    `  runner kills: ${tasks.runnerKills.killed} of ${tasks.runnerKills.victims} victim tasks had their gateway SIGKILLed mid-task; ${Object.entries(tasks.runnerKills.byEnd).map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}`,
  ];
  if (tasks.replicaLoss !== undefined) {
    const r = tasks.replicaLoss;
    lines.push(`  replica kills: ${r.held} tasks held by killed replicas; ${r.failedNamed} ended failed with a replica reason (each on a killed replica, else a violation); ${r.lostAfterTerminal} read terminal, then lost with their replica`);
  }
  if (Object.keys(f.byReason).length > 0) lines.push(`  failed by reason: ${Object.entries(f.byReason).map(([k, n]) => `${k} ${n}`).join(', ')}`);
  if (Object.keys(tasks.callFailures).length > 0) lines.push(`  calls failed: ${Object.entries(tasks.callFailures).map(([k, n]) => `${n} ${k}`).join(', ')}`);
  for (const v of tasks.violations.examples.slice(0, 10)) lines.push(`  TASK VIOLATION ${JSON.stringify(v)}`);
  return lines;
}
