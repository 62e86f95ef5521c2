import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { createMcpHandler, createRequestStateCodec, inputRequired, inputResponse, McpServer, ProtocolError, ProtocolErrorCode, Server } from '@modelcontextprotocol/server';
import type { CallToolResult, InputRequest, InputRequiredResult, InputResponseView, McpRequestContext, RequestStateCodec, ServerContext, ToolExecution } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { listenFetchHandler } from './modern-upstream.js';
import type { ModernUpstream } from './modern-upstream.js';

/** Options of {@link startTaskUpstream}. */
export interface TaskUpstreamOptions {
  /** Default 0 (random). */
  port?: number;
}

/**
 * A plain SDK v2 server (`createMcpHandler`, a fresh server per request) whose
 * tools declare `execution.taskSupport` and know nothing of tasks: what a
 * gateway that runs tasks at the edge sits in front of.
 */
export interface TaskUpstream extends ModernUpstream {
  /** How many calls of `tool` have started (each round of a multi-round-trip tool counts). */
  calls(tool: string): number;
  /** How many calls of `tool` saw their request aborted (the client closed the stream) before they ended. */
  aborts(tool: string): number;
  /** How many calls of `tool` are running now. */
  inFlight(tool: string): number;
  /** Lets every `hold` call with this `key` answer `text`, now and later. */
  release(key: string, text: string): void;
}

/** Names of the tools: the ones the conformance suite's `tasks-*` scenarios call, and two for the gateway's own tests. */
export const TaskTools = {
  /** `{ name }`, no task support: `Hello, <name>!`. */
  Greet: 'greet',
  /** `{ seconds, label? }`, optional: sleeps, then names the label and seconds; stops when aborted. */
  SlowCompute: 'slow_compute',
  /** `{}`, required: after 1.5 s, a tool result with `isError: true`. */
  FailingJob: 'failing_job',
  /** `{}`, optional: after 1.5 s, a JSON-RPC error -32603 (2026-07-28 requests; a 2025-era call gets McpServer's `isError` answer). */
  ProtocolErrorJob: 'protocol_error_job',
  /** `{ path?, filename? }`, optional: after 1.2 s asks to confirm (one elicitation), then says whether it was. */
  ConfirmDelete: 'confirm_delete',
  /** `{}`, optional: after 1.2 s asks two elicitations at once, then names both answers. */
  MultiInput: 'multi_input',
  /** `{}`, required: asks for `user_name` at once, then after 1.5 s greets the name. */
  ToolWithTask: 'test_tool_with_task',
  /** `{ ms }`, optional, `idempotentHint`: sleeps, then `done <n>`, n the calls so far. */
  IdempotentJob: 'idempotent_job',
  /**
   * `{}`, optional: after 1.2 s, an input round that asks nothing and
   * carries only `requestState` (SEP-2322's request-state-only leg), twice;
   * called again with the state each time, it then answers `legs 2`.
   */
  StateLegs: 'state_legs',
  /** `{ key }`, optional: answers the text of {@link TaskUpstream.release} for its key. */
  Hold: 'hold',
} as const;

/**
 * How long the MRTR tools wait before asking, and the jobs before they end:
 * well past any `--task-after` the tests give (250 ms by default, 600 ms in
 * the conformance suite's gateways), so each reaches a task even when a
 * loaded machine fires the gateway's timer late, while the tools that answer
 * at once stay well under it (a clean-clone run at load 9 took over 250 ms
 * to answer `test_tool_with_task`'s first round, which then became a task).
 */
const ASK_AFTER_MS = 1_200;
const JOB_MS = 1_500;

type ToolReturn = CallToolResult | InputRequiredResult;
type Counter = Map<string, number>;
type Answers = Record<string, InputResponseView>;
/** What a round seals into `requestState`: the answers it already has, and (`state_legs`) the legs done. */
type AskedState = { readonly answers: Answers; readonly legs?: number };

const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] });
const bump = (counter: Counter, tool: string, by = 1) => counter.set(tool, (counter.get(tool) ?? 0) + by);

/** The calls, aborts and holds every per-request server of one upstream shares. */
class Ledger {
  readonly started: Counter = new Map();
  readonly aborted: Counter = new Map();
  readonly running: Counter = new Map();
  private readonly released = new Map<string, string>();
  private readonly waiting = new Map<string, Set<(text: string) => void>>();

