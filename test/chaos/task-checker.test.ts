import { describe, expect, it } from 'vitest';
import { checkTasks } from './task-checker.js';
import type { Expected, TaskCall } from './task-checker.js';
import { newCall } from './task-client.js';
import type { StoredTaskFacts } from './task-records.js';

// The task checker's rules on their own: which endings of a task are
// explicit and which are violations.

const SLOW: Expected = { exact: 'slow_compute t1.1 done after 0.5 s', asks: false, idempotent: false };
const JOB: Expected = { pattern: /^done \d+$/, asks: false, idempotent: true };
const CONFIRM: Expected = { exact: 'deleted /x', asks: true, idempotent: false };

const text = (value: string) => ({ content: [{ type: 'text', text: value }] });
const record = (status: string, reruns = 0): StoredTaskFacts => ({ status, tool: 't', runner: null, runnerInstance: 'gw1.0', attempts: 1 + reruns, reruns, idempotent: false });

/** A task that was created and followed: its statuses, and its terminal answer (if any). */
function task(expected: Expected, statuses: string[], terminal?: { status: string; result?: unknown; error?: unknown }, more: Partial<TaskCall> = {}): TaskCall {
  const call = newCall('t1', 1, 'tool', expected);
  call.call = 'task';
  call.taskId = 'AAAAAAAAAAAAAAAAAAAAAA';
  call.statuses.push(...statuses);
  if (terminal !== undefined) {
    call.terminal = { ...terminal, body: JSON.stringify(terminal) };
    call.record = record(terminal.status);
  }
  call.end = terminal === undefined ? 'deadline' : 'terminal';
  return Object.assign(call, more);
}

const kinds = (...calls: TaskCall[]) => Object.keys(checkTasks(calls, 1, undefined).violations.byKind).sort();

