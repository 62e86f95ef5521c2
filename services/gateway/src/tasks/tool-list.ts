import { HttpHeader, SseParser } from '@tether/protocol';

/**
 * Reading an upstream's tool list for the tool catalog (`tool-catalog.ts`):
 * which tools support tasks, and which are idempotent.
 *
 * The list is read in the 2025 era on purpose: the SDK v2 (2.4.0) server,
 * `createMcpHandler`, strips `execution.taskSupport` from its 2026-07-28
 * `tools/list` answer (its codec deletes the field) and keeps it in the
 * 2025-era answer, and a 2025-only upstream has no other era to ask.
 */

export type TaskSupport = 'forbidden' | 'optional' | 'required';

export interface ToolTaskInfo {
  /**
   * What the 2025-era list says, or undefined when it says nothing (or
   * something this gateway does not know). In 2025-11-25 an absent field
   * meant forbidden; SEP-2663 removed the field and made the server the sole
   * decider, so here only an explicit value is an opinion.
   */
  readonly taskSupport: TaskSupport | undefined;
  /** `annotations.idempotentHint === true`: a retry after a lost answer is safe. */
  readonly idempotent: boolean;
}

/** A paginating upstream that never stops must not hold the catalog forever. */
export const MAX_PAGES = 50;
/** Per answer; a tool list is large at a few hundred KiB. */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;
const LIST_PROTOCOL_VERSION = '2025-11-25';
const CLIENT_INFO = { name: 'tether-gateway-tool-catalog', version: '0.1.0' } as const;
const ACCEPT = 'application/json, text/event-stream';
const METHOD_NOT_FOUND = -32601;
const TASK_SUPPORT: ReadonlySet<string> = new Set<TaskSupport>(['forbidden', 'optional', 'required']);

/**
 * Caller headers the catalog sets itself: the listing is its own session in
 * its own era, whatever the caller's request carried.
 */
const OWNED_HEADERS: ReadonlySet<string> = new Set([
  'accept', 'content-type', 'content-length', 'host', 'connection', 'transfer-encoding',
  HttpHeader.sessionId, HttpHeader.protocolVersion, 'mcp-method', 'mcp-name', HttpHeader.lastEventId,
]);

/** Why a listing failed; logged as `reason`. Local, never on the wire. */
export const ListFailure = {
  unreachable: 'upstream_unreachable',
  timeout: 'upstream_timeout',
  closed: 'catalog_closed',
  status: 'upstream_status',
  badAnswer: 'upstream_bad_answer',
  rpcError: 'upstream_rpc_error',
} as const;
type ListFailure = (typeof ListFailure)[keyof typeof ListFailure];

export class ToolListError extends Error {
  override readonly name = 'ToolListError';
  constructor(
    readonly code: ListFailure,
    readonly fields: { readonly status?: number; readonly rpcCode?: number; readonly method?: string } = {},
  ) {
    super(code);
  }
}

export interface ListTarget {
  readonly url: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly closing: AbortSignal;
}

/**
 * The 2025-era listing: initialize; with a session, `notifications/initialized`;
 * `tools/list` page by page; DELETE the session. Throws `ToolListError`.
 */
export async function listTools(target: ListTarget): Promise<{ tools: Map<string, ToolTaskInfo>; truncated: boolean }> {
  const init = await rpc(target, 'initialize', { protocolVersion: LIST_PROTOCOL_VERSION, capabilities: {}, clientInfo: CLIENT_INFO }, {});
  const sessionId = init.sessionId;
  // Spec: the client sends the negotiated version on every later request.
  const negotiated = stringField(init.result, 'protocolVersion') ?? LIST_PROTOCOL_VERSION;
  const session: Record<string, string> = { [HttpHeader.protocolVersion]: negotiated };
  if (sessionId !== undefined) session[HttpHeader.sessionId] = sessionId;
  try {
    if (sessionId !== undefined) await notify(target, 'notifications/initialized', session);
    const tools = new Map<string, ToolTaskInfo>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_PAGES; page += 1) {
      const answer = await listPage(target, session, cursor);
      if (answer === 'no_tools') return { tools, truncated: false };
      for (const tool of answer.tools) tools.set(tool.name, tool.info);
      cursor = answer.nextCursor;
      if (cursor === undefined) return { tools, truncated: false };
    }
    return { tools, truncated: true };
  } finally {
    if (sessionId !== undefined) await endSession(target, session);
  }
}

interface ToolPage {
  readonly tools: readonly { readonly name: string; readonly info: ToolTaskInfo }[];
  readonly nextCursor: string | undefined;
}

async function listPage(target: ListTarget, session: Record<string, string>, cursor: string | undefined): Promise<ToolPage | 'no_tools'> {
  let result: unknown;
  try {
    ({ result } = await rpc(target, 'tools/list', cursor === undefined ? {} : { cursor }, session));
  } catch (err) {
    // An upstream without the tools capability has no tools, which is an answer.
    if (err instanceof ToolListError && err.code === ListFailure.rpcError && err.fields.rpcCode === METHOD_NOT_FOUND) return 'no_tools';
    throw err;
  }
  const listed = isObject(result) ? result.tools : undefined;
  if (!Array.isArray(listed)) throw new ToolListError(ListFailure.badAnswer, { method: 'tools/list' });
  const tools: { name: string; info: ToolTaskInfo }[] = [];
  for (const tool of listed) {
    const name = stringField(tool, 'name');
    if (name !== undefined) tools.push({ name, info: taskInfo(tool) });
  }
  const next = stringField(result, 'nextCursor');
  return { tools, nextCursor: next === '' ? undefined : next };
}