  /** Counts one call of `tool` around `run`, and its abort if its request's signal fires first. */
  async track(tool: string, signal: AbortSignal, run: () => Promise<ToolReturn>): Promise<ToolReturn> {
    bump(this.started, tool);
    bump(this.running, tool);
    const onAbort = () => bump(this.aborted, tool);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      return await run();
    } finally {
      signal.removeEventListener('abort', onAbort);
      bump(this.running, tool, -1);
    }
  }

  release(key: string, value: string): void {
    this.released.set(key, value);
    for (const wake of this.waiting.get(key) ?? []) wake(value);
    this.waiting.delete(key);
  }

  /** The released text for `key`, once there is one; rejects when `signal` aborts first. */
  hold(key: string, signal: AbortSignal): Promise<string> {
    const ready = this.released.get(key);
    if (ready !== undefined) return Promise.resolve(ready);
    return new Promise((resolve, reject) => {
      const waiters = this.waiting.get(key) ?? new Set();
      this.waiting.set(key, waiters);
      const wake = (value: string) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      };
      const onAbort = () => {
        waiters.delete(wake);
        reject(signal.reason);
      };
      waiters.add(wake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** A form elicitation whose answer has these fields. */
function ask(message: string, properties: Record<string, { type: 'string' } | { type: 'boolean' }>): InputRequest {
  return inputRequired.elicit({ message, requestedSchema: { type: 'object', properties, required: Object.keys(properties) } });
}

/** The accepted form content of an answer, else undefined (declined, cancelled, another kind). */
function accepted(view: InputResponseView | undefined): Record<string, unknown> | undefined {
  return view?.kind === 'elicit' && view.action === 'accept' ? (view.content ?? {}) : undefined;
}

/**
 * One round of a multi-round-trip tool: the answers so far (sealed in
 * `requestState`, plus this round's `inputResponses`), or the questions
 * still open. A client may answer in parts: what is missing is asked again,
 * alone. A retry without the sealed state starts over, so a gateway that
 * drops `requestState` shows.
 */
async function gather(ctx: ServerContext, state: RequestStateCodec<AskedState>, requests: Record<string, InputRequest>): Promise<InputRequiredResult | Answers> {
  const sealed = ctx.mcpReq.requestState<AskedState>();
  const answers: Answers = { ...sealed?.answers };
  if (sealed !== undefined) {
    for (const key of Object.keys(requests)) {
      const view = inputResponse(ctx.mcpReq.inputResponses, key);
      if (view.kind !== 'missing') answers[key] = view;
    }
  }
  const missing = Object.keys(requests).filter((key) => answers[key] === undefined);
  if (missing.length === 0) return answers;
  return inputRequired({ inputRequests: Object.fromEntries(missing.map((key) => [key, requests[key]!])), requestState: await state.mint({ answers }) });
}

const isAsking = (value: InputRequiredResult | Answers): value is InputRequiredResult => (value as { resultType?: unknown }).resultType === 'input_required';

function createTaskServer(ledger: Ledger, state: RequestStateCodec<AskedState>): McpServer {
  const server = new McpServer({ name: 'tether-test-task-upstream', version: '0.0.0' }, { requestState: { verify: state.verify } });
  const tool = <S extends z.ZodObject>(name: string, taskSupport: ToolExecution['taskSupport'], description: string, inputSchema: S, run: (args: z.infer<S>, ctx: ServerContext) => Promise<ToolReturn>, idempotent = false) => {
    const config = { description, inputSchema: inputSchema as z.ZodType, ...(idempotent ? { annotations: { idempotentHint: true } } : {}) };
    const registered = server.registerTool(name, config, (args: unknown, ctx: ServerContext) => ledger.track(name, ctx.mcpReq.signal, () => run(args as z.infer<S>, ctx)));
    // SDK v2 2.4.0's registerTool takes no `execution` (it passes undefined
    // on), yet tools/list emits the registered tool's field (2025-era lists
    // only: the 2026-07-28 codec deletes it).
    if (taskSupport !== undefined) registered.execution = { taskSupport };
  };
  const noArgs = z.object({});

  tool(TaskTools.Greet, undefined, 'Greets by name.', z.object({ name: z.string() }), async ({ name }) => text(`Hello, ${name}!`));
  tool(TaskTools.SlowCompute, 'optional', 'Sleeps `seconds`, then names its label.', z.object({ seconds: z.number().min(0), label: z.string().optional() }), async ({ seconds, label }, ctx) => {
    await sleep(seconds * 1000, undefined, { signal: ctx.mcpReq.signal });
    return text(`slow_compute ${label ?? '(no label)'} done after ${seconds} s`);
  });
  tool(TaskTools.FailingJob, 'required', 'Fails after 1.5 s (a tool error, isError).', noArgs, async (_args, ctx) => {
    await sleep(JOB_MS, undefined, { signal: ctx.mcpReq.signal });
    return { isError: true, content: [{ type: 'text', text: 'failing_job failed, as it always does' }] };
  });
  // Listed here; its 2026-07-28 calls are served by protocolErrorServer (McpServer turns a throw into isError).
  tool(TaskTools.ProtocolErrorJob, 'optional', 'Fails after 1.5 s with a JSON-RPC error (-32603).', noArgs, async (_args, ctx) => failAsProtocolError(ctx));
  // The suite sends `filename`; `path` is the tool's own name for it. Both optional.
  tool(TaskTools.ConfirmDelete, 'optional', 'Asks to confirm a delete after 1.2 s, then says whether it was confirmed.', z.object({ path: z.string().optional(), filename: z.string().optional() }), async ({ path, filename }, ctx) => {
    const target = path ?? filename ?? '(unnamed)';
    if (ctx.mcpReq.inputResponses === undefined) await sleep(ASK_AFTER_MS, undefined, { signal: ctx.mcpReq.signal });
    const got = await gather(ctx, state, { confirm: ask(`Delete ${target}?`, { confirm: { type: 'boolean' } }) });
    if (isAsking(got)) return got;
    return text(accepted(got['confirm'])?.['confirm'] === true ? `deleted ${target}` : `kept ${target}: not confirmed`);
  });
  tool(TaskTools.MultiInput, 'optional', 'Asks two questions at once after 1.2 s, then names both answers.', noArgs, async (_args, ctx) => {
    if (ctx.mcpReq.inputResponses === undefined) await sleep(ASK_AFTER_MS, undefined, { signal: ctx.mcpReq.signal });
    const got = await gather(ctx, state, { first: ask('First name?', { name: { type: 'string' } }), second: ask('Second name?', { name: { type: 'string' } }) });
    if (isAsking(got)) return got;
    const said = (key: string) => String(accepted(got[key])?.['name'] ?? JSON.stringify(got[key]));
    return text(`first: ${said('first')}, second: ${said('second')}`);
  });
  tool(TaskTools.ToolWithTask, 'required', 'Asks for a name at once, then greets it after 1.5 s.', noArgs, async (_args, ctx) => {
    const got = await gather(ctx, state, { user_name: ask('What is your name?', { name: { type: 'string' } }) });
    if (isAsking(got)) return got;
    await sleep(JOB_MS, undefined, { signal: ctx.mcpReq.signal });
    return text(`Hello, ${String(accepted(got['user_name'])?.['name'] ?? 'stranger')}!`);
  });
  tool(TaskTools.IdempotentJob, 'optional', 'Sleeps `ms`, then says how many calls it has had.', z.object({ ms: z.number().min(0) }), async ({ ms }, ctx) => {
    const n = ledger.started.get(TaskTools.IdempotentJob) ?? 0;
    await sleep(ms, undefined, { signal: ctx.mcpReq.signal });
    return text(`done ${n}`);
  }, true);
  tool(TaskTools.StateLegs, 'optional', 'After 1.2 s asks nothing but to be called again with its state, twice, then says so.', noArgs, async (_args, ctx) => {
    const legs = ctx.mcpReq.requestState<AskedState>()?.legs ?? 0;
    if (legs === 0) await sleep(ASK_AFTER_MS, undefined, { signal: ctx.mcpReq.signal });
    if (legs < 2) return inputRequired({ requestState: await state.mint({ answers: {}, legs: legs + 1 }) });
    return text(`legs ${legs}`);
  });
  tool(TaskTools.Hold, 'optional', 'Waits until the test releases its key.', z.object({ key: z.string() }), async ({ key }, ctx) => text(await ledger.hold(key, ctx.mcpReq.signal)));
  return server;
}

async function failAsProtocolError(ctx: ServerContext): Promise<never> {
  await sleep(JOB_MS, undefined, { signal: ctx.mcpReq.signal });
  throw new ProtocolError(ProtocolErrorCode.InternalError, 'protocol_error_job failed: internal error, as it always does');
}

/**
 * McpServer answers whatever a tool handler throws with an `isError` result,
 * so none of its tools can end in a JSON-RPC error; a low-level Server's
 * handler can. The factory serves a 2026-07-28 call of protocol_error_job
 * (`Mcp-Name`, which the SDK has checked against the body before the factory
 * runs) with this one; 2025-era calls name no tool in a header and get
 * McpServer's `isError` answer.
 */
function protocolErrorServer(ledger: Ledger): Server {
  const server = new Server({ name: 'tether-test-task-upstream', version: '0.0.0' }, { capabilities: { tools: {} } });
  server.setRequestHandler('tools/call', (_request, ctx) => ledger.track(TaskTools.ProtocolErrorJob, ctx.mcpReq.signal, () => failAsProtocolError(ctx as ServerContext)));
  return server;
}

/**
 * Starts the SDK v2's `createMcpHandler` on 127.0.0.1 with the
 * {@link TaskTools}: ordinary tools that declare task support, no task code.
 * Unlike {@link startModernUpstream}, it aborts the request (its `signal`)
 * when the client closes the connection before the answer is whole: at
 * 2026-07-28 closing the stream cancels the request, and the tools stop and
 * count it ({@link TaskUpstream.aborts}).
 */
export async function startTaskUpstream(opts: TaskUpstreamOptions = {}): Promise<TaskUpstream> {
  const ledger = new Ledger();
  const state = createRequestStateCodec<AskedState>({ key: randomBytes(32) });
  const factory = (ctx: McpRequestContext) =>
    ctx.era === 'modern' && ctx.requestInfo?.headers.get('mcp-name')?.trim() === TaskTools.ProtocolErrorJob ? protocolErrorServer(ledger) : createTaskServer(ledger, state);
  const base = await listenFetchHandler(createMcpHandler(factory), { ...(opts.port === undefined ? {} : { port: opts.port }), abortOnClientClose: true });
  const count = (counter: Counter) => (tool: string) => counter.get(tool) ?? 0;
  return {
    ...base,
    calls: count(ledger.started),
    aborts: count(ledger.aborted),
    inFlight: count(ledger.running),
    release: (key, value) => ledger.release(key, value),
  };
}
