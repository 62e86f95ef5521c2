import { isTaskId, isTaskStoreError } from '@tether/sdk';
import type { DurableTasks, PrincipalTasks } from '@tether/sdk';
import { errorText, preview } from './fuzz-kit.js';
import { queuedOf, resultOf, TASK_STATUSES } from './sdk-arbitraries.js';
import type { Caller, TaskOp, TaskProgram, TaskRef, Who } from './sdk-arbitraries.js';
import { LIMITS } from './sdk-stack.js';

/**
 * A plain in-memory model of the durable task store (packages/sdk
 * src/tasks, README "Durable tasks" and the TSDoc of each method), and the
 * runner of one case of the task property. The model follows the SDK's
 * `InMemoryTaskStore` where the store says it does, and the store's own
 * rules where it says it differs:
 *
 * - a task is bound to its principal and to the exact session of its
 *   creation (none is its own binding): anyone else finds nothing, with the
 *   same answer as for an unknown id (null, `task_not_found`);
 * - status starts `working`; completed, failed and cancelled are final; a
 *   final status repeated with no message or the same message is a no-op
 *   (a retried cancel), anything else after it `task_terminal`; a status
 *   message replaces the old one only when given (non-empty);
 * - a result is stored once with its final status; the same result and
 *   status again is a no-op, a different one `result_already_stored`, any
 *   result after a final status without one `task_terminal`;
 * - ttl: none or null gets the cap, more than the cap gets the cap, a
 *   fraction is rounded up; bad ids, TTLs, statuses, results and messages
 *   are refused with the store's code and a message that names them;
 * - lists: the caller's tasks in id (creation) order after the cursor,
 *   pages of `listPageSize`, `nextCursor` only when another one exists;
 * - queues: FIFO per task, `maxSize` is a bound, dequeue takes the oldest,
 *   `dequeueAll` never rejects.
 *
 * A task whose TTL is under UNCERTAIN_TTL_MS may expire during the case:
 * until it is seen gone the model accepts both answers, and once it is
 * seen gone it must stay gone.
 */

const UNCERTAIN_TTL_MS = 30_000;
const DEFAULT_POLL_MS = 1_000;
const CANCEL_MESSAGE = 'Client cancelled task execution.';
const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const QUEUE_TYPES = new Set(['request', 'notification', 'response', 'error']);

interface ModelTask {
  readonly id: string;
  readonly principal: string;
  readonly session: string | undefined;
  status: string;
  statusMessage: string | undefined;
  readonly ttl: number;
  readonly pollInterval: number;
  readonly createdAt: string;
  /** The stored result as JSON text, and `status\0json` to tell a retried store from another. */
  result: string | undefined;
  digest: string | undefined;
  readonly uncertain: boolean;
  expired: boolean;
  readonly queue: string[];
}

type Fail = { readonly code: string; readonly mention?: RegExp; readonly taskId?: string };

export interface TaskCaseOptions {
  readonly tag: string;
  readonly afterBad: () => Promise<void>;
}

export async function runTaskCase(tasks: DurableTasks, program: TaskProgram, options: TaskCaseOptions): Promise<{ problems: string[]; notes: string[] }> {
  const run = new TaskCase(tasks, program, options);
  await run.run();
  return { problems: run.problems, notes: run.notes };
}

class TaskCase {
  readonly problems: string[] = [];
  readonly notes: string[] = [];
  readonly #tasks: DurableTasks;
  readonly #program: TaskProgram;
  readonly #options: TaskCaseOptions;
  /** Principals of the case (tagged, so that lists see only this case's tasks): alice, mallory, '', an arbitrary one. */
  readonly #principals: readonly string[];
  readonly #sessions: readonly (string | undefined)[];
  readonly #model: ModelTask[] = [];
  readonly #trace: string[] = [];
  #lastWrite: { op: TaskOp; id: unknown; who: Who } | undefined;
  /** The model task the previous call named, if any (`same` references it). */
  #same: ModelTask | undefined;