function taskInfo(tool: unknown): ToolTaskInfo {
  const execution = isObject(tool) ? tool.execution : undefined;
  const support = isObject(execution) ? execution.taskSupport : undefined;
  const annotations = isObject(tool) ? tool.annotations : undefined;
  return {
    taskSupport: typeof support === 'string' && TASK_SUPPORT.has(support) ? (support as TaskSupport) : undefined,
    idempotent: isObject(annotations) && annotations.idempotentHint === true,
  };
}

let nextRequestId = 1;

/** One JSON-RPC request; its answer may come as JSON or as an SSE stream. */
async function rpc(target: ListTarget, method: string, params: object, extra: Record<string, string>): Promise<{ result: unknown; sessionId: string | undefined }> {
  const id = nextRequestId++;
  const signal = requestSignal(target);
  const res = await send(target, 'POST', { ...extra, 'content-type': 'application/json' }, JSON.stringify({ jsonrpc: '2.0', id, method, params }), signal);
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new ToolListError(ListFailure.status, { status: res.status, method });
  }
  const message = await readAnswer(res, id, method, signal);
  if (isObject(message.error)) {
    const code = message.error.code;
    throw new ToolListError(ListFailure.rpcError, { method, ...(typeof code === 'number' ? { rpcCode: code } : {}) });
  }
  return { result: message.result, sessionId: res.headers.get(HttpHeader.sessionId) ?? undefined };
}

async function notify(target: ListTarget, method: string, extra: Record<string, string>): Promise<void> {
  const res = await send(target, 'POST', { ...extra, 'content-type': 'application/json' }, JSON.stringify({ jsonrpc: '2.0', method }), requestSignal(target));
  await res.body?.cancel().catch(() => {});
  if (!res.ok) throw new ToolListError(ListFailure.status, { status: res.status, method });
}

/** Spec: a client that no longer needs a session SHOULD DELETE it. Its outcome changes nothing here. */
async function endSession(target: ListTarget, session: Record<string, string>): Promise<void> {
  try {
    const res = await send(target, 'DELETE', session, undefined, requestSignal(target));
    await res.body?.cancel();
  } catch {
    // A 405 (the upstream keeps sessions until they expire), a timeout: nothing to do.
  }
}

async function send(target: ListTarget, method: string, headers: Record<string, string>, body: string | undefined, signal: AbortSignal): Promise<Response> {
  try {
    // redirect 'manual': a 3xx is a failed listing, and the caller's
    // credentials never follow a redirect to another origin.
    return await fetch(target.url, { method, headers: { ...target.headers, accept: ACCEPT, ...headers }, ...(body === undefined ? {} : { body }), signal, redirect: 'manual' });
  } catch {
    throw abortFailure(signal) ?? new ToolListError(ListFailure.unreachable, { method });
  }
}

function requestSignal(target: ListTarget): AbortSignal {
  // AbortSignal.timeout's timer does not keep the process alive.
  return AbortSignal.any([target.closing, AbortSignal.timeout(target.timeoutMs)]);
}

/** Why `signal` ended a request (close or timeout), or `undefined` if it did not. */
function abortFailure(signal: AbortSignal): ToolListError | undefined {
  if (!signal.aborted) return undefined;
  const reason: unknown = signal.reason;
  return new ToolListError(reason instanceof Error && reason.name === 'TimeoutError' ? ListFailure.timeout : ListFailure.closed);
}

interface RpcAnswer {
  readonly result?: unknown;
  readonly error?: unknown;
}

/** The JSON-RPC response with `id`, from a JSON body or from the SSE event that carries it. */
async function readAnswer(res: Response, id: number, method: string, signal: AbortSignal): Promise<RpcAnswer> {
  const type = (res.headers.get('content-type') ?? '').toLowerCase();
  const sse = type.startsWith('text/event-stream');
  if (!sse && !type.startsWith('application/json')) {
    await res.body?.cancel().catch(() => {});
    throw new ToolListError(ListFailure.badAnswer, { status: res.status, method });
  }
  if (res.body === null) throw new ToolListError(ListFailure.badAnswer, { method });
  const parser = new SseParser({ maxBlockBytes: MAX_ANSWER_BYTES });
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    // Leaving the loop early cancels the body: an SSE stream may carry
    // requests and notifications first, and need not end after the answer.
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      bytes += chunk.byteLength;
      if (bytes > MAX_ANSWER_BYTES) throw new ToolListError(ListFailure.badAnswer, { method });
      if (!sse) {
        chunks.push(chunk);
        continue;
      }
      for (const event of parser.push(chunk)) {
        const answer = event.hasData ? responseTo(parseJson(event.data), id) : undefined;
        if (answer !== undefined) return answer;
      }
    }
  } catch (err) {
    if (err instanceof ToolListError) throw err;
    throw abortFailure(signal) ?? new ToolListError(ListFailure.badAnswer, { method });
  }
  const answer = sse ? undefined : responseTo(parseJson(Buffer.concat(chunks).toString('utf8')), id);
  if (answer === undefined) throw new ToolListError(ListFailure.badAnswer, { method });
  return answer;
}

/** The response to `id` in a message or a batch of them; requests and notifications are skipped. */
function responseTo(message: unknown, id: number): RpcAnswer | undefined {
  for (const candidate of Array.isArray(message) ? message : [message]) {
    if (isObject(candidate) && candidate.id === id && ('result' in candidate || 'error' in candidate)) return candidate;
  }
  return undefined;
}

export function callerIdentityHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    const lower = name.toLowerCase();
    if (!OWNED_HEADERS.has(lower)) out[lower] = value;
  }
  return out;
}


function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringField(value: unknown, name: string): string | undefined {
  const field = isObject(value) ? value[name] : undefined;
  return typeof field === 'string' ? field : undefined;
}
