import type { JsonObject, TaskRecord } from '@tether/session-log';
import type { CallOutcome } from './upstream-call.js';
import { RpcCode } from './wire.js';

/**
 * What a task becomes when its upstream call ends: the one place that maps
 * an upstream outcome to a task status. SEP-2663: a result (even one with
 * `isError`) is `completed`; only a JSON-RPC error is `failed`; an input
 * round is `input_required`.
 */
export function settled(current: TaskRecord, outcome: CallOutcome, nowMs: number): TaskRecord {
  // A state from an earlier round or leg is not this outcome's: only an input round carries one on (SEP-2663: a message without one means none).
  const base = omit({ ...current, runner: null, updatedAtMs: nowMs }, 'inputResponses', 'inputRequests', 'statusMessage', 'requestState');
  switch (outcome.kind) {
    case 'answer': {
      const { answer } = outcome;
      if (answer.error !== undefined) {
        const message = typeof answer.error.message === 'string' ? answer.error.message : 'no message';
        return failed(base, answer.error, `the upstream answered a JSON-RPC error: ${message}`);
      }
      if (answer.result.resultType === 'input_required') return inputRound(base, answer.result);
      return { ...base, status: 'completed', result: answer.result };
    }
    case 'http': {
      const error = rpcErrorIn(outcome.body) ?? { code: RpcCode.internal, message: `the upstream answered HTTP ${outcome.status} without a JSON-RPC answer`, data: { reason: 'upstream_http', status: outcome.status } };
      return failed(base, error, `the upstream answered HTTP ${outcome.status}`);
    }
    case 'lost':
      if (outcome.aborted && outcome.reason === CANCELLED) return { ...base, status: 'cancelled', statusMessage: 'cancelled by tasks/cancel' };
      return failed(base, { code: RpcCode.internal, message: outcome.reason, data: { reason: outcome.aborted ? 'aborted' : 'upstream_lost' } }, outcome.reason);
  }
}

/**
 * The `requestState` of an input round that asks nothing (no or empty
 * `inputRequests`): SEP-2322's request-state-only leg, which the runner
 * follows itself by calling again with that state. Undefined for any other
 * outcome (an empty round without a state is the upstream's mistake, and
 * `settled` fails it).
 */
export function stateOnlyRound(outcome: CallOutcome): string | undefined {
  if (outcome.kind !== 'answer' || outcome.answer.error !== undefined) return undefined;
  const result = outcome.answer.result;
  if (result.resultType !== 'input_required' || typeof result.requestState !== 'string') return undefined;
  const requests = result.inputRequests;
  const asks = typeof requests === 'object' && requests !== null && !Array.isArray(requests) && Object.keys(requests).length > 0;
  return asks ? undefined : result.requestState;
}

/** The abort reason of a call cancelled by `tasks/cancel`. */
export const CANCELLED = 'cancelled by tasks/cancel';

export function failed(base: TaskRecord, error: JsonObject, statusMessage: string): TaskRecord {
  return { ...base, status: 'failed', error, statusMessage, runner: null };
}

/**
 * An input round: the upstream's `inputRequests` under keys the client has
 * never seen on this task (SEP-2663: a key names one request over the
 * task's whole life), so a key the upstream reuses in a later round is
 * renamed `<key>.<round>` and mapped back when the answers go up.
 */
function inputRound(base: TaskRecord, result: JsonObject): TaskRecord {
  const requests = result.inputRequests;
  if (typeof requests !== 'object' || requests === null || Array.isArray(requests) || Object.keys(requests).length === 0) {
    return failed(base, { code: RpcCode.internal, message: 'the upstream asked for input without any inputRequests', data: { reason: 'upstream_invalid_input_round' } }, 'the upstream asked for input without any inputRequests');
  }
  const used = new Set(base.usedKeys);
  // Null prototypes: an upstream key `__proto__` is a key like any other.
  const shown: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
  const keyMap: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, request] of Object.entries(requests as JsonObject)) {
    let wireKey = key;
    for (let n = base.rounds + 1; used.has(wireKey); n += 1) wireKey = `${key}.${n}`;
    used.add(wireKey);
    shown[wireKey] = request;
    keyMap[wireKey] = key;
  }
  const requestState = typeof result.requestState === 'string' ? result.requestState : undefined;
  return {
    ...omit(base, 'requestState'),
    status: 'input_required',
    statusMessage: 'waiting for input: answer inputRequests with tasks/update',
    inputRequests: shown,
    keyMap,
    usedKeys: [...used],
    ...(requestState === undefined ? {} : { requestState }),
  };
}

function rpcErrorIn(body: Buffer): JsonObject | undefined {
  try {
    const value = JSON.parse(body.toString('utf8')) as { error?: unknown };
    const error = value?.error;
    if (typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'number') return error as JsonObject;
  } catch {
    // not JSON: described by status instead
  }
  return undefined;
}

/** A copy of `record` without `keys` (optional fields are absent, never `undefined`). */
export function omit(record: TaskRecord, ...keys: (keyof TaskRecord)[]): TaskRecord {
  const copy: Record<string, unknown> = { ...record };
  for (const key of keys) delete copy[key];
  return copy as unknown as TaskRecord;
}
