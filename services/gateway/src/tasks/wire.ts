import type { JsonObject, TaskRecord } from '@tether/session-log';

/** The Tasks extension (SEP-2663) on the wire: names, codes and shapes, in one place. */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const CLIENT_CAPABILITIES_META = 'io.modelcontextprotocol/clientCapabilities';
/** The first revision without sessions, whose requests the gateway may turn into tasks. */
export const TASKS_PROTOCOL_VERSION = '2026-07-28';

export const TaskMethod = {
  get: 'tasks/get',
  update: 'tasks/update',
  cancel: 'tasks/cancel',
} as const;
export type TaskMethod = (typeof TaskMethod)[keyof typeof TaskMethod];
export const isTaskMethod = (method: unknown): method is TaskMethod => method === TaskMethod.get || method === TaskMethod.update || method === TaskMethod.cancel;

export const RpcCode = {
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  /** SEP-2243: a routing header disagrees with the body (HTTP 400). */
  headerMismatch: -32020,
  /** SEP-2575: the request needs a capability the client did not declare (HTTP 400). */
  missingCapability: -32021,
  /** SEP-2575: a protocol revision the server does not serve (HTTP 400, `data.supported`). */
  unsupportedVersion: -32022,
} as const;

export interface RpcError {
  readonly code: number;
  readonly message: string;
  readonly data?: unknown;
}

/** -32021 naming the extension, as the spec's example has it. */
export const missingTasksCapability = (what: string): RpcError => ({
  code: RpcCode.missingCapability,
  message: `Missing required client capability: ${what} needs the ${TASKS_EXTENSION} extension in _meta["${CLIENT_CAPABILITIES_META}"].extensions`,
  data: { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } },
});

/** One answer for an unknown id, a malformed one and another principal's: nobody learns which. */
export const taskNotFound = (): RpcError => ({ code: RpcCode.invalidParams, message: 'Failed to retrieve task: Task not found' });
export const taskExpired = (): RpcError => ({ code: RpcCode.invalidParams, message: 'Failed to retrieve task: Task has expired' });

/** Whether the request's per-request capabilities (`params._meta`) declare the Tasks extension. */
export function declaresTasks(params: unknown): boolean {
  const meta = objectAt(params, '_meta');
  const extensions = objectAt(objectAt(meta, CLIENT_CAPABILITIES_META), 'extensions');
  return extensions !== undefined && objectAt(extensions, TASKS_EXTENSION) !== undefined;
}

/**
 * `params` without the Tasks extension in its per-request capabilities: what
 * the gateway sends an upstream when the gateway owns the task (an
 * upstream MUST NOT answer `CreateTaskResult` to a request that did not
 * declare it, so a stale guess about the upstream can never leave the
 * gateway storing an upstream's task handle as a result). Unchanged
 * (the same object) when it declares nothing.
 */
export function withoutTasksDeclaration<T>(params: T): T {
  if (!declaresTasks(params)) return params;
  const meta = objectAt(params, '_meta')!;
  const capabilities = objectAt(meta, CLIENT_CAPABILITIES_META)!;
  const { [TASKS_EXTENSION]: _declared, ...extensions } = objectAt(capabilities, 'extensions')! as Record<string, unknown>;
  return { ...params, _meta: { ...meta, [CLIENT_CAPABILITIES_META]: { ...capabilities, extensions } } };
}

/** A JSON-RPC request body with `withoutTasksDeclaration` applied to its params; the same bytes when it declares nothing. */
export function bodyWithoutTasksDeclaration(body: Buffer): Buffer {
  let message: { params?: unknown };
  try {
    message = JSON.parse(body.toString('utf8')) as typeof message;
  } catch {
    return body;
  }
  if (typeof message !== 'object' || message === null || !declaresTasks(message.params)) return body;
  return Buffer.from(JSON.stringify({ ...message, params: withoutTasksDeclaration(message.params) }));
}

export function objectAt(value: unknown, key: string): JsonObject | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const child = (value as Record<string, unknown>)[key];
  return typeof child === 'object' && child !== null && !Array.isArray(child) ? (child as JsonObject) : undefined;
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The `Task` fields every shape carries. */
function taskFields(r: TaskRecord): Record<string, unknown> {
  return {
    taskId: r.taskId,
    status: r.status,
    ...(r.statusMessage === undefined ? {} : { statusMessage: r.statusMessage }),
    createdAt: iso(r.createdAtMs),
    lastUpdatedAt: iso(r.updatedAtMs),
    ttlMs: r.ttlMs,
    pollIntervalMs: r.pollIntervalMs,
  };
}

/** `CreateTaskResult`: flat `Result & Task`, never a nested `task`, no result/error/inputRequests. */
export function createTaskResult(r: TaskRecord): Record<string, unknown> {
  return { resultType: 'task', ...taskFields(r) };
}

/** `DetailedTask`: the task with what its status inlines. What `tasks/get` answers and `notifications/tasks` carry. */
export function detailedTask(r: TaskRecord): Record<string, unknown> {
  const out = taskFields(r);
  if (r.status === 'completed' && r.result !== undefined) out.result = r.result;
  if (r.status === 'failed' && r.error !== undefined) out.error = r.error;
  if (r.status === 'input_required') out.inputRequests = r.inputRequests ?? {};
  return out;
}

/** `tasks/get`'s result: the detailed task, `resultType: "complete"` (its standard result shape). */
export function getTaskResult(r: TaskRecord): Record<string, unknown> {
  return { resultType: 'complete', ...detailedTask(r) };
}

/** The empty acknowledgement of `tasks/update` and `tasks/cancel`. */
export const EMPTY_ACK = { resultType: 'complete' } as const;
