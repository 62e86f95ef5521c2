/**
 * A 2026-07-28 client of the gateways' durable tasks (the Tasks extension,
 * SEP-2663), on raw fetch through the balancer: it calls a task-supporting
 * tool with the extension declared, then polls `tasks/get` (every 100 ms,
 * through whichever gateway the balancer picks) until the task is terminal
 * or its deadline passed, answering input rounds with `tasks/update` and now
 * and then sending `tasks/cancel`. It records what it saw (`TaskCall`); the
 * task checker judges it.
 */
import { SseParser } from '@tether/protocol';
import type { Expected, TaskCall } from './task-checker.js';
import { lostReason, REPLICA_LOST_REASONS, TERMINAL } from './task-checker.js';
import { sleep } from './util.js';
import type { Rng } from '../shared/random.js';

/** The route the chaos gateways serve the task upstream on. */
export const TASK_ROUTE = '/tasks/mcp';
export const TASKS_PROTOCOL = '2026-07-28';
/** A task still not terminal this long after its tool's own duration is stuck (longer than any takeover). */
export const STUCK_AFTER_MS = 30_000;
/**
 * A task is judged by what the gateways answered, so time its client spent
 * on reads they could not answer (502/503, no connection: a power loss, a
 * leader election) moves its deadline, by this much at most: a task nobody
 * could read is an outage the client saw explicitly, not a stuck task.
 */
export const UNREADABLE_GRACE_MAX_MS = 60_000;
const POLL_MS = 100;
/** Reads after the first terminal answer, each compared with it. */
const TERMINAL_REREADS = 2;
const CALL_TIMEOUT_MS = 20_000;
const METHOD_TIMEOUT_MS = 10_000;

/**
 * The task upstream behind `/tasks/mcp`: `kit`, the test kit's plain task
 * upstream whose tasks the gateways own (and run); `owned`, two replicas of
 * the kit's upstream that runs the Tasks extension itself, whose tasks the
 * gateways only route (`owned-replicas.ts`).
 */
export type TaskUpstreamKind = 'kit' | 'owned';

/** What every task client of a run shares. */
export interface TaskContext {
  /** Which upstream serves the tasks: picks the tools and their expected answers. */
  readonly upstream: TaskUpstreamKind;
  /** The balancer, `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  /** No new call starts after this time (ms since epoch). The run may move it later (`TaskPart.extend`). */
  stopAt: number;
  /** Calls per client at most. */
  readonly maxCalls: number;
  /** Every call of every task client, in the order they started. */
  readonly calls: TaskCall[];
}

/** A JSON-RPC answer to one request, or why there was none. */
export type WireAnswer =
  | { readonly t: 'network'; readonly error: string }
  | { readonly t: 'answer'; readonly status: number; readonly text: string; readonly message: Record<string, unknown> | undefined };

let nextId = 1;