describe('chaos task checker', () => {
  it('completed with the exact result, failed with an error object, cancelled when asked: no violation, counted', () => {
    const report = checkTasks(
      [
        task(SLOW, ['working', 'completed'], { status: 'completed', result: text('slow_compute t1.1 done after 0.5 s') }),
        task(JOB, ['working', 'completed'], { status: 'completed', result: text('done 17') }, { record: record('completed', 1) }),
        task(SLOW, ['working', 'failed'], { status: 'failed', error: { code: -32603, message: 'gone', data: { reason: 'runner_lost' } } }),
        task(SLOW, ['working', 'failed'], { status: 'failed', error: { code: -32603, message: 'gone', data: { reason: 'runner_lost' } } }, { runnerAlive: true }),
        task(SLOW, ['working', 'failed'], { status: 'failed', error: { code: -32603, message: 'stopped', data: { reason: 'aborted' } } }),
        task(SLOW, ['working', 'cancelled'], { status: 'cancelled' }, { cancelSent: true }),
        task(CONFIRM, ['working', 'input_required', 'working', 'completed'], { status: 'completed', result: text('deleted /x') }, { answered: true }),
      ],
      2,
      7,
    );
    expect(report.violations).toEqual({ total: 0, byKind: {}, examples: [] });
    // A runner_lost whose runner still ran is explicit, but counted apart: a lost outcome, not a lost runner.
    expect(report).toMatchObject({ created: 7, completed: 3, cancelled: 1, stuck: 0, inputRounds: 1, failed: { runner_lost: 2, runnerAlive: 1, other: 1, byReason: { runner_lost: 2, aborted: 1 } }, reruns: { tasks: 1, completed: 1 } });
  });

  it('a different result, a failure without an error, an unasked cancel, a task still working at its deadline: violations', () => {
    expect(kinds(task(SLOW, ['working', 'completed'], { status: 'completed', result: text('slow_compute t1.1 done after 5 s') }))).toEqual(['wrong_result']);
    expect(kinds(task(JOB, ['working', 'completed'], { status: 'completed', result: { ...text('done 3'), isError: true } }))).toEqual(['wrong_result']);
    expect(kinds(task(SLOW, ['working', 'failed'], { status: 'failed' }))).toEqual(['failed_without_error']);
    expect(kinds(task(SLOW, ['working', 'failed'], { status: 'failed', error: { code: '-32603' } }))).toEqual(['failed_without_error']);
    expect(kinds(task(SLOW, ['working', 'cancelled'], { status: 'cancelled' }))).toEqual(['cancelled_unasked']);
    const stuck = checkTasks([task(SLOW, ['working'])], 1, undefined);
    expect(stuck.stuck).toBe(1);
    expect(Object.keys(stuck.violations.byKind)).toEqual(['stuck']);
  });

  it('a terminal answer that changes, an input round asked again or of a tool that never asks, a lost task, a non-idempotent rerun, a store that disagrees: violations', () => {
    const done = { status: 'completed', result: text('slow_compute t1.1 done after 0.5 s') };
    expect(kinds(task(SLOW, ['working', 'completed', 'working'], done, { laterDiffers: 1, laterExample: '{"status":"working"}' }))).toEqual(['changed_after_terminal']);
    expect(kinds(task(SLOW, ['working', 'input_required', 'completed'], done))).toEqual(['input_round_unexpected']);
    expect(kinds(task(CONFIRM, ['working', 'input_required', 'working', 'input_required', 'completed'], { status: 'completed', result: text('deleted /x') }, { answered: true, askedAgain: 1 }))).toEqual(['input_asked_again']);
    expect(kinds(task(SLOW, ['working', 'completed'], done, { rpcErrors: { '-32602 Failed to retrieve task: Task not found': 2 } }))).toEqual(['task_not_found']);
    expect(kinds(task(SLOW, ['working', 'completed'], done, { record: record('completed', 1) }))).toEqual(['non_idempotent_rerun']);
    expect(kinds(task(SLOW, ['working', 'completed'], done, { record: record('failed') }))).toEqual(['record_mismatch']);
    expect(kinds(task(SLOW, ['working', 'completed'], done, { record: 'absent' }))).toEqual(['record_mismatch']);
    expect(kinds(task(SLOW, ['working', 'completed'], done, { unparseable: 1, unparseableExample: 'tasks/get: <html>' }))).toEqual(['unparseable']);
  });

  it('direct answers are judged by the same result; a call that failed before a task id is counted, not judged', () => {
    const direct = (result: unknown): TaskCall => Object.assign(newCall('t1', 2, 'greet', { exact: 'Hello, t1-2!', asks: false, idempotent: false }), { call: 'direct' as const, directResult: result });
    const failed = Object.assign(newCall('t1', 3, 'slow_compute', SLOW), { call: 'call_failed' as const, callDetail: 'http 502' });
    const report = checkTasks([direct(text('Hello, t1-2!')), failed], 1, undefined);
    expect(report).toMatchObject({ created: 0, direct: 1, call_failed: 1, callFailures: { 'http 502': 1 }, violations: { total: 0 } });
    expect(kinds(direct(text('Hello, t1-3!')))).toEqual(['wrong_result']);
    // An input round answered directly (before any task) is the tool's to ask, not a result to judge.
    expect(kinds(Object.assign(newCall('t1', 4, 'confirm_delete', CONFIRM), { call: 'direct' as const, directResult: { resultType: 'input_required', inputRequests: {} } }))).toEqual([]);
  });

  it('upstream-owned: a replica reason only for a killed replica\'s task; a result after its kill, or lost with no kill, is a violation', () => {
    const id = 'AAAAAAAAAAAAAAAAAAAAAA';
    const lost = (reason: string) => ({ status: 'failed', error: { code: -32603, message: 'lost', data: { reason } } });
    const killedAt = Date.now() - 1_000;
    const onKilled = new Map([[id, killedAt]]);
    // Upstream-owned tasks have no outcome in the store: nothing is compared.
    const ownedTask = (...args: Parameters<typeof task>): TaskCall => {
      const c = task(...args);
      delete c.record;
      return c;
    };
    const gone = ownedTask(SLOW, ['working', 'failed'], lost('replica_gone'));
    const forgot = ownedTask(SLOW, ['working', 'failed'], lost('replica_forgot'));
    const report = checkTasks([gone, forgot], 1, undefined, onKilled);
    expect(report.violations.total).toBe(0);
    expect(report.replicaLoss).toEqual({ held: 1, failedNamed: 2, lostAfterTerminal: 0 });
    expect(report.failed.byReason).toEqual({ replica_gone: 1, replica_forgot: 1 });
    expect(Object.keys(checkTasks([gone], 1, undefined, new Map()).violations.byKind)).toEqual(['replica_failure_unexplained']);
    // Read completed, then lost with its replica: explicit for a killed replica's task only.
    const after = ownedTask(SLOW, ['working', 'completed'], { status: 'completed', result: text('slow_compute t1.1 done after 0.5 s') }, { lostAfterTerminal: 2 });
    after.terminal = { ...after.terminal!, updatedAt: killedAt - 10 };
    expect(checkTasks([after], 1, undefined, onKilled).replicaLoss?.lostAfterTerminal).toBe(1);
    expect(Object.keys(checkTasks([after], 1, undefined, new Map()).violations.byKind)).toEqual(['replica_failure_unexplained']);
    // Completed after its replica was killed: nobody could hold that result.
    const late = ownedTask(SLOW, ['working', 'completed'], { status: 'completed', result: text('slow_compute t1.1 done after 0.5 s') });
    late.terminal = { ...late.terminal!, updatedAt: killedAt + 500 };
    expect(Object.keys(checkTasks([late], 1, undefined, onKilled).violations.byKind)).toEqual(['outlived_its_replica']);
  });
});
