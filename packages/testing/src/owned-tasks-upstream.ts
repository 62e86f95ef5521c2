import { randomUUID } from 'node:crypto';
import { createMcpHandler, inputRequired, inputResponse, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import type { CallToolResult, McpRequestContext } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { listenFetchHandler } from './modern-upstream.js';
import type { ModernUpstream } from './modern-upstream.js';

/** Options of {@link startOwnedTasksUpstream}. */
export interface OwnedTasksUpstreamOptions {
  /** Default 0 (random). */
  port?: number;
  /** Names the replica in its answers (`served by <name>`). Default: its port. */
  name?: string;
  /**
   * Offer the extension in `server/discover` (default true). False: a server
   * that runs tasks for declaring clients without saying so, which a
   * gateway that owns the route's tasks must never let make one.
   */
  advertise?: boolean;
}

/**
 * An upstream that implements the Tasks extension (SEP-2663) itself, in
 * memory, per process, as rmcp and FastMCP (without Redis) do: it offers
 * `io.modelcontextprotocol/tasks` in `server/discover`, answers a declared
 * call of a slow tool with `CreateTaskResult`, and serves `tasks/get`,
 * `tasks/update`, `tasks/cancel` and `subscriptions/listen` naming task ids
 * from its own memory. A second replica knows none of the first one's
 * tasks: the situation SEP-2663 asks balancers to handle by routing
 * `Mcp-Name: <taskId>` to "the instance holding its state".
 */
export interface OwnedTasksUpstream extends ModernUpstream {
  readonly name: string;
  /** Task ids this replica holds. */
  taskIds(): readonly string[];
  /** How many requests of `method` reached this replica (`tools/call`, `tasks/get`, …). */
  received(method: string): number;
}

/** The tools: a task for a declaring client when slow, a plain answer otherwise. */
export const OwnedTaskTools = {
  /** `{ name }`: `Hello, <name>!` at once, never a task (the suite compares the text exactly). */
  Greet: 'greet',
  /** `{ seconds, label? }`: a task (declared) that completes after `seconds`; a plain call sleeps and answers. */
  SlowCompute: 'slow_compute',
  /** `{ filename? }`, required: a task that asks `confirm` (an elicitation) after 200 ms; `tasks/update` answers it. */
  ConfirmDelete: 'confirm_delete',
  /** `{}`, required: a task that asks `first` and `second` at once; answered in parts, it waits for both. */
  MultiInput: 'multi_input',
  /** `{}`, required: a task that completes after 1 s with an `isError` tool result. */
  FailingJob: 'failing_job',
  /** `{}`: a task that fails after 1 s with a JSON-RPC error (-32603). */
  ProtocolErrorJob: 'protocol_error_job',
  /** `{}`, required: asks `user_name` (a multi-round-trip round, before any task), then a task greeting it after 1 s. */
  ToolWithTask: 'test_tool_with_task',
} as const;

const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
const CAPABILITIES_META = 'io.modelcontextprotocol/clientCapabilities';
/** Set by the wrapper for the per-request server: whether the request declared the extension (the SDK strips `_meta` from params). */
const DECLARED_HEADER = 'x-owned-tasks-declared';
const TTL_MS = 60_000;
const POLL_MS = 200;
const ASK_AFTER_MS = 200;


type Status = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

interface HeldTask {
  readonly taskId: string;
  status: Status;
  statusMessage?: string;
  readonly createdAt: string;
  lastUpdatedAt: string;
  result?: CallToolResult;
  error?: Record<string, unknown>;
  inputRequests?: Record<string, unknown>;
  readonly abort: AbortController;
  /** The answers of the open input round so far. */
  answers?: Record<string, unknown>;
  /** Wakes the waiting input round once every request has its answer. */
  answer?: (responses: Record<string, unknown>) => void;
}

const terminal = (status: Status): boolean => status === 'completed' || status === 'failed' || status === 'cancelled';
const textResult = (text: string): CallToolResult => ({ content: [{ type: 'text', text }], isError: false });
const notFound = (): ProtocolError => new ProtocolError(ProtocolErrorCode.InvalidParams, 'Failed to retrieve task: Task not found');

/** One replica's task store, shared by every per-request server of the process, and its listeners. */
class TaskStore {
  readonly tasks = new Map<string, HeldTask>();
  readonly listeners = new Map<string, Set<(task: HeldTask) => void>>();

  create(): HeldTask {
    const now = new Date().toISOString();
    const task: HeldTask = { taskId: randomUUID(), status: 'working', createdAt: now, lastUpdatedAt: now, abort: new AbortController() };
    this.tasks.set(task.taskId, task);
    return task;
  }

  /** Applies a change unless the task is settled, and tells its listeners. */
  change(task: HeldTask, apply: (task: HeldTask) => void): void {
    if (terminal(task.status)) return;
    apply(task);
    task.lastUpdatedAt = new Date().toISOString();
    for (const listener of this.listeners.get(task.taskId) ?? []) listener(task);
  }

  listen(taskId: string, listener: (task: HeldTask) => void): () => void {
    const set = this.listeners.get(taskId) ?? new Set();
    this.listeners.set(taskId, set);
    set.add(listener);
    return () => set.delete(listener);
  }
}

/** The task as `tasks/get` and `notifications/tasks` carry it (`DetailedTask`). */
function detailed(task: HeldTask): Record<string, unknown> {
  return {
    taskId: task.taskId,
    status: task.status,
    ...(task.statusMessage === undefined ? {} : { statusMessage: task.statusMessage }),
    createdAt: task.createdAt,
    lastUpdatedAt: task.lastUpdatedAt,
    ttlMs: TTL_MS,
    pollIntervalMs: POLL_MS,
    ...(task.status === 'completed' ? { result: task.result } : {}),
    ...(task.status === 'failed' ? { error: task.error } : {}),
    ...(task.status === 'input_required' ? { inputRequests: task.inputRequests } : {}),
  };
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });

const JOB_MS = 1_000;
const missingExtension = (): ProtocolError => new ProtocolError(-32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });

/**
 * A task for a declaring client, its work run in the background and its
 * outcome stored when it ends: a result is `completed` (an `isError` one
 * too), a throw is `failed` with the JSON-RPC error. A client that declared
 * nothing gets the work's answer itself, or -32021 for a `required` tool.
 */
async function startTask(store: TaskStore, declared: boolean, required: boolean, work: (task: HeldTask) => Promise<CallToolResult>): Promise<CallToolResult> {
  if (!declared) {
    if (required) throw missingExtension();
    const inline = store.create();
    store.tasks.delete(inline.taskId);
    return work(inline);
  }
  const task = store.create();
  work(task).then(
    (result) => store.change(task, (t) => ((t.status = 'completed'), (t.result = result))),
    (err: unknown) => {
      if (task.abort.signal.aborted) return;
      const code = err instanceof ProtocolError ? err.code : ProtocolErrorCode.InternalError;
      const message = err instanceof Error ? err.message : String(err);
      store.change(task, (t) => ((t.status = 'failed'), (t.statusMessage = message), (t.error = { code, message })));
    },
  );
  return created(task);
}

/** Parks the task `input_required` with these requests until `tasks/update` has answered every one; resolves with the answers. */
function ask(store: TaskStore, task: HeldTask, requests: Record<string, unknown>): Promise<Record<string, unknown>> {
  const answered = new Promise<Record<string, unknown>>((resolve) => (task.answer = resolve));
  store.change(task, (t) => ((t.status = 'input_required'), (t.inputRequests = requests), (t.answers = {})));
  return answered;
}

function elicit(message: string, properties: Record<string, { type: 'string' } | { type: 'boolean' }>): unknown {
  return { method: 'elicitation/create', params: { mode: 'form', message, requestedSchema: { type: 'object', properties, required: Object.keys(properties) } } };
}

/** The accepted form content of an elicitation answer (a raw `inputResponses` entry or the SDK's view), else undefined. */
function accepted(answer: unknown): Record<string, unknown> | undefined {
  const a = answer as { kind?: string; action?: string; content?: Record<string, unknown> } | undefined;
  if (a === undefined || a.action !== 'accept' || (a.kind !== undefined && a.kind !== 'elicit')) return undefined;
  return a.content ?? {};
}

