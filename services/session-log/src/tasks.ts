/**
 * The task RPCs (cursor.proto, TASKS): the library's `TaskTable` over gRPC,
 * for gateways on `--log grpc://` and custom servers. No semantics of its
 * own: the service checks records, scopes them per caller, and stores them
 * with the table the in-process gateways use.
 *
 * Isolation: the caller that creates a task is kept inside the stored record
 * under `tether.caller` (CALLER_META_KEY, as sessions keep it in their
 * metadata); every read and write checks it, another caller's task is
 * `task_not_found` like an unknown one, and answers never carry the key.
 * Ownership never changes: a compare-and-set is allowed only to the owner
 * and stores the owner again.
 */
import type { ServerWritableStream } from '@grpc/grpc-js';
import type {
  CompareAndSetTaskRequest,
  CompareAndSetTaskResponse,
  CreateTaskRequest,
  CreateTaskResponse,
  GetTaskRequest,
  GetTaskResponse,
  ListWorkingTasksResponse,
  OpenTasksRequest,
  OpenTasksResponse,
  StoredTask as ProtoStoredTask,
  WatchTaskRequest,
  WatchTaskResponse,
} from '@tether/cursor-proto';
import { isTaskId, isTaskStatus } from '@tether/session-log';
import type { SessionLog, StoredTask, TaskRecord, TaskTable, WorkingTaskIndex } from '@tether/session-log';
import { countOf } from './convert.js';
import { CursorServiceError, invalid, ServiceErrorCode, TaskErrorCode } from './errors.js';
import { CALLER_META_KEY, RESERVED_META_PREFIX } from './scope.js';
import { send, streaming } from './streams.js';
import type { StreamDeps } from './streams.js';

export interface TaskLimits {
  /** The longest `ttlMs` a record may have (`--task-ttl`): the task stream keeps records this long plus 10 minutes. */
  readonly maxTtlMs: number;
  /** The largest record accepted, bytes (`--max-payload-bytes`). */
  readonly maxRecordBytes: number;
}

/** Records a WatchTask call may have queued before it is ended as too slow. */
const MAX_WATCH_BACKLOG = 256;
const MAX_PRINCIPAL_BYTES = 1024;

/** A task id's first characters, for logs and messages (a task id is a bearer handle: never shown whole). */
export const taskTag = (taskId: string): string => `${taskId.slice(0, 6)}…`;

export function taskIdOf(name: string, value: string): string {
  if (!isTaskId(value)) throw invalid(`${name} must be 22 base64url characters`);
  return value;
}

export function taskNotFound(): CursorServiceError {
  return new CursorServiceError(TaskErrorCode.taskNotFound, 'task not found');
}

/** Whether a stored record is `caller`'s. */
export function ownedBy(record: TaskRecord, caller: string): boolean {
  return (record as unknown as Record<string, unknown>)[CALLER_META_KEY] === caller;
}

/** A stored record as answers carry it: without the reserved keys, as the caller sent it. */
export function toProtoTask(stored: StoredTask): ProtoStoredTask {
  const publicRecord: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(stored.record)) if (!key.startsWith(RESERVED_META_PREFIX)) publicRecord[key] = value;
  return { record: Buffer.from(JSON.stringify(publicRecord), 'utf8'), seq: stored.seq };
}

/**
 * A record a caller sent, checked field by field: at least everything the
 * library's `decodeTask` requires of a stored record (so a record stored here
 * is never read back as absent), each refusal naming the field. Then the
 * caller is stamped into it.
 */
