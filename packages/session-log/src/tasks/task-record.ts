/**
 * The durable record of one task the gateway runs for a client (the MCP
 * Tasks extension, SEP-2663). One message per task subject holds the whole
 * state, so every transition (a status, its result, an input round) is one
 * compare-and-set and no reader ever sees half of one. Never logged: it
 * holds the call's arguments and its result.
 */
export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

export type JsonObject = { readonly [key: string]: unknown };

const STATUSES: ReadonlySet<string> = new Set<TaskStatus>(['working', 'input_required', 'completed', 'failed', 'cancelled']);
const TERMINAL: ReadonlySet<string> = new Set<TaskStatus>(['completed', 'failed', 'cancelled']);

export const isTaskStatus = (value: unknown): value is TaskStatus => typeof value === 'string' && STATUSES.has(value);
/** completed, failed and cancelled never change again. */
export const isTerminal = (status: TaskStatus): boolean => TERMINAL.has(status);

export interface TaskRecord {
  readonly v: 1;
  readonly taskId: string;
  /** Digest of the principal that created it (`principalDigest`); only it may see the task. */
  readonly principal: string;
  /** The gateway route (path) whose upstream runs the call. */
  readonly route: string;
  /** The tool called (`params.name`), for operators. */
  readonly tool: string;
  readonly status: TaskStatus;
  readonly statusMessage?: string;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** From creation; the task is readable until `createdAtMs + ttlMs`, then answers "expired" for a while, then is gone. */
  readonly ttlMs: number;
  readonly pollIntervalMs: number;
  /**
   * The writer id of the instance holding the upstream call now; null when
   * no call runs (waiting for input, or settled). Its presence going away
   * while the task is `working` is how other instances know the call is lost.
   */
  readonly runner: string | null;
  /** The `--instance-id` of the instance that ran the call last, for operators (the runner id is a process incarnation). */
  readonly runnerInstance?: string;
  /** Upstream calls made for this task (the first, input rounds and reruns). */
  readonly attempts: number;
  /** Reruns after a lost runner (`--task-retry idempotent`). */
  readonly reruns: number;
  /** Input rounds answered so far. */
  readonly rounds: number;
  /** The upstream annotated the tool `idempotentHint: true`. */
  readonly idempotent: boolean;
  /** The client's `tools/call` params (name, arguments, _meta), without `inputResponses` and `requestState`: what each upstream call re-sends. */
  readonly params: JsonObject;
  /** Headers of the first request that each upstream call repeats (`Mcp-Param-*`, `MCP-Protocol-Version`). No credentials: each call carries its caller's own. */
  readonly callHeaders: Readonly<Record<string, string>>;
  /** While `input_required`: the requests still unanswered, by the keys the client sees. */
  readonly inputRequests?: JsonObject;
  /** Answers received in this round, by the client's keys. */
  readonly inputResponses?: JsonObject;
  /** Client key → the upstream's key, where a key was renamed to stay unique over the task's life. */
  readonly keyMap?: Readonly<Record<string, string>>;
  /** Every key ever shown to the client (keys are never reused). */
  readonly usedKeys: readonly string[];
  /** The upstream's `requestState` of the current round, echoed back byte for byte. */
  readonly requestState?: string;
  /** `completed`: the upstream's result (a tool result with `isError` is a result). */
  readonly result?: JsonObject;
  /** `failed`: the JSON-RPC error. */
  readonly error?: JsonObject;
  /**
   * Set on the record of a task the upstream runs itself (it offers the
   * Tasks extension): the gateway keeps no call and no result, only where
   * the task lives, so that every instance sends its requests there.
   */
  readonly upstream?: UpstreamTaskRoute;
}

/** Where an upstream-owned task lives: the upstream's own id and the replica that created it. */
export interface UpstreamTaskRoute {
  /** The id the upstream gave the task (any string; the record's `taskId` is a digest of it and the route). */
  readonly taskId: string;
  /** A digest of the replica's URL (a URL may carry a secret; the record never does). */
  readonly replica: string;
}

export const expiresAt = (r: TaskRecord): number => r.createdAtMs + r.ttlMs;

export function encodeTask(record: TaskRecord): Uint8Array {
  return new TextEncoder().encode(JSON.stringify(record));
}

/** A stored record, or undefined for a message that is not one (hand-written, another version): read as absent, never as a wrong task. */
export function decodeTask(data: Uint8Array, taskId: string): TaskRecord | undefined {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(data));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const r = value as Partial<TaskRecord>;
  if (r.v !== 1 || r.taskId !== taskId || typeof r.principal !== 'string' || !isTaskStatus(r.status)) return undefined;
  if (typeof r.createdAtMs !== 'number' || typeof r.ttlMs !== 'number' || typeof r.params !== 'object' || r.params === null) return undefined;
  return r as TaskRecord;
}
