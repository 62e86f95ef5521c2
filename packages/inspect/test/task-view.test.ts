import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newTaskId, principalDigest, principalTag } from '@tether/session-log';
import type { TaskRecord } from '@tether/session-log';
import { formatTask, formatTasks } from '../src/admin-task-format.js';
import { decodeTask, selectTasks, summarizeTask, taskTag } from '../src/task-view.js';

const MARK = 'PAYLOAD-MARK-';
const statuses = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;

/** Any JSON value, some of whose strings (and keys) carry MARK. */
const marked = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, fc.string().map((s) => `${MARK}${s}`), fc.integer(), fc.boolean(), fc.constant(null), fc.array(tie('value'), { maxLength: 3 }), fc.dictionary(fc.string().map((k) => `${MARK}${k}`), tie('value'), { maxKeys: 3 })),
})).value;

const record = fc.record({
  status: fc.constantFrom(...statuses),
  params: fc.dictionary(fc.string(), marked, { maxKeys: 3 }),
  inputRequests: fc.dictionary(fc.string().map((k) => `${MARK}${k}`), marked, { maxKeys: 3 }),
  inputResponses: fc.dictionary(fc.string(), marked, { maxKeys: 3 }),
  requestState: fc.string().map((s) => `${MARK}${s}`),
  result: fc.record({ content: marked, isError: fc.boolean() }),
  errorData: marked,
  statusMessage: fc.string().map((s) => `${MARK}${s}`),
  extra: marked,
});

describe('summarizeTask', () => {
  it('never lets a payload through, whatever the record holds (fields picked, never spread)', () => {
    fc.assert(
      fc.property(record, (r) => {
        const taskId = newTaskId();
        const stored = {
          v: 1,
          taskId,
          principal: principalDigest('p'),
          route: '/mcp',
          tool: 'tool',
          status: r.status,
          createdAtMs: 1,
          updatedAtMs: 2,
          ttlMs: 3,
          pollIntervalMs: 1,
          runner: null,
          attempts: 1,
          reruns: 0,
          rounds: 0,
          idempotent: false,
          params: r.params,
          callHeaders: { 'mcp-param-x': `${MARK}header` },
          inputRequests: r.inputRequests,
          inputResponses: r.inputResponses,
          keyMap: { a: `${MARK}key` },
          usedKeys: [`${MARK}used`],
          requestState: r.requestState,
          result: r.result,
          error: { code: -32000, message: `${MARK}message`, data: r.errorData },
          // Not failed: its status message is the gateway's own, but may not be shown either.
          statusMessage: r.status === 'failed' ? 'upstream failed' : r.statusMessage,
          // A field a later version of the record might add.
          futurePayload: r.extra,
        } as TaskRecord;
        const summary = summarizeTask(taskId, stored, 100, 'none');
        const shown = [JSON.stringify(summary), formatTask(summary, 10), formatTasks({ stream: 'S', streamExists: true, tasks: [summary] }, 10)].join('\n');
        expect(shown).not.toContain(MARK);
        expect(shown).not.toContain(taskId);
        expect(summary.pendingInputs).toBe(Object.keys(r.inputRequests).length);
        expect(summary.isError).toBe(r.status === 'completed' ? r.result.isError : null);
        expect(summary.errorCode).toBe(r.status === 'failed' ? -32000 : null);
      }),
    );
  });

  it('names a task by the first 6 characters of its id', () => {
    expect(taskTag('AbCdEfGhIjKlMnOpQrStUv')).toBe('AbCdEf…');
  });

  it('bounds a failed task\'s status message and keeps control characters off the terminal', () => {
    const taskId = newTaskId();
    const base = decodeTask(new TextEncoder().encode(JSON.stringify({ v: 1, taskId, principal: principalDigest('p'), route: '/r\u001b[31m', tool: 't', status: 'failed', createdAtMs: 1, updatedAtMs: 1, ttlMs: 1, params: {}, statusMessage: `x\u0007${'y'.repeat(300)}`, error: { code: 1.5 } })), taskId)!;
    const summary = summarizeTask(taskId, base, 1, 'none');
    expect(summary.statusMessage).toHaveLength(201);
    expect(summary.errorCode).toBeNull();
    expect(formatTask(summary, 0)).not.toMatch(/[\u0000-\u0008\u000b-\u001f]/);
  });
});

describe('decodeTask', () => {
  it('reads what is not a record of this task as absent', () => {
    const taskId = newTaskId();
    const ok = { v: 1, taskId, principal: 'p', status: 'working', createdAtMs: 1, ttlMs: 1, params: {} };
    const enc = (v: unknown): Uint8Array => new TextEncoder().encode(typeof v === 'string' ? v : JSON.stringify(v));
    expect(decodeTask(enc(ok), taskId)).toBeDefined();
    for (const bad of ['not json', 'null', { ...ok, v: 2 }, { ...ok, taskId: newTaskId() }, { ...ok, status: 'running' }, { ...ok, params: null }]) expect(decodeTask(enc(bad), taskId)).toBeUndefined();
  });
});

describe('selectTasks', () => {
  it('filters by status and principal tag, newest first, cut to the limit', () => {
    const row = (status: TaskRecord['status'], principal: string, createdAtMs: number) => ({ record: { status, principal, createdAtMs } as TaskRecord });
    const alice = principalDigest('alice');
    const rows = [row('working', alice, 1), row('failed', alice, 3), row('working', principalDigest('bob'), 2)];
    expect(selectTasks(rows, {}).map((r) => r.record.createdAtMs)).toEqual([3, 2, 1]);
    expect(selectTasks(rows, { status: 'working' }).map((r) => r.record.createdAtMs)).toEqual([2, 1]);
    expect(selectTasks(rows, { principal: principalTag(alice).slice(0, 4) }).map((r) => r.record.createdAtMs)).toEqual([3, 1]);
    // Only a tag's 12 characters are compared: a whole digest finds its tasks, and reads no more of it.
    expect(selectTasks(rows, { principal: alice }).map((r) => r.record.createdAtMs)).toEqual([3, 1]);
    expect(selectTasks(rows, { limit: 1 }).map((r) => r.record.createdAtMs)).toEqual([3]);
  });
});