export function recordOf(bytes: Uint8Array, caller: string, limits: TaskLimits, taskId?: string): TaskRecord {
  if (bytes.byteLength > limits.maxRecordBytes) {
    throw new CursorServiceError(ServiceErrorCode.payloadTooLarge, `the task record is ${bytes.byteLength} bytes; the service accepts at most ${limits.maxRecordBytes}`, {
      detail: { bytes: bytes.byteLength, maxBytes: limits.maxRecordBytes },
    });
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch (err) {
    throw invalid(`record is not UTF-8 JSON: ${(err instanceof Error ? err.message : String(err)).slice(0, 120)}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid('record must be a JSON object (a TaskRecord)');
  const r = value as Record<string, unknown>;
  const reserved = Object.keys(r).find((key) => key.startsWith(RESERVED_META_PREFIX));
  if (reserved !== undefined) throw invalid(`record key '${reserved.slice(0, 64)}' is reserved (keys starting with '${RESERVED_META_PREFIX}')`);
  if (r['v'] !== 1) throw invalid('record.v must be 1');
  if (!isTaskId(r['taskId'])) throw invalid('record.taskId must be 22 base64url characters');
  if (taskId !== undefined && r['taskId'] !== taskId) throw invalid('record.taskId must be the task_id of the request');
  const principal = r['principal'];
  if (typeof principal !== 'string') throw invalid('record.principal must be a string (a digest of the end user)');
  if (Buffer.byteLength(principal, 'utf8') > MAX_PRINCIPAL_BYTES) throw invalid(`record.principal is longer than ${MAX_PRINCIPAL_BYTES} bytes`);
  if (!isTaskStatus(r['status'])) throw invalid('record.status must be one of working, input_required, completed, failed, cancelled');
  wholeMs('record.createdAtMs', r['createdAtMs'], 0, Number.MAX_SAFE_INTEGER);
  wholeMs('record.ttlMs', r['ttlMs'], 1, limits.maxTtlMs, ` (this service's --task-ttl)`);
  const params = r['params'];
  if (typeof params !== 'object' || params === null || Array.isArray(params)) throw invalid('record.params must be a JSON object');
  return { ...r, [CALLER_META_KEY]: caller } as unknown as TaskRecord;
}

function wholeMs(name: string, value: unknown, min: number, max: number, why = ''): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be a whole number of ms from ${min} to ${max}${why}, got ${JSON.stringify(value)?.slice(0, 40)}`);
  }
}

/** The task table of the service, opened on first use, and the unary task RPCs over it. */
export class ServiceTasks {
  readonly #log: SessionLog;
  readonly limits: TaskLimits;
  #table: Promise<TaskTable> | undefined;
  #index: Promise<WorkingTaskIndex> | undefined;

  constructor(log: SessionLog, limits: TaskLimits) {
    this.#log = log;
    this.limits = limits;
  }

  /** The table, creating or verifying its stream on first use; a failed open is tried again by the next call. */
  table(): Promise<TaskTable> {
    if (this.#table === undefined) {
      const opening = this.#log.openTasks(this.limits.maxTtlMs);
      this.#table = opening;
      opening.catch(() => {
        if (this.#table === opening) this.#table = undefined;
      });
    }
    return this.#table;
  }

  async open(req: OpenTasksRequest): Promise<OpenTasksResponse> {
    const wanted = req.maxTtlMs ?? 0;
    countOf('max_ttl_ms', wanted, 0, Number.MAX_SAFE_INTEGER);
    if (wanted > this.limits.maxTtlMs) {
      throw invalid(`max_ttl_ms (${wanted} ms) is longer than this service's --task-ttl (${this.limits.maxTtlMs} ms): give the service a --task-ttl at least as long as the gateways'`);
    }
    await this.table();
    return { maxTtlMs: this.limits.maxTtlMs };
  }

  /**
   * The table's create, then one read: its create is deduplicated by task id
   * for two minutes (JetStream's duplicate window), so a second create of an
   * id in that time answers the first one's seq without writing. That is
   * right for a retry of the same record, and wrong for any other: the read
   * tells them apart, and another record is refused like an id that exists.
   */
  async create(caller: string, req: CreateTaskRequest): Promise<CreateTaskResponse> {
    const record = recordOf(req.record, caller, this.limits);
    const table = await this.table();
    const created = await table.create(record);
    const stored = await table.read(record.taskId);
    const mine = stored !== undefined && ownedBy(stored.record, caller) && (stored.seq !== created.seq || JSON.stringify(stored.record) === JSON.stringify(record));
    if (!mine) throw invalid('a task with this id exists');
    return { seq: created.seq };
  }

  /**
   * The caller's working tasks with a runner, from one index of task writes
   * for the whole service (opened on the first call, headers only): a
   * sweeping gateway's list costs no record reads.
   */
  async listWorking(caller: string): Promise<ListWorkingTasksResponse> {
    if (this.#index === undefined) {
      const opening = this.table().then((table) => table.openWorking());
      this.#index = opening;
      opening.catch(() => {
        if (this.#index === opening) this.#index = undefined;
      });
    }
    const index = await this.#index;
    return { tasks: index.list(caller).map((t) => ({ taskId: t.taskId, runner: t.runner })) };
  }

  async get(caller: string, req: GetTaskRequest): Promise<GetTaskResponse> {
    const taskId = taskIdOf('task_id', req.taskId);
    const stored = await (await this.table()).read(taskId);
    if (stored === undefined || !ownedBy(stored.record, caller)) throw taskNotFound();
    return { task: toProtoTask(stored) };
  }

  /**
   * The caller's decision, made on the record it read at `expected_seq`:
   * written only if that is still the stored record (`TaskTable.compareAndSet`,
   * the subject's last sequence expected), else `task_conflict`.
   */
  async compareAndSet(caller: string, req: CompareAndSetTaskRequest): Promise<CompareAndSetTaskResponse> {
    const taskId = taskIdOf('task_id', req.taskId);
    const expectedSeq = countOf('expected_seq', req.expectedSeq, 1, Number.MAX_SAFE_INTEGER);
    const next = recordOf(req.record, caller, this.limits, taskId);
    const table = await this.table();
    const current = await table.read(taskId);
    if (current === undefined || !ownedBy(current.record, caller)) throw taskNotFound();
    if (current.seq !== expectedSeq) throw conflict(taskId, current.seq, expectedSeq);
    const seq = await table.compareAndSet(next, expectedSeq);
    if (seq === undefined) throw conflict(taskId, (await table.read(taskId))?.seq ?? 0, expectedSeq);
    return { seq };
  }
}

function conflict(taskId: string, seq: number, expectedSeq: number): CursorServiceError {
  return new CursorServiceError(TaskErrorCode.taskConflict, `task ${taskTag(taskId)} was written since seq ${expectedSeq} (it is at ${seq} now): read it again`, { seq, expectedSeq });
}

/**
 * WatchTask: the table's change feed for one task, the caller's records only.
 * Subscribed first (and flushed, so the server has the subscription), then
 * the task as it is now, so no change falls between; seqs only grow.
 */
export function watchTaskHandler(deps: StreamDeps, tasks: ServiceTasks) {
  return streaming<WatchTaskRequest, WatchTaskResponse>(deps, 'WatchTask', async (call: ServerWritableStream<WatchTaskRequest, WatchTaskResponse>, caller, signal) => {
    const taskId = taskIdOf('task_id', call.request.taskId);
    const table = await tasks.table();
    const queue: StoredTask[] = [];
    let overflow = false;
    let wake: (() => void) | undefined;
    const push = (stored: StoredTask): void => {
      if (!ownedBy(stored.record, caller)) return;
      if (queue.length >= MAX_WATCH_BACKLOG) overflow = true;
      else queue.push(stored);
      wake?.();
    };
    const stop = table.watch(taskId, push);
    const onAbort = (): void => wake?.();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await deps.log.connection.flush();
      await send(call, { task: undefined }, signal);
      const now = await table.read(taskId);
      if (now !== undefined) push(now);
      let sentSeq = 0;
      while (!signal.aborted) {
        if (overflow) throw new CursorServiceError(ServiceErrorCode.tooManyStreams, 'this watcher reads task records too slowly; watch again');
        const next = queue.shift();
        if (next === undefined) {
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
          continue;
        }
        // A read and the feed may cross, and an older record may arrive late.
        if (next.seq <= sentSeq) continue;
        sentSeq = next.seq;
        await send(call, { task: toProtoTask(next) }, signal);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      stop();
    }
  });
}
