import type { Result, Task } from '@modelcontextprotocol/sdk/types.js';

export type TaskStatus = Task['status'];

const STATUSES: ReadonlySet<string> = new Set<TaskStatus>(['working', 'input_required', 'completed', 'failed', 'cancelled']);
const TERMINAL: ReadonlySet<string> = new Set<TaskStatus>(['completed', 'failed', 'cancelled']);

export function isTaskStatus(value: unknown): value is TaskStatus {
  return typeof value === 'string' && STATUSES.has(value);
}

/** Same rule as the SDK's `isTerminal` (interfaces.js): completed, failed and cancelled never change again. */
export function isTerminalStatus(status: TaskStatus): boolean {
  return TERMINAL.has(status);
}

/**
 * What one task's subject holds: the task as the SDK returns it, who may see
 * it, when it expires, and its result once stored. Status and result live in
 * one message so that the transition to a final status and the result are
 * one compare-and-set: there is no moment where one is stored without the
 * other, and no second result can follow the first.
 */
export interface TaskRecord {
  readonly v: 1;
  readonly task: Task;
  /** `sessionKey()` of the creating request's session, or null in the stateless era. */
  readonly session: string | null;
  /** The JSON-RPC method that created the task (for operators; params are never stored). */
  readonly method: string;
  /** Wall-clock expiry (ms since the epoch); the SDK's semantics: creation + ttl, reset to final status + ttl. */
  readonly expiresAtMs: number;
  readonly result?: Result;
  /** `resultDigest()` of the stored result and final status: a retried store with the same one is a no-op. */
  readonly resultDigest?: string;
}

export function encodeRecord(record: TaskRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record));
}

/** Decodes a stored record; a message that is not one (written by hand, another version) reads as absent rather than as a wrong task. */
export function decodeRecord(data: Uint8Array): TaskRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Partial<TaskRecord>;
  if (record.v !== 1 || typeof record.expiresAtMs !== 'number' || typeof record.task !== 'object' || record.task === null) return undefined;
  if (!isTaskStatus(record.task.status)) return undefined;
  return record as TaskRecord;
}

/** The task as the SDK returns it: a copy, so callers cannot change what a later write encodes. */
export function publicTask(record: TaskRecord): Task {
  return { ...record.task };
}