function createServer(store: TaskStore, name: string, declared: boolean, advertise: boolean): Server {
  const server = new Server({ name: `tether-test-owned-tasks-${name}`, version: '0.0.0' }, { capabilities: { tools: {}, ...(advertise ? { extensions: { [TASKS_EXTENSION]: {} } } : {}) } });
  server.setRequestHandler('tools/list', () => ({
    tools: [
      { name: OwnedTaskTools.Greet, inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
      { name: OwnedTaskTools.SlowCompute, inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } }, required: ['seconds'] } },
      { name: OwnedTaskTools.ConfirmDelete, inputSchema: { type: 'object', properties: { filename: { type: 'string' }, path: { type: 'string' } } }, execution: { taskSupport: 'required' } },
      { name: OwnedTaskTools.MultiInput, inputSchema: { type: 'object' }, execution: { taskSupport: 'required' } },
      { name: OwnedTaskTools.FailingJob, inputSchema: { type: 'object' }, execution: { taskSupport: 'required' } },
      { name: OwnedTaskTools.ProtocolErrorJob, inputSchema: { type: 'object' } },
      { name: OwnedTaskTools.ToolWithTask, inputSchema: { type: 'object' }, execution: { taskSupport: 'required' } },
    ],
  }));
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case OwnedTaskTools.Greet:
        return textResult(`Hello, ${String(args.name)}!`);
      case OwnedTaskTools.SlowCompute: {
        const seconds = Number(args.seconds ?? 0);
        const label = typeof args.label === 'string' ? args.label : '(no label)';
        const done = `slow_compute ${label} done after ${seconds} s (served by ${name})`;
        if (!declared) {
          await new Promise((r) => setTimeout(r, seconds * 1000));
          return textResult(done);
        }
        return startTask(store, declared, false, async (task) => {
          await sleep(seconds * 1000, task.abort.signal);
          return textResult(done);
        });
      }
      case OwnedTaskTools.ConfirmDelete: {
        const target = typeof args.filename === 'string' ? args.filename : '(unnamed)';
        // Its question is a task's input round: without the extension it cannot run (required).
        return startTask(store, declared, true, async (task) => {
          await sleep(ASK_AFTER_MS, task.abort.signal);
          const got = await ask(store, task, { confirm: elicit(`Delete ${target}?`, { confirm: { type: 'boolean' } }) });
          return textResult(accepted(got.confirm)?.confirm === true ? `deleted ${target}` : `kept ${target}`);
        });
      }
      case OwnedTaskTools.MultiInput:
        return startTask(store, declared, true, async (task) => {
          await sleep(ASK_AFTER_MS, task.abort.signal);
          const got = await ask(store, task, { first: elicit('First name?', { name: { type: 'string' } }), second: elicit('Second name?', { name: { type: 'string' } }) });
          return textResult(`first: ${String(accepted(got.first)?.name)}, second: ${String(accepted(got.second)?.name)}`);
        });
      case OwnedTaskTools.FailingJob:
        return startTask(store, declared, true, async (task) => {
          await sleep(JOB_MS, task.abort.signal);
          return { content: [{ type: 'text', text: 'failing_job failed, as it always does' }], isError: true };
        });
      case OwnedTaskTools.ProtocolErrorJob:
        return startTask(store, declared, false, async (task) => {
          await sleep(JOB_MS, task.abort.signal);
          throw new ProtocolError(ProtocolErrorCode.InternalError, 'protocol_error_job failed: internal error, as it always does');
        });
      case OwnedTaskTools.ToolWithTask: {
        if (!declared) throw missingExtension();
        // The multi-round-trip round comes before any task (SEP-2663: resolved synchronously); the task starts once it is answered.
        const name = accepted(inputResponse(ctx.mcpReq.inputResponses, 'user_name'))?.name;
        if (name === undefined) return inputRequired({ inputRequests: { user_name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } }) } });
        return startTask(store, declared, true, async (task) => {
          await sleep(JOB_MS, task.abort.signal);
          return textResult(`Hello, ${String(name)}!`);
        });
      }
      default:
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    }
  });
  const requireDeclared = (): void => {
    if (!declared) throw missingExtension();
  };
  const held = (taskId: string): HeldTask => {
    const task = store.tasks.get(taskId);
    if (task === undefined) throw notFound();
    return task;
  };
  server.setRequestHandler('tasks/get', { params: z.object({ taskId: z.string() }).passthrough() }, (params) => {
    requireDeclared();
    return detailed(held(params.taskId));
  });
  // The SDK takes `inputResponses` out of params (its multi-round-trip handling) and hands them over in the context.
  server.setRequestHandler('tasks/update', { params: z.object({ taskId: z.string() }).passthrough() }, (params, ctx) => {
    requireDeclared();
    const task = held(params.taskId);
    const responses = (ctx.mcpReq as { inputResponses?: Record<string, unknown> }).inputResponses ?? {};
    if (task.status !== 'input_required' || task.answer === undefined) return {};
    // Keys not outstanding are ignored (SEP-2663); what is still missing stays asked.
    const answers = { ...task.answers };
    for (const key of Object.keys(task.inputRequests ?? {})) if (Object.hasOwn(responses, key)) answers[key] = responses[key];
    const open = Object.fromEntries(Object.entries(task.inputRequests ?? {}).filter(([key]) => !Object.hasOwn(answers, key)));
    if (Object.keys(open).length > 0) {
      store.change(task, (t) => ((t.answers = answers), (t.inputRequests = open)));
      return {};
    }
    const answer = task.answer;
    store.change(task, (t) => ((t.status = 'working'), delete t.inputRequests, delete t.answer, delete t.answers));
    answer(answers);
    return {};
  });
  server.setRequestHandler('tasks/cancel', { params: z.object({ taskId: z.string() }).passthrough() }, (params) => {
    requireDeclared();
    const task = held(params.taskId);
    store.change(task, (t) => ((t.status = 'cancelled'), (t.statusMessage = 'cancelled by tasks/cancel'), delete t.inputRequests));
    task.abort.abort(new Error('cancelled'));
    return {};
  });
  return server;
}