  constructor(tasks: DurableTasks, program: TaskProgram, options: TaskCaseOptions) {
    this.#tasks = tasks;
    this.#program = program;
    this.#options = options;
    this.#principals = ['alice', 'mallory', '', program.principal].map((p) => `${p}\u0000${options.tag}`);
    this.#sessions = ['session-1', 'session-2', undefined, '', program.session];
  }

  async run(): Promise<void> {
    for (const op of this.#program.ops) {
      const again = op.t === 'again' ? this.#lastWrite : undefined;
      const current = again?.op ?? op;
      const id = again !== undefined ? again.id : 'task' in current ? this.#resolve(current.task) : undefined;
      const who = again?.who ?? ('who' in current ? this.#caller(current.who, 'task' in current ? current.task : current.t === 'list' ? current.cursor : undefined) : { principal: 0, session: 0 });
      this.#trace.push(`${preview(current, 300)}${id === undefined ? '' : ` on ${preview(id, 60)}`} as ${who.principal}/${who.session}${again === undefined ? '' : ' (again)'}`);
      if (op.t === 'again' && again === undefined) continue;
      const bad = await this.#op(current, id, who);
      this.#same = this.#model.find((t) => t.id === id) ?? (current.t === 'create' ? this.#model.at(-1) : this.#same);
      if (['create', 'update', 'store-result', 'cancel', 'enqueue'].includes(current.t)) this.#lastWrite = { op: current, id, who };
      if (bad) await this.#options.afterBad();
      if (this.problems.length > 0) break;
    }
    if (this.problems.length === 0) await this.#final();
    if (this.problems.length > 0) this.problems.push(`principals ${preview(this.#principals)}, sessions ${preview(this.#sessions)}`, 'calls:', ...this.#trace.map((t) => `  ${t}`));
  }

  #resolve(ref: TaskRef): unknown {
    const ids = this.#model.map((t) => t.id);
    const pick = (n: number): string => ids[n % Math.max(1, ids.length)] ?? '0'.repeat(32);
    switch (ref.t) {
      case 'same':
        return this.#same?.id ?? pick(ids.length - 1);
      case 'own':
        return pick(ref.pick);
      case 'flip': {
        const id = pick(ref.pick);
        return `${id.slice(0, ref.index)}${ref.char}${id.slice(ref.index + 1)}`;
      }
      case 'upper':
        return pick(ref.pick).toUpperCase();
      case 'cut':
        return pick(ref.pick).slice(0, ref.keep);
      case 'free':
        return ref.value;
    }
  }

  /** `owner`: the principal and session of the task a reference picks (before any mutation of its id). */
  #caller(caller: Caller, ref: TaskRef | undefined): Who {
    if (caller !== 'owner') return caller;
    const task =
      ref === undefined || ref.t === 'free'
        ? this.#model.find((t) => t.id === ref?.value)
        : ref.t === 'same'
          ? (this.#same ?? this.#model.at(-1))
          : this.#model[ref.pick % Math.max(1, this.#model.length)];
    if (task === undefined) return { principal: 0, session: 0 };
    return { principal: this.#principals.indexOf(task.principal), session: this.#sessions.indexOf(task.session) };
  }

  #store(who: Who): PrincipalTasks {
    return this.#tasks.forPrincipal(this.#principals[who.principal]!);
  }

  /** The model's task of that id that `who` may see (alive as far as the model knows). */
  #visible(who: Who, id: unknown): ModelTask | undefined {
    return this.#model.find((t) => t.id === id && !t.expired && t.principal === this.#principals[who.principal] && t.session === this.#sessions[who.session]);
  }

