import { randomUUID } from 'node:crypto';
import { createMcpHandler, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
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
  /** `{ name }`: `Hello, <name>!` at once, never a task. */
  Greet: 'greet',
  /** `{ seconds, label? }`: a task (declared) that completes after `seconds`; a plain call sleeps and answers. */
  SlowCompute: 'slow_compute',
  /** `{ filename? }`: a task that asks `confirm` (an elicitation) after 200 ms; `tasks/update` answers it. */
  ConfirmDelete: 'confirm_delete',
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
  /** Wakes a waiting input round with the answers. */
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

function createServer(store: TaskStore, name: string, declared: boolean, advertise: boolean): Server {
  const server = new Server({ name: `tether-test-owned-tasks-${name}`, version: '0.0.0' }, { capabilities: { tools: {}, ...(advertise ? { extensions: { [TASKS_EXTENSION]: {} } } : {}) } });
  server.setRequestHandler('tools/list', () => ({
    tools: [
      { name: OwnedTaskTools.Greet, inputSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] } },
      { name: OwnedTaskTools.SlowCompute, inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } }, required: ['seconds'] } },
      { name: OwnedTaskTools.ConfirmDelete, inputSchema: { type: 'object', properties: { filename: { type: 'string' } } } },
    ],
  }));
  server.setRequestHandler('tools/call', async (request) => {
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    switch (request.params.name) {
      case OwnedTaskTools.Greet:
        return textResult(`Hello, ${String(args.name)}! (served by ${name})`);
      case OwnedTaskTools.SlowCompute: {
        const seconds = Number(args.seconds ?? 0);
        const label = typeof args.label === 'string' ? args.label : '(no label)';
        const done = `slow_compute ${label} done after ${seconds} s (served by ${name})`;
        if (!declared) {
          await new Promise((r) => setTimeout(r, seconds * 1000));
          return textResult(done);
        }
        const task = store.create();
        sleep(seconds * 1000, task.abort.signal).then(
          () => store.change(task, (t) => ((t.status = 'completed'), (t.result = textResult(done)))),
          () => undefined,
        );
        return created(task);
      }
      case OwnedTaskTools.ConfirmDelete: {
        const target = typeof args.filename === 'string' ? args.filename : '(unnamed)';
        if (!declared) throw new ProtocolError(-32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
        const task = store.create();
        void (async () => {
          await sleep(ASK_AFTER_MS, task.abort.signal);
          const answered = new Promise<Record<string, unknown>>((resolve) => (task.answer = resolve));
          store.change(task, (t) => {
            t.status = 'input_required';
            t.inputRequests = { confirm: { method: 'elicitation/create', params: { mode: 'form', message: `Delete ${target}?`, requestedSchema: { type: 'object', properties: { confirm: { type: 'boolean' } }, required: ['confirm'] } } } };
          });
          const responses = await answered;
          const confirm = (responses.confirm as { content?: { confirm?: unknown } } | undefined)?.content?.confirm === true;
          store.change(task, (t) => ((t.status = 'completed'), delete t.inputRequests, (t.result = textResult(confirm ? `deleted ${target}` : `kept ${target}`))));
        })().catch(() => undefined);
        return created(task);
      }
      default:
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Unknown tool: ${request.params.name}`);
    }
  });
  const requireDeclared = (): void => {
    if (!declared) throw new ProtocolError(-32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS_EXTENSION]: {} } } });
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
    const responses = (ctx.mcpReq as { inputResponses?: Record<string, unknown> }).inputResponses;
    if (task.status === 'input_required' && task.answer !== undefined && responses !== undefined) {
      const answer = task.answer;
      store.change(task, (t) => ((t.status = 'working'), delete t.inputRequests, delete t.answer));
      answer(responses);
    }
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
function created(task: HeldTask): never {
  // The SDK's tools/call result type knows no `resultType: "task"`; the wire takes it as is.
  return { resultType: 'task', taskId: task.taskId, status: task.status, createdAt: task.createdAt, lastUpdatedAt: task.lastUpdatedAt, ttlMs: TTL_MS, pollIntervalMs: POLL_MS } as never;
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