/** `CreateTaskResult`: flat, `resultType: "task"`; the task exists (in memory) before this leaves. */
function created(task: HeldTask): CallToolResult {
  // The SDK's tools/call result type knows no `resultType: "task"`; the wire takes it as is.
  return { resultType: 'task', taskId: task.taskId, status: task.status, createdAt: task.createdAt, lastUpdatedAt: task.lastUpdatedAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS } as unknown as CallToolResult;
}

/**
 * `subscriptions/listen` naming task ids, answered from this replica's
 * memory (the SDK's listen router knows no task ids): an acknowledgment
 * naming the ids it holds, each task now, every change, and the end when
 * all are settled.
 */
function listenTasks(store: TaskStore, id: unknown, taskIds: readonly string[]): Response {
  const known = taskIds.filter((taskId) => store.tasks.has(taskId));
  const meta = { 'io.modelcontextprotocol/subscriptionId': id };
  const encoder = new TextEncoder();
  const stops: (() => void)[] = [];
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (message: unknown) => controller.enqueue(encoder.encode(`event: message\ndata: ${JSON.stringify(message)}\n\n`));
      const live = new Set(known);
      const end = () => {
        for (const stop of stops) stop();
        send({ jsonrpc: '2.0', id, result: { resultType: 'complete', _meta: meta } });
        controller.close();
      };
      send({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: known }, _meta: meta } });
      const deliver = (task: HeldTask) => {
        if (!live.has(task.taskId)) return;
        send({ jsonrpc: '2.0', method: 'notifications/tasks', params: { ...detailed(task), _meta: meta } });
        if (terminal(task.status)) live.delete(task.taskId);
        if (live.size === 0) end();
      };
      for (const taskId of known) stops.push(store.listen(taskId, deliver));
      for (const taskId of known) deliver(store.tasks.get(taskId)!);
      if (known.length === 0) end();
    },
    cancel() {
      for (const stop of stops) stop();
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' } });
}

function declares(params: unknown): boolean {
  const meta = (params as { _meta?: Record<string, unknown> } | undefined)?._meta;
  const extensions = (meta?.[CAPABILITIES_META] as { extensions?: Record<string, unknown> } | undefined)?.extensions;
  return typeof extensions === 'object' && extensions !== null && TASKS_EXTENSION in extensions;
}

/**
 * Starts one replica on 127.0.0.1: the SDK v2's `createMcpHandler` with a
 * low-level `Server` per request (its tools, `server/discover` with the
 * extension, the task methods as custom request handlers), the task store
 * per process. Start two for two replicas that share nothing.
 */
export async function startOwnedTasksUpstream(opts: OwnedTasksUpstreamOptions = {}): Promise<OwnedTasksUpstream> {
  const store = new TaskStore();
  const counts = new Map<string, number>();
  let name = opts.name ?? '';
  const handler = createMcpHandler((ctx: McpRequestContext) => createServer(store, name, ctx.requestInfo?.headers.get(DECLARED_HEADER) === '1', opts.advertise ?? true));
  const fetch = async (request: Request): Promise<Response> => {
    if (request.method !== 'POST') return handler.fetch(request);
    const text = await request.text();
    let message: { id?: unknown; method?: unknown; params?: { notifications?: { taskIds?: unknown } } } | undefined;
    try {
      message = JSON.parse(text) as typeof message;
    } catch {
      message = undefined;
    }
    const method = typeof message?.method === 'string' ? message.method : '';
    counts.set(method, (counts.get(method) ?? 0) + 1);
    const taskIds = message?.params?.notifications?.taskIds;
    if (method === 'subscriptions/listen' && Array.isArray(taskIds) && declares(message?.params)) return listenTasks(store, message?.id, taskIds.filter((t): t is string => typeof t === 'string'));
    const headers = new Headers(request.headers);
    headers.set(DECLARED_HEADER, declares(message?.params) ? '1' : '0');
    return handler.fetch(new Request(request.url, { method: 'POST', headers, body: text }));
  };
  const base = await listenFetchHandler(
    {
      fetch,
      close: async () => {
        for (const task of store.tasks.values()) task.abort.abort(new Error('the replica stopped'));
        await handler.close();
      },
    },
    { ...(opts.port === undefined ? {} : { port: opts.port }), abortOnClientClose: false },
  );
  if (name === '') name = new URL(base.url).port;
  return {
    ...base,
    name,
    taskIds: () => [...store.tasks.keys()],
    received: (method) => counts.get(method) ?? 0,
  };
}