  /** Runs one call; returns true when it was refused (a good call must then succeed). */
  async #op(op: TaskOp, id: unknown, who: Who): Promise<boolean> {
    if (op.t === 'again') return false;
    if (op.t === 'bad-principal') {
      let threw: unknown;
      try {
        this.#tasks.forPrincipal(op.value as string);
      } catch (err) {
        threw = err;
      }
      this.#expectFail('forPrincipal', threw === undefined ? { ok: true, value: undefined } : { ok: false, err: threw }, { code: 'invalid_argument', mention: /principal must be a string/ });
      return true;
    }
    const session = this.#sessions[who.session];
    const store = this.#store(who);
    const call = async <T>(f: () => Promise<T>): Promise<{ ok: true; value: T } | { ok: false; err: unknown }> => {
      try {
        return { ok: true, value: await f() };
      } catch (err) {
        return { ok: false, err };
      }
    };
    switch (op.t) {
      case 'create': {
        const got = await call(() => store.taskStore.createTask({ ttl: op.ttl as number, pollInterval: op.pollInterval as number }, 1, { method: op.method, params: {} }, session));
        return this.#created(op, who, got);
      }
      case 'get': {
        const got = await call(() => store.taskStore.getTask(id as string, session));
        if (!isTaskId(id)) return this.#expectFail('getTask', got, { code: 'invalid_task_id', mention: /malformed task id/ });
        const t = this.#visible(who, id);
        if (!got.ok) return this.#problem(`getTask: ${errorText(got.err)}, expected ${t === undefined ? 'null' : 'the task'}`);
        if (got.value === null) {
          if (t !== undefined) this.#gone(t, 'getTask answered null');
          this.notes.push('get null');
          return false;
        }
        if (t === undefined) return this.#problem(`getTask answered a task (${preview(got.value)}) that this principal and session may not see, or that does not exist`);
        this.#compare('getTask', t, got.value);
        this.notes.push('get task');
        return false;
      }
      case 'update':
      case 'cancel': {
        const status = op.t === 'cancel' ? 'cancelled' : op.status;
        const message = op.t === 'cancel' ? CANCEL_MESSAGE : op.message;
        const got = await call(() => store.taskStore.updateTaskStatus(id as string, status as 'working', message, session));
        const bad = this.#updated(who, id, status, message, got);
        if (op.t === 'cancel' && got.ok) await this.#dequeue(who, id, true);
        return bad;
      }
      case 'store-result': {
        const result = resultOf(op.result);
        const got = await call(() => store.taskStore.storeTaskResult(id as string, op.status as 'completed', result as never, session));
        return this.#storedResult(who, id, op.status, result, got);
      }
      case 'get-result': {
        const got = await call(() => store.taskStore.getTaskResult(id as string, session));
        if (!isTaskId(id)) return this.#expectFail('getTaskResult', got, { code: 'invalid_task_id', mention: /malformed task id/ });
        const t = this.#visible(who, id);
        if (t === undefined) return this.#expectFail('getTaskResult', got, { code: 'task_not_found', taskId: id });
        if (!got.ok && t.uncertain && isTaskStoreError(got.err, 'task_not_found')) return this.#gone(t, 'getTaskResult: task_not_found');
        if (t.result === undefined) return this.#expectFail('getTaskResult', got, { code: 'result_not_ready', taskId: id });
        if (!got.ok) return this.#problem(`getTaskResult: ${errorText(got.err)}, expected the stored result`);
        if (JSON.stringify(got.value) !== t.result) this.#problem(`getTaskResult: ${preview(got.value)}, the stored result is ${preview(t.result)}`);
        this.notes.push('get-result ok');
        return false;
      }
      case 'list':
        return this.#list(who, op.cursor === undefined ? undefined : this.#resolve(op.cursor), op.walk);
      case 'enqueue': {
        const message = queuedOf(op.message);
        const got = await call(() => store.taskMessageQueue.enqueue(id as string, message as never, session, op.maxSize as number));
        return this.#enqueued(who, id, message, op.maxSize, got);
      }
      case 'dequeue':
        return this.#dequeue(who, id, op.all);
    }
  }

  #created(op: Extract<TaskOp, { t: 'create' }>, who: Who, got: { ok: true; value: Record<string, unknown> } | { ok: false; err: unknown }): boolean {
    const ttl = op.ttl;
    let want: number;
    if (ttl === undefined || ttl === null) want = LIMITS.maxTtlMs;
    else if (typeof ttl !== 'number' || !Number.isFinite(ttl) || ttl <= 0) return this.#expectFail('createTask', got, { code: 'invalid_argument', mention: /ttl/ });
    else want = Math.min(Math.ceil(ttl), LIMITS.maxTtlMs);
    const poll = (op.pollInterval ?? DEFAULT_POLL_MS) as number;
    if (!Number.isFinite(poll) || poll <= 0) return this.#expectFail('createTask', got, { code: 'invalid_argument', mention: /pollInterval/ });
    if (!got.ok) return this.#problem(`createTask: ${errorText(got.err)}, expected a task (ttl ${want}, pollInterval ${poll})`);
    const task = got.value;
    const id = task['taskId'];
    if (!isTaskId(id) || this.#model.some((t) => t.id === id)) return this.#problem(`createTask: task id ${preview(id)} is malformed or was issued before`);
    const createdAt = String(task['createdAt']);
    const fresh: ModelTask = {
      id,
      principal: this.#principals[who.principal]!,
      session: this.#sessions[who.session],
      status: 'working',
      statusMessage: undefined,
      ttl: want,
      pollInterval: poll,
      createdAt,
      result: undefined,
      digest: undefined,
      uncertain: want < UNCERTAIN_TTL_MS,
      expired: false,
      queue: [],
    };
    if (Number.isNaN(Date.parse(createdAt)) || task['lastUpdatedAt'] !== createdAt) this.#problem(`createTask: createdAt ${preview(createdAt)} / lastUpdatedAt ${preview(task['lastUpdatedAt'])}`);
    this.#compare('createTask', fresh, task);
    this.#model.push(fresh);
    this.notes.push(`create ttl ${fresh.uncertain ? 'short' : want === LIMITS.maxTtlMs ? 'cap' : 'long'}`);
    return false;
  }

  #updated(who: Who, id: unknown, status: unknown, message: string | undefined, got: { ok: true } | { ok: false; err: unknown }): boolean {
    if (!isTaskId(id)) return this.#expectFail('updateTaskStatus', got, { code: 'invalid_task_id', mention: /malformed task id/ });
    if (!(TASK_STATUSES as readonly unknown[]).includes(status)) return this.#expectFail('updateTaskStatus', got, { code: 'invalid_argument', mention: /unknown task status/ });
    const t = this.#visible(who, id);
    if (t === undefined) return this.#expectFail('updateTaskStatus', got, { code: 'task_not_found', taskId: id });
    if (!got.ok && t.uncertain && isTaskStoreError(got.err, 'task_not_found')) return this.#gone(t, 'updateTaskStatus: task_not_found');
    if (TERMINAL.has(t.status)) {
      // A retried final status (no message, or the one it has) changes nothing and succeeds.
      if (status === t.status && (!message || message === t.statusMessage)) return this.#expectOk('updateTaskStatus (final status repeated)', got, `update ${String(status)} again`);
      return this.#expectFail('updateTaskStatus', got, { code: 'task_terminal', taskId: id, mention: new RegExp(`is ${t.status}, a final status`) });
    }
    if (!this.#expectOk('updateTaskStatus', got, `update ${String(status)}`)) {
      t.status = status as string;
      if (message) t.statusMessage = message;
    }
    return !got.ok;
  }

  #storedResult(who: Who, id: unknown, status: unknown, result: unknown, got: { ok: true } | { ok: false; err: unknown }): boolean {
    if (!isTaskId(id)) return this.#expectFail('storeTaskResult', got, { code: 'invalid_task_id', mention: /malformed task id/ });
    if (status !== 'completed' && status !== 'failed') return this.#expectFail('storeTaskResult', got, { code: 'invalid_argument', mention: /must be completed or failed/ });
    let json: string | undefined;
    try {
      json = JSON.stringify(result);
    } catch {
      return this.#expectFail('storeTaskResult', got, { code: 'invalid_argument', mention: /not JSON-serializable/ });
    }
    if (json === undefined || typeof result !== 'object' || result === null || Array.isArray(result)) return this.#expectFail('storeTaskResult', got, { code: 'invalid_argument', mention: /must be a JSON object/ });
    if (Buffer.byteLength(json, 'utf8') > LIMITS.maxResultBytes) return this.#expectFail('storeTaskResult', got, { code: 'result_too_large', taskId: id, mention: /bytes as JSON/ });
    const t = this.#visible(who, id);
    if (t === undefined) return this.#expectFail('storeTaskResult', got, { code: 'task_not_found', taskId: id });
    if (!got.ok && t.uncertain && isTaskStoreError(got.err, 'task_not_found')) return this.#gone(t, 'storeTaskResult: task_not_found');
    const digest = `${status}\u0000${json}`;
    if (TERMINAL.has(t.status)) {
      if (t.digest === digest) return this.#expectOk('storeTaskResult (same result again)', got, 'store-result again');
      if (t.digest !== undefined) return this.#expectFail('storeTaskResult', got, { code: 'result_already_stored', taskId: id });
      return this.#expectFail('storeTaskResult', got, { code: 'task_terminal', taskId: id });
    }
    if (!this.#expectOk('storeTaskResult', got, `store-result ${status}`)) {
      t.status = status;
      t.result = json;
      t.digest = digest;
    }
    return !got.ok;
  }

  #enqueued(who: Who, id: unknown, message: unknown, maxSize: unknown, got: { ok: true } | { ok: false; err: unknown }): boolean {
    if (!isTaskId(id)) return this.#expectFail('enqueue', got, { code: 'invalid_task_id', mention: /malformed task id/ });
    if (maxSize !== undefined && (!Number.isInteger(maxSize) || (maxSize as number) < 0)) return this.#expectFail('enqueue', got, { code: 'invalid_argument', mention: /maxSize/ });
    const m = message as { type?: unknown; message?: unknown } | null;
    if (typeof m !== 'object' || m === null || !QUEUE_TYPES.has(m.type as string) || typeof m.message !== 'object' || m.message === null) {
      return this.#expectFail('enqueue', got, { code: 'invalid_argument', mention: /queued message/ });
    }
    let json: string;
    try {
      json = JSON.stringify(message);
    } catch {
      return this.#expectFail('enqueue', got, { code: 'invalid_argument', mention: /not JSON-serializable/ });
    }
    if (Buffer.byteLength(json, 'utf8') > LIMITS.maxQueuedMessageBytes) return this.#expectFail('enqueue', got, { code: 'message_too_large', mention: /bytes as JSON/ });
    const t = this.#visible(who, id);
    if (t === undefined) return this.#expectFail('enqueue', got, { code: 'task_not_found', taskId: id });
    if (!got.ok && t.uncertain && isTaskStoreError(got.err, 'task_not_found')) return this.#gone(t, 'enqueue: task_not_found');
    if (maxSize !== undefined && t.queue.length >= (maxSize as number)) return this.#expectFail('enqueue', got, { code: 'queue_full', taskId: id });
    if (!this.#expectOk('enqueue', got, 'enqueue ok')) t.queue.push(json);
    return !got.ok;
  }

  async #dequeue(who: Who, id: unknown, all: boolean): Promise<boolean> {
    const queue = this.#tasks.forPrincipal(this.#principals[who.principal]!).taskMessageQueue;
    const session = this.#sessions[who.session];
    const t = isTaskId(id) ? this.#visible(who, id) : undefined;
    if (all) {
      let got: unknown[];
      try {
        got = await queue.dequeueAll(id as string, session);
      } catch (err) {
        return this.#problem(`dequeueAll rejected (${errorText(err)}); it must never reject (the SDK calls it without awaiting)`);
      }
      const want = t?.queue ?? [];
      if (t !== undefined && t.uncertain && got.length === 0 && want.length > 0) return this.#gone(t, 'dequeueAll: nothing');
      if (JSON.stringify(got.map((m) => JSON.stringify(m))) !== JSON.stringify(want)) return this.#problem(`dequeueAll: ${preview(got)}, the queue holds ${preview(want)}`);
      if (t !== undefined) t.queue.length = 0;
      this.notes.push(`dequeue-all ${want.length === 0 ? 'empty' : 'some'}`);
      return false;
    }
    let got: { ok: true; value: unknown } | { ok: false; err: unknown };
    try {
      got = { ok: true, value: await queue.dequeue(id as string, session) };
    } catch (err) {
      got = { ok: false, err };
    }
    if (!isTaskId(id)) return this.#expectFail('dequeue', got, { code: 'invalid_task_id', mention: /malformed task id/ });
    if (!got.ok) return this.#problem(`dequeue: ${errorText(got.err)}, expected ${t?.queue[0] ?? 'undefined'}`);
    const want = t?.queue[0];
    if (t !== undefined && t.uncertain && got.value === undefined && want !== undefined) return this.#gone(t, 'dequeue: nothing');
    if ((got.value === undefined ? undefined : JSON.stringify(got.value)) !== want) return this.#problem(`dequeue: ${preview(got.value)}, the queue's oldest is ${preview(want)}`);
    t?.queue.shift();
    this.notes.push(`dequeue ${want === undefined ? 'empty' : 'one'}`);
    return false;
  }

  async #list(who: Who, cursor: unknown, walk: boolean): Promise<boolean> {
    const store = this.#store(who).taskStore;
    const session = this.#sessions[who.session];
    let at = cursor;
    for (let page = 0; page < 50; page += 1) {
      let got: { tasks: Record<string, unknown>[]; nextCursor?: string };
      try {
        got = await store.listTasks(at as string | undefined, session);
      } catch (err) {
        if (at !== undefined && !isTaskId(at)) return this.#expectFail('listTasks', { ok: false, err }, { code: 'invalid_cursor', mention: /malformed cursor/ });
        return this.#problem(`listTasks(${preview(at)}): ${errorText(err)}`);
      }
      if (at !== undefined && !isTaskId(at)) return this.#expectFail('listTasks', { ok: true, value: got }, { code: 'invalid_cursor' });
      this.#checkPage(who, at as string | undefined, got);
      this.notes.push(`list ${got.tasks.length}${got.nextCursor === undefined ? '' : ' +more'}`);
      if (!walk || got.nextCursor === undefined || this.problems.length > 0) return false;
      at = got.nextCursor;
    }
    return this.#problem('listTasks: more than 50 pages');
  }

  #checkPage(who: Who, cursor: string | undefined, got: { tasks: Record<string, unknown>[]; nextCursor?: string }): void {
    const ids = got.tasks.map((t) => t['taskId'] as string);
    const where = `listTasks(${preview(cursor)}) as principal ${who.principal}, session ${who.session}: [${ids.join(', ')}]${got.nextCursor === undefined ? '' : ` next ${got.nextCursor}`}`;
    for (const task of got.tasks) {
      const t = this.#visible(who, task['taskId']);
      if (t === undefined) {
        this.#problem(`${where}: lists ${preview(task)}, which this principal and session may not see (or which is gone)`);
        return;
      }
      this.#compare('listTasks', t, task);
    }
    if (ids.some((id, i) => (cursor !== undefined && id <= cursor) || (i > 0 && id <= ids[i - 1]!))) this.#problem(`${where}: not in id order after the cursor`);
    if (ids.length > LIMITS.listPageSize) this.#problem(`${where}: more than a page (${LIMITS.listPageSize})`);
    const last = ids.at(-1);
    if (got.nextCursor !== undefined && (ids.length !== LIMITS.listPageSize || got.nextCursor !== last)) this.#problem(`${where}: nextCursor is not the last task of a full page`);
    for (const t of this.#model) {
      if (this.#visible(who, t.id) !== t || (cursor !== undefined && t.id <= cursor) || (got.nextCursor !== undefined && last !== undefined && t.id > last)) continue;
      if (ids.includes(t.id)) continue;
      if (t.uncertain) this.#gone(t, 'not listed');
      else this.#problem(`${where}: skips task ${t.id} (${t.status}), which this caller may see`);
    }
    if (got.nextCursor !== undefined && !this.#model.some((t) => this.#visible(who, t.id) === t && t.id > got.nextCursor!)) this.#problem(`${where}: a nextCursor with no task after it`);
  }

  /** Every task the model holds alive, read back by its owner: what the calls left is what the store holds. */
  async #final(): Promise<void> {
    for (const t of this.#model) {
      if (t.expired || t.uncertain) continue;
      const p = this.#principals.indexOf(t.principal);
      const s = this.#sessions.indexOf(t.session);
      const got = await this.#store({ principal: p, session: s }).taskStore.getTask(t.id, t.session).catch((err: unknown) => err);
      if (got === null || got instanceof Error) this.#problem(`at the end, getTask(${t.id}) by its owner: ${got === null ? 'null' : errorText(got)}`);
      else this.#compare('getTask at the end', t, got as Record<string, unknown>);
    }
  }

  #compare(where: string, t: ModelTask, task: Record<string, unknown>): void {
    const want = { taskId: t.id, status: t.status, ttl: t.ttl, pollInterval: t.pollInterval, createdAt: t.createdAt, statusMessage: t.statusMessage };
    const got = { taskId: task['taskId'], status: task['status'], ttl: task['ttl'], pollInterval: task['pollInterval'], createdAt: task['createdAt'], statusMessage: task['statusMessage'] };
    const extra = Object.keys(task).filter((k) => !['taskId', 'status', 'ttl', 'pollInterval', 'createdAt', 'lastUpdatedAt', 'statusMessage'].includes(k));
    if (JSON.stringify(want) !== JSON.stringify(got) || extra.length > 0) this.#problem(`${where}: ${preview(task)}, the model has ${preview(want)}`);
  }

  /** A task the model was unsure of is gone: from now on every call must find it gone. */
  #gone(t: ModelTask, why: string): boolean {
    if (!t.uncertain) return this.#problem(`task ${t.id} (ttl ${t.ttl}) is gone (${why}) long before its TTL`);
    t.expired = true;
    this.notes.push('short task expired');
    return false;
  }

  #expectOk(where: string, got: { ok: boolean; err?: unknown }, note: string): boolean {
    if (got.ok) {
      this.notes.push(note);
      return false;
    }
    return this.#problem(`${where}: ${errorText(got.err)}, expected it to succeed`);
  }

  /** A refusal with `fail.code` whose message names the problem (the task id, when it has one) and no session id or principal. */
  #expectFail(where: string, got: { ok: true; value?: unknown } | { ok: false; err: unknown }, fail: Fail): boolean {
    this.notes.push(`${where.split(' ')[0]} ${fail.code}`);
    if (got.ok) return this.#problem(`${where}: succeeded (${preview(got.value)}), expected ${fail.code}`);
    const err = got.err;
    if (!isTaskStoreError(err) || err.code !== fail.code) return this.#problem(`${where}: ${errorText(err)}, expected ${fail.code}`);
    if (fail.mention !== undefined && !fail.mention.test(err.message)) return this.#problem(`${where}: ${fail.code} says ${JSON.stringify(err.message)}, which does not name the problem (${fail.mention})`);
    if (fail.taskId !== undefined && !err.message.includes(fail.taskId)) return this.#problem(`${where}: ${fail.code} says ${JSON.stringify(err.message)}, without the task id`);
    // Never a raw session id or principal in a message (errors.ts): the fixed ones are checked (an arbitrary string may be any word).
    for (const secret of [this.#sessions[0]!, this.#sessions[1]!, ...this.#principals]) {
      if (err.message.includes(secret)) return this.#problem(`${where}: the message ${JSON.stringify(err.message)} spells a session id or principal`);
    }
    return true;
  }

  #problem(text: string): boolean {
    this.problems.push(text);
    return true;
  }
}