/** One 2026-07-28 request with the routing headers (`Mcp-Method`, `Mcp-Name`) and the per-request `_meta`. */
export async function taskRpc(baseUrl: string, client: string, method: string, name: string, params: Record<string, unknown>, timeoutMs: number): Promise<WireAnswer> {
  const id = nextId++;
  const meta = {
    'io.modelcontextprotocol/protocolVersion': TASKS_PROTOCOL,
    'io.modelcontextprotocol/clientInfo': { name: client, version: '0' },
    // Elicitation too: the upstream asks its input rounds only of clients that declare it.
    'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} }, extensions: { 'io.modelcontextprotocol/tasks': {} } },
  };
  let res: Response;
  let text: string;
  try {
    res = await fetch(`${baseUrl}${TASK_ROUTE}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': TASKS_PROTOCOL,
        'mcp-method': method,
        'mcp-name': name,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await res.text();
  } catch (err) {
    const e = err as { name?: string; message?: string; cause?: { code?: string } };
    return { t: 'network', error: `${e.name ?? 'Error'}${e.cause?.code === undefined ? '' : ` ${e.cause.code}`}` };
  }
  return { t: 'answer', status: res.status, text, message: parseAnswer(text, res.headers.get('content-type') ?? '', id) };
}

/** The JSON-RPC response to `id` in a JSON body or an event stream; undefined when there is none. */
function parseAnswer(text: string, contentType: string, id: number): Record<string, unknown> | undefined {
  const candidates: string[] = [];
  if (contentType.startsWith('text/event-stream')) {
    const parser = new SseParser();
    for (const event of [...parser.push(text), ...parser.push('\n\n')]) if (event.data !== '') candidates.push(event.data);
  } else {
    candidates.push(text);
  }
  for (const data of candidates) {
    try {
      const value = JSON.parse(data) as unknown;
      if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
      const m = value as Record<string, unknown>;
      if (m['jsonrpc'] === '2.0' && m['id'] === id && (isObject(m['result']) || isObject(m['error']))) return m;
    } catch {
      // Not JSON: not the answer.
    }
  }
  return undefined;
}

const escapeRegExp = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A new record of one call. */
export function newCall(client: string, n: number, tool: string, expected: Expected, victim = false): TaskCall {
  return { client, n, tool, expected, victim, startedAt: Date.now(), call: 'pending', statuses: [], laterDiffers: 0, lostAfterTerminal: 0, polls: 0, retries: 0, unreadableMs: 0, rpcErrors: {}, unparseable: 0, cancelSent: false, answered: false, askedAgain: 0, end: 'none' };
}

function unparseable(call: TaskCall, what: string, answer: { status: number; text: string }): void {
  call.unparseable += 1;
  call.unparseableExample ??= `${what}: ${answer.text.slice(0, 200)}`;
}

/** The tools/call: a task (its id), a direct answer, or a call that failed before a task id. */
export async function startCall(baseUrl: string, call: TaskCall, args: Record<string, unknown>, timeoutMs = CALL_TIMEOUT_MS): Promise<void> {
  const answer = await taskRpc(baseUrl, call.client, 'tools/call', call.tool, { name: call.tool, arguments: args }, timeoutMs);
  if (answer.t === 'network') return void Object.assign(call, { call: 'call_failed', callDetail: `network ${answer.error}` });
  const error = answer.message?.['error'] as { code?: unknown } | undefined;
  if (answer.status !== 200) return void Object.assign(call, { call: 'call_failed', callDetail: `http ${answer.status}${error === undefined ? '' : ` ${String(error.code)}`}` });
  if (answer.message === undefined) {
    unparseable(call, 'tools/call', answer);
    return void Object.assign(call, { call: 'call_failed', callDetail: 'unparseable 200' });
  }
  if (error !== undefined) return void Object.assign(call, { call: 'call_failed', callDetail: `rpc error ${String(error.code)}` });
  const result = answer.message['result'] as Record<string, unknown>;
  if (result['resultType'] !== 'task') return void Object.assign(call, { call: 'direct', directResult: result });
  if (typeof result['taskId'] !== 'string' || result['status'] !== 'working') {
    unparseable(call, 'CreateTaskResult without a task id or not working', answer);
    return void Object.assign(call, { call: 'call_failed', callDetail: 'bad CreateTaskResult' });
  }
  call.call = 'task';
  call.taskId = result['taskId'];
  call.statuses.push('working');
}

/** How a client treats a task while it follows it. */
export interface FollowPlan {
  /** When the task should be done by (the tool's duration from creation); stuck 30 s after it. A getter: a victim's moves when its runner is killed. */
  settleBy(): number;
  /** Send tasks/cancel once the task has run this long (ms), or when its input round comes (`'input'`). */
  readonly cancelAfterMs?: number | 'input';
  /** The answer to an input round, per key. */
  readonly inputAnswer?: Record<string, unknown>;
}

type Read = { t: 'retry' } | { t: 'error'; key: string } | { t: 'result'; result: Record<string, unknown>; body: string };

async function taskMethod(baseUrl: string, call: TaskCall, method: 'tasks/get' | 'tasks/update' | 'tasks/cancel', extra: Record<string, unknown> = {}): Promise<Read> {
  const answer = await taskRpc(baseUrl, call.client, method, call.taskId!, { taskId: call.taskId!, ...extra }, METHOD_TIMEOUT_MS);
  // The task lives in NATS: a killed or draining gateway's 502/503 is asked again.
  if (answer.t === 'network' || answer.status >= 500) return { t: 'retry' };
  const error = answer.message?.['error'] as { code?: unknown; message?: unknown } | undefined;
  if (answer.status !== 200) return { t: 'error', key: `http ${answer.status} ${String(error?.code ?? '')} ${String(error?.message ?? answer.text.slice(0, 80))}`.trim() };
  if (answer.message === undefined) {
    unparseable(call, method, answer);
    return { t: 'retry' };
  }
  if (error !== undefined) return { t: 'error', key: `${String(error.code)} ${String(error.message ?? '')}`.slice(0, 120) };
  return { t: 'result', result: answer.message['result'] as Record<string, unknown>, body: JSON.stringify(answer.message['result']) };
}

/** Polls tasks/get until the task is terminal (then reads it twice more) or its deadline passed. */
export async function follow(baseUrl: string, call: TaskCall, plan: FollowPlan): Promise<void> {
  const createdAt = Date.now();
  let rereads = 0;
  for (;;) {
    if (Date.now() > plan.settleBy() + STUCK_AFTER_MS + Math.min(call.unreadableMs, UNREADABLE_GRACE_MAX_MS)) {
      call.end = call.terminal === undefined ? 'deadline' : 'terminal';
      return;
    }
    call.polls += 1;
    const askedAt = Date.now();
    const read = await taskMethod(baseUrl, call, 'tasks/get');
    if (read.t === 'retry') {
      call.retries += 1;
      call.unreadableMs += Date.now() - askedAt + POLL_MS;
    } else if (read.t === 'error') {
      noteError(call, read.key);
    } else {
      const status = String(read.result['status']);
      if (call.statuses.at(-1) !== status) call.statuses.push(status);
      if (call.terminal !== undefined) {
        // The replica holding an upstream-owned task died after it ended: the gateway cannot know the
        // outcome any more and says the task is lost. Explicit; the checker accepts it only for a killed replica's task.
        if (read.body !== call.terminal.body && status === 'failed' && REPLICA_LOST_REASONS.has(lostReason(read.result['error']) ?? '')) {
          call.lostAfterTerminal += 1;
        } else if (read.body !== call.terminal.body) {
          call.laterDiffers += 1;
          call.laterExample ??= read.body.slice(0, 300);
        }
        if (++rereads >= TERMINAL_REREADS) {
          call.end = 'terminal';
          return;
        }
      } else if (TERMINAL.has(status)) {
        call.terminal = { status, body: read.body, result: read.result['result'], error: read.result['error'], updatedAt: Date.parse(String(read.result['lastUpdatedAt'])) };
      } else if (status === 'input_required') {
        if (call.answered) call.askedAgain += 1;
        else if (plan.cancelAfterMs === 'input') await cancel(baseUrl, call);
        else if (plan.inputAnswer !== undefined) await answerInput(baseUrl, call, read.result['inputRequests'], plan.inputAnswer);
      } else if (typeof plan.cancelAfterMs === 'number' && !call.cancelSent && Date.now() - createdAt >= plan.cancelAfterMs) {
        await cancel(baseUrl, call);
      }
    }
    await sleep(POLL_MS);
  }
}

/** -32603 while the store is unavailable is asked again; any other error is recorded for the checker. */
function noteError(call: TaskCall, key: string): void {
  if (!key.startsWith('-32603')) call.rpcErrors[key] = (call.rpcErrors[key] ?? 0) + 1;
}

async function cancel(baseUrl: string, call: TaskCall): Promise<void> {
  // Counted as sent before the answer: a cancel whose answer was lost may still have been applied.
  call.cancelSent = true;
  const read = await taskMethod(baseUrl, call, 'tasks/cancel');
  if (read.t === 'error') noteError(call, read.key);
}

async function answerInput(baseUrl: string, call: TaskCall, requests: unknown, answer: Record<string, unknown>): Promise<void> {
  const keys = isObject(requests) ? Object.keys(requests) : [];
  if (keys.length === 0) return;
  const read = await taskMethod(baseUrl, call, 'tasks/update', { inputResponses: Object.fromEntries(keys.map((k) => [k, answer])) });
  if (read.t === 'error') noteError(call, read.key);
  // Not answered yet on a retry: the next read shows the round again, and it is answered again.
  if (read.t === 'result' && read.result['resultType'] === 'complete') call.answered = true;
}

/**
 * One task client: until the run's stop time (or `maxCalls`), one call at
 * a time: `slow_compute` 0.3-2 s (one in seven of those of a second or
 * more cancelled midway), `idempotent_job` 0.1-1.5 s, `confirm_delete`
 * (its input round answered yes, no or declined through `tasks/update`,
 * or one in ten cancelled instead), and now and then `greet` (no task
 * support: passed through, answered directly). In front of the owned
 * upstream (`upstream: 'owned'`) `idempotent_job`'s share goes to
 * `slow_compute`, whose answer then names the replica that ran it.
 */
export class TaskClient {
  readonly name: string;
  readonly #ctx: TaskContext;
  readonly #rng: Rng;

  constructor(ctx: TaskContext, name: string, rng: Rng) {
    this.#ctx = ctx;
    this.name = name;
    this.#rng = rng;
  }

  async run(): Promise<void> {
    for (let n = 1; n <= this.#ctx.maxCalls && Date.now() < this.#ctx.stopAt; n += 1) {
      await this.#one(n);
      await sleep(this.#rng.int(20, 200));
    }
  }

  async #one(n: number): Promise<void> {
    const rng = this.#rng;
    const draw = rng.next();
    const base = { asks: false, idempotent: false };
    let tool: string;
    let args: Record<string, unknown>;
    let expected: Expected;
    let durationMs: number;
    let plan: Omit<FollowPlan, 'settleBy'> = {};
    const owned = this.#ctx.upstream === 'owned';
    // The owned upstream has no idempotent_job: its share goes to slow_compute (nothing reruns an upstream's own task).
    if (draw < (owned ? 0.7 : 0.45)) {
      const seconds = rng.int(3, 20) / 10;
      const label = `${this.name}.${n}`;
      const done = `slow_compute ${label} done after ${seconds} s`;
      // A replica names itself in the answer: either may hold the task.
      const expectation = owned ? { pattern: new RegExp(`^${escapeRegExp(done)} \\(served by r[12]\\)$`) } : { exact: done };
      [tool, args, expected, durationMs] = ['slow_compute', { seconds, label }, { ...base, ...expectation }, seconds * 1000];
      if (seconds >= 1 && rng.chance(1 / 7)) plan = { cancelAfterMs: rng.int(300, seconds * 1000 - 100) };
    } else if (draw < 0.7) {
      const ms = rng.int(100, 1_500);
      [tool, args, expected, durationMs] = ['idempotent_job', { ms }, { ...base, idempotent: true, pattern: /^done \d+$/ }, ms];
    } else if (draw < 0.93) {
      const path = `/chaos/${this.name}/${n}`;
      const choice = rng.next();
      const confirm = choice < 0.5;
      const answer = choice < 0.8 ? { action: 'accept', content: { confirm } } : { action: 'decline' };
      const kept = owned ? `kept ${path}` : `kept ${path}: not confirmed`;
      // The owned upstream's confirm_delete names its target `filename`.
      [tool, args, expected, durationMs] = ['confirm_delete', owned ? { filename: path } : { path }, { ...base, asks: true, exact: confirm && choice < 0.8 ? `deleted ${path}` : kept }, 1_000];
      plan = rng.chance(0.1) ? { cancelAfterMs: 'input' } : { inputAnswer: answer };
    } else {
      const who = `${this.name}-${n}`;
      [tool, args, expected, durationMs] = ['greet', { name: who }, { ...base, exact: `Hello, ${who}!` }, 0];
    }
    const call = newCall(this.name, n, tool, expected);
    this.#ctx.calls.push(call);
    await startCall(this.#ctx.baseUrl, call, args);
    if (call.call !== 'task') return;
    const settleBy = Date.now() + durationMs;
    await follow(this.#ctx.baseUrl, call, { ...plan, settleBy: () => settleBy });
  }
}
