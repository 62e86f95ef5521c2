import { isDeepStrictEqual } from 'node:util';
import type { WireResponse } from './gateway-stack.js';
import { messagesOf, CAPABILITIES_META, TASKS_EXTENSION, TASKS_VERSION } from './gateway-tasks-stack.js';

/**
 * What the task suite checks: the JSON-RPC shape of every answer, the
 * `Task` shapes of SEP-2663, what the gateway owes a request it answers
 * (a 2026-07-28 server's checks in the SDK's order: the envelope, the
 * revision, the routing headers; then SEP-2663's capability and parameter
 * checks, as the spec words them), and the order of a task's states as any
 * client sees them.
 */

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);
const STATUSES = new Set(['working', 'input_required', 'completed', 'failed', 'cancelled']);
export const TASK_ID = /^[A-Za-z0-9_-]{22}$/;
export const SUBSCRIPTION_ID_META = 'io.modelcontextprotocol/subscriptionId';

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const objectAt = (v: unknown, key: string): Obj | undefined => (isObject(v) && isObject(v[key]) ? v[key] : undefined);

/** SEP-2663: the request's `_meta` capabilities name the Tasks extension with a settings object. */
export function declaresTasks(params: unknown): boolean {
  return objectAt(objectAt(objectAt(objectAt(params, '_meta'), CAPABILITIES_META), 'extensions'), TASKS_EXTENSION) !== undefined;
}

/**
 * A header value as the gateway reads it: `fetch` sends it without leading
 * and trailing HTTP whitespace (CR, LF, HTAB, SP), and the server compares
 * it without the optional whitespace around a field value (SP and HTAB,
 * RFC 9110 section 5.5). Nothing else is trimmed (not U+00A0, not VT).
 */
export function seenHeader(sent: string | undefined): string | undefined {
  return sent?.replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
}

/**
 * SEP-2243's encoded form of a header value, `=?base64?<payload>?=`: the
 * payload must be canonical padded base64 (RFC 4648 section 4: a multiple of
 * four characters of the standard alphabet, `=` only as the last one or
 * two) of UTF-8 (no invalid sequence, no lone surrogate; a BOM is a
 * character like any other). Anything not of that shape is the value as it
 * is. `undefined`: a sentinel whose payload is not valid.
 */
export function decodedHeader(value: string): string | undefined {
  const sentinel = /^=\?base64\?(.*)\?=$/s.exec(value);
  if (sentinel === null) return value;
  const payload = sentinel[1]!;
  if (payload.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(payload)) return undefined;
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(Buffer.from(payload, 'base64'));
  } catch {
    return undefined;
  }
}

/** A JSON-RPC request id JSON-RPC 2.0 allows. */
export const isValidId = (id: unknown): id is string | number => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));

/**
 * JSON-RPC 2.0 response shape: `jsonrpc: "2.0"`, an `id` (the request's
 * when `requestId` is given; null allowed for errors when `nullOnError`),
 * and exactly one of an object `result` or an `error` with an integer
 * `code` and a non-empty `message`.
 */
export function responseProblems(m: unknown, requestId: unknown, nullOnError: boolean): string[] {
  if (!isObject(m)) return [`a message that is not an object: ${JSON.stringify(m)?.slice(0, 200)}`];
  const problems: string[] = [];
  if (m.jsonrpc !== '2.0') problems.push(`jsonrpc is ${JSON.stringify(m.jsonrpc)}`);
  const hasResult = 'result' in m;
  const hasError = 'error' in m;
  if (hasResult === hasError) problems.push(hasResult ? 'both a result and an error' : 'neither a result nor an error');
  if (hasResult && !isObject(m.result)) problems.push('a result that is not an object');
  if (hasError) {
    const e = m.error;
    if (!isObject(e) || !Number.isInteger(e.code) || typeof e.message !== 'string' || e.message.trim() === '') problems.push(`a malformed error ${JSON.stringify(e)?.slice(0, 200)}`);
  }
  if (!('id' in m)) problems.push('no id');
  else if (!(m.id === null || isValidId(m.id))) problems.push(`an id that is neither a string, a number nor null: ${JSON.stringify(m.id)}`);
  else if (!isDeepStrictEqual(m.id, requestId) && !(hasError && nullOnError && m.id === null)) problems.push(`id ${JSON.stringify(m.id)} is not the request's ${JSON.stringify(requestId)}`);
  return problems;
}

/** The error of a JSON-RPC response (code and message), else undefined. */
export function errorOf(m: unknown): { code: number; message: string; data?: unknown } | undefined {
  return isObject(m) && isObject(m.error) && typeof m.error.code === 'number' ? (m.error as { code: number; message: string }) : undefined;
}

const TASK_KEYS = new Set(['taskId', 'status', 'statusMessage', 'createdAt', 'lastUpdatedAt', 'ttlMs', 'pollIntervalMs']);
const DETAILED_KEYS = new Set([...TASK_KEYS, 'result', 'error', 'inputRequests']);
const isIso = (v: unknown): boolean => typeof v === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(v) && !Number.isNaN(Date.parse(v));

/**
 * A `DetailedTask` (SEP-2663): the `Task` fields, then `result` only when
 * completed, `error` only when failed, `inputRequests` (non-empty) only when
 * input_required; `resultType: "complete"` around it as `tasks/get`'s
 * result. Nothing of the stored record beyond that (principal, runner,
 * params, headers, requestState, keyMap…).
 */
export function detailedTaskProblems(t: unknown, taskId: string | undefined, as: 'get' | 'notification'): string[] {
  if (!isObject(t)) return ['the task is not an object'];
  const problems: string[] = [];
  const allowed = new Set([...DETAILED_KEYS, ...(as === 'get' ? ['resultType'] : ['_meta'])]);
  const extra = Object.keys(t).filter((k) => !allowed.has(k));
  if (extra.length > 0) problems.push(`fields beyond DetailedTask: ${extra.join(', ')}`);
  if (as === 'get' && t.resultType !== 'complete') problems.push(`resultType ${JSON.stringify(t.resultType)}, not "complete"`);
  if (typeof t.taskId !== 'string' || !TASK_ID.test(t.taskId)) problems.push(`taskId ${JSON.stringify(t.taskId)}`);
  if (taskId !== undefined && t.taskId !== taskId) problems.push(`the task of ${JSON.stringify(t.taskId)}, not of the task asked for`);
  if (typeof t.status !== 'string' || !STATUSES.has(t.status)) problems.push(`status ${JSON.stringify(t.status)}`);
  if (!isIso(t.createdAt) || !isIso(t.lastUpdatedAt)) problems.push(`createdAt/lastUpdatedAt ${JSON.stringify([t.createdAt, t.lastUpdatedAt])} not ISO 8601`);
  else if (Date.parse(t.lastUpdatedAt as string) < Date.parse(t.createdAt as string)) problems.push('lastUpdatedAt before createdAt');
  if (!Number.isSafeInteger(t.ttlMs) || (t.ttlMs as number) <= 0 || !Number.isSafeInteger(t.pollIntervalMs) || (t.pollIntervalMs as number) <= 0) problems.push(`ttlMs/pollIntervalMs ${JSON.stringify([t.ttlMs, t.pollIntervalMs])}`);
  if ('statusMessage' in t && typeof t.statusMessage !== 'string') problems.push('statusMessage is not a string');
  if ('result' in t && (t.status !== 'completed' || !isObject(t.result))) problems.push(`a result on a ${String(t.status)} task`);
  if ('error' in t && (t.status !== 'failed' || !isObject(t.error) || !Number.isInteger(t.error.code) || typeof t.error.message !== 'string')) problems.push(`an error ${JSON.stringify(t.error)?.slice(0, 120)} on a ${String(t.status)} task`);
  if (t.status === 'completed' && !isObject(t.result)) problems.push('completed without a result');
  if (t.status === 'failed' && !isObject(t.error)) problems.push('failed without an error');
  if (t.status === 'input_required' && (!isObject(t.inputRequests) || Object.keys(t.inputRequests).length === 0)) problems.push('input_required without inputRequests');
  if (t.status !== 'input_required' && 'inputRequests' in t) problems.push(`inputRequests on a ${String(t.status)} task`);
  return problems;
}

/** `CreateTaskResult`: flat `Result & Task`, working, a fresh unguessable id; never a result, an error or input requests beside it. */
export function createTaskResultProblems(r: unknown): string[] {
  if (!isObject(r)) return ['the result is not an object'];
  const problems: string[] = [];
  const extra = Object.keys(r).filter((k) => k !== 'resultType' && k !== '_meta' && !TASK_KEYS.has(k));
  if (extra.length > 0) problems.push(`a CreateTaskResult with ${extra.join(', ')} beside the task`);
  if (r.resultType !== 'task') problems.push(`resultType ${JSON.stringify(r.resultType)}`);
  if (typeof r.taskId !== 'string' || !TASK_ID.test(r.taskId)) problems.push(`taskId ${JSON.stringify(r.taskId)} is not 22 base64url characters`);
  if (r.status !== 'working') problems.push(`a new task ${JSON.stringify(r.status)}, not working`);
  if (!isIso(r.createdAt) || r.createdAt !== r.lastUpdatedAt) problems.push('createdAt/lastUpdatedAt');
  return problems;
}

/** The task id of an answer that is one CreateTaskResult, else undefined. */
export function createdTaskId(res: WireResponse): string | undefined {
  const [m, ...rest] = messagesOf(res) ?? [];
  if (rest.length > 0 || !isObject(m) || !isObject(m.result) || m.result.resultType !== 'task') return undefined;
  return typeof m.result.taskId === 'string' ? m.result.taskId : undefined;
}

// ---- what a task-method request is owed -------------------------------------------------

/** Who a request speaks as, and which tasks that principal may see. */
export interface Visibility {
  readonly visible: ReadonlySet<string>;
}

/** What the gateway owes one request (computed from the bytes sent, as the gateway reads them). */
export type Owed =
  /** Not the gateway's to answer: a notification, another revision, a listen with no taskIds. The upstream answers. */
  | { readonly t: 'upstream'; readonly why: string }
  /**
   * A JSON-RPC error from the gateway, at this HTTP status; `rung` names the
   * check. `nullId`: answered with id null (the request's cannot be named);
   * `mentions`: text the message must hold; `refused`: the revision a
   * -32022 refuses, which its `data.supported` must not list (it lists the
   * served ones).
   */
  | {
      readonly t: 'error';
      readonly status: number;
      readonly code: number;
      readonly rung: string;
      readonly why: string;
      readonly nullId?: boolean;
      readonly mentions?: string;
      readonly refused?: string;
    }
  /** Past every check the gateway makes first, answered by a handler this oracle does not model (a declared `tools/call`, `server/discover`), or an undeclared `tools/call` the upstream checks. */
  | { readonly t: 'served'; readonly why: string }
  /** A result: the task (`tasks/get`) or the empty acknowledgement. */
  | { readonly t: 'result'; readonly taskId: string; readonly method: string }
  /** The listen's event stream: the acknowledgment names exactly `accepted`; `upstreamPart` when a part goes to the upstream. */
  | { readonly t: 'listen'; readonly accepted: readonly string[]; readonly upstreamPart: boolean };

export type OwedError = Extract<Owed, { t: 'error' }>;

export const Code = {
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  headerMismatch: -32020,
  missingCapability: -32021,
  unsupportedVersion: -32022,
} as const;
const MAX_LISTEN = 100;
const MAX_INPUT_RESPONSES_BYTES = 256 * 1024;

/** The per-request envelope's protocol version (SEP-2575), which `MCP-Protocol-Version` must repeat. */
export const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion';
/** The revisions the gateway serves itself: a later date is -32022, never served as this one. */
export const SERVED_REVISIONS: readonly string[] = [TASKS_VERSION];
/** The task methods of the 2025-11-25 draft that SEP-2663 removed: the gateway answers them -32601. */
const REMOVED_METHODS = new Set(['tasks/result', 'tasks/list']);
const TASK_METHODS = new Set(['tasks/get', 'tasks/update', 'tasks/cancel']);
/**
 * The body field `Mcp-Name` mirrors (SEP-2243; SEP-2663 "Routing Headers"),
 * for the methods the gateway answers. (`tasks/stream`, the draft SEP-2694,
 * names `taskId` too, but is off in this stack: the upstream's.)
 */
const MCP_NAME_FIELD: Readonly<Record<string, string>> = { 'tools/call': 'name', 'tasks/get': 'taskId', 'tasks/update': 'taskId', 'tasks/cancel': 'taskId' };

const refusal = (status: number, code: number, rung: string, why: string, more: Partial<OwedError> = {}): OwedError => ({ t: 'error', status, code, rung, why, ...more });

/**
 * What the gateway owes a 2026-07-28 request, in the order a 2026-07-28
 * server checks it (the official SDK's inbound ladder), for the requests the
 * gateway answers: `tasks/get|update|cancel`, `tasks/result`, `tasks/list`,
 * a listen naming `notifications.taskIds`, `server/discover` and a
 * `tools/call`. The first check a request fails answers it:
 *
 * 0. A `tools/call` whose client did not declare the Tasks extension is the
 *    upstream's to check (`served`: the gateway only refuses a required tool).
 * 1. A request id JSON-RPC does not allow: -32600, HTTP 400, id null.
 * 2. `params._meta["io.modelcontextprotocol/protocolVersion"]` not a string:
 *    -32602, HTTP 400, the message naming the missing key (`_meta` when
 *    there is no `_meta` object, else the version key).
 * 3. That version not the `MCP-Protocol-Version` header's: -32020, HTTP 400.
 * 4. A revision not served (e.g. 2027-01-01 in both): -32022, HTTP 400,
 *    `data.supported` naming the served ones.
 * 5. `Mcp-Method` absent or not the body's method: -32020, HTTP 400 (a
 *    listen naming only task ids too).
 * 6. `Mcp-Name`, where the method has one (tools/call: `params.name`; the
 *    task methods: `params.taskId`): absent while the body field is a
 *    string, an invalid `=?base64?…?=` sentinel, or its (decoded) value not
 *    the field: -32020, HTTP 400.
 * 7. `tasks/result`, `tasks/list`: -32601 at HTTP 200.
 * 8. Then the handlers (SEP-2663): the extension must be declared (-32021,
 *    HTTP 400); `inputResponses` an object of at most 256 KiB and `taskId` a
 *    string (-32602 at HTTP 200); a listen's `taskIds` an array of at most
 *    100 strings (-32602 at 200); a task the caller may not see is "not
 *    found" (-32602 at 200); a listen acknowledges the caller's own.
 */
export function owedAnswer(body: unknown, headers: Readonly<Record<string, string>>, who: Visibility): Owed {
  const version = seenHeader(headers['mcp-protocol-version']);
  // The tasks era: a revision (a date) from 2026-07-28 on; anything else is the upstream's to refuse.
  if (version === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(version) || version < TASKS_VERSION) return { t: 'upstream', why: `MCP-Protocol-Version ${JSON.stringify(version)}: not the tasks era` };
  if (!isObject(body) || typeof body.method !== 'string' || body.id === undefined || body.id === null) return { t: 'upstream', why: 'a notification' };
  const method = body.method;
  const params = isObject(body.params) ? body.params : undefined;
  const notifications = objectAt(params, 'notifications');
  const listen = method === 'subscriptions/listen' && notifications?.taskIds !== undefined;
  const owned = listen || TASK_METHODS.has(method) || REMOVED_METHODS.has(method) || method === 'tools/call' || method === 'server/discover';
  if (!owned) return { t: 'upstream', why: method === 'subscriptions/listen' ? 'a listen without notifications.taskIds' : `${method}: not the gateway's` };

  if (!isValidId(body.id)) return refusal(400, Code.invalidRequest, 'id', 'a request id JSON-RPC does not allow', { nullId: true });
  if (method === 'tools/call' && !declaresTasks(params)) return { t: 'served', why: 'an undeclared tools/call: the upstream checks it' };
  const edge = edgeRefusal(method, params, headers, version);
  if (edge !== undefined) return edge;
  if (REMOVED_METHODS.has(method)) return refusal(200, Code.methodNotFound, 'removed method', `${method} is not part of the Tasks extension`);
  if (method === 'tools/call' || method === 'server/discover') return { t: 'served', why: `${method} past the edge checks` };

  if (listen) {
    if (!declaresTasks(params)) return refusal(400, Code.missingCapability, 'capability', 'listen for tasks without the extension');
    const ids = notifications!.taskIds;
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string') || ids.length > MAX_LISTEN) return refusal(200, Code.invalidParams, 'params', 'taskIds not an array of at most 100 strings');
    const accepted = [...new Set(ids as string[])].filter((id) => who.visible.has(id));
    return { t: 'listen', accepted, upstreamPart: Object.keys(notifications!).some((k) => k !== 'taskIds') };
  }
  if (!declaresTasks(params)) return refusal(400, Code.missingCapability, 'capability', 'the extension is not declared');
  const taskId = params!.taskId;
  if (method === 'tasks/update') {
    const responses = params!.inputResponses;
    if (!isObject(responses)) return refusal(200, Code.invalidParams, 'params', 'inputResponses is not an object');
    if (Buffer.byteLength(JSON.stringify(responses)) > MAX_INPUT_RESPONSES_BYTES) return refusal(200, Code.invalidParams, 'params', 'inputResponses over 256 KiB');
  }
  if (typeof taskId !== 'string') return refusal(200, Code.invalidParams, 'params', 'taskId is not a string');
  if (!who.visible.has(taskId)) return refusal(200, Code.invalidParams, 'not found', 'not a task this caller may see');
  return { t: 'result', taskId, method };
}

/** Rungs 2 to 6 of `owedAnswer`: the envelope, the revision, `Mcp-Method`, `Mcp-Name`. */
function edgeRefusal(method: string, params: Obj | undefined, headers: Readonly<Record<string, string>>, version: string): OwedError | undefined {
  const meta = objectAt(params, '_meta');
  const claimed = meta?.[PROTOCOL_VERSION_META];
  if (typeof claimed !== 'string') {
    const missing = meta === undefined ? '_meta' : PROTOCOL_VERSION_META;
    return refusal(400, Code.invalidParams, 'envelope', `no string ${PROTOCOL_VERSION_META} in params._meta`, { mentions: missing });
  }
  if (claimed !== version) return refusal(400, Code.headerMismatch, 'version≠header', `_meta names ${JSON.stringify(claimed).slice(0, 40)}, the header ${version}`);
  if (!SERVED_REVISIONS.includes(claimed)) return refusal(400, Code.unsupportedVersion, 'unsupported', `${claimed} is not served`, { refused: claimed });
  const sentMethod = seenHeader(headers['mcp-method']);
  if (sentMethod !== method) return refusal(400, Code.headerMismatch, 'Mcp-Method', `Mcp-Method ${sentMethod === undefined ? 'absent' : 'is not the body\'s method'}`);
  const field = MCP_NAME_FIELD[method];
  if (field === undefined) return undefined;
  const bodyValue = typeof params?.[field] === 'string' ? (params[field] as string) : undefined;
  const sentName = seenHeader(headers['mcp-name']);
  if (sentName === undefined) return bodyValue === undefined ? undefined : refusal(400, Code.headerMismatch, 'Mcp-Name', `Mcp-Name absent, params.${field} a string`);
  const decoded = decodedHeader(sentName);
  if (decoded === undefined) return refusal(400, Code.headerMismatch, 'Mcp-Name sentinel', 'Mcp-Name an invalid =?base64?…?= sentinel');
  if (bodyValue !== undefined && decoded !== bodyValue) return refusal(400, Code.headerMismatch, decoded === sentName ? 'Mcp-Name' : 'Mcp-Name base64≠field', `Mcp-Name${decoded === sentName ? '' : ' (decoded)'} is not params.${field}`);
  return undefined;
}

/** Problems of an answer against what it is owed (`owed.t !== 'upstream'`). */
export function owedProblems(owed: Owed, res: WireResponse, requestId: unknown): string[] {
  const messages = messagesOf(res);
  if (messages === undefined) return [`a body that is neither JSON nor SSE of JSON: ${res.body.slice(0, 200)}`];
  switch (owed.t) {
    case 'upstream':
    case 'served':
      return [];
    case 'error': {
      const [m] = messages;
      const problems = messages.length === 1 ? responseProblems(m, owed.nullId === true ? null : requestId, false) : [`${messages.length} messages, not one error`];
      const error = errorOf(m);
      if (res.status !== owed.status || error?.code !== owed.code) problems.push(`owed ${owed.status} ${owed.code} (${owed.rung}: ${owed.why}), got ${res.status} ${error?.code ?? 'no error'}`);
      else {
        if (owed.mentions !== undefined && !error.message.includes(owed.mentions)) problems.push(`a ${owed.code} whose message does not name ${owed.mentions}: ${JSON.stringify(error.message).slice(0, 200)}`);
        if (owed.refused !== undefined) {
          const supported = isObject(error.data) ? error.data.supported : undefined;
          if (!Array.isArray(supported) || !SERVED_REVISIONS.every((v) => supported.includes(v)) || supported.includes(owed.refused)) problems.push(`a -32022 whose data.supported is ${JSON.stringify(supported)}, not the served revisions (${SERVED_REVISIONS.join(', ')}) without ${owed.refused}`);
        }
      }
      if (!(res.headers['content-type'] ?? '').startsWith('application/json')) problems.push(`content-type ${res.headers['content-type']}`);
      return problems;
    }
    case 'result': {
      const [m] = messages;
      const problems = messages.length === 1 ? responseProblems(m, requestId, false) : [`${messages.length} messages, not one result`];
      if (res.status !== 200 || !isObject(m) || !isObject(m.result)) return [...problems, `owed a result for ${owed.method}, got ${res.status} ${JSON.stringify(errorOf(m) ?? null)}`];
      if (owed.method === 'tasks/get') problems.push(...detailedTaskProblems(m.result, owed.taskId, 'get'));
      else if (!isDeepStrictEqual(m.result, { resultType: 'complete' })) problems.push(`${owed.method} acknowledged with ${JSON.stringify(m.result).slice(0, 200)}, not { resultType: "complete" }`);
      return problems;
    }
    case 'listen':
      return listenProblems(owed, res, messages, requestId);
  }
}

function listenProblems(owed: Extract<Owed, { t: 'listen' }>, res: WireResponse, messages: unknown[], requestId: unknown): string[] {
  if (owed.upstreamPart && !(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
    // The upstream refused its part: its answer comes back as it is (checked as any upstream answer).
    return [];
  }
  if (res.status !== 200 || !(res.headers['content-type'] ?? '').startsWith('text/event-stream')) return [`a listen answered ${res.status} ${res.headers['content-type']}, not an event stream`];
  const problems: string[] = [];
  const [ack, ...rest] = messages;
  const ackIds = isObject(ack) && ack.method === 'notifications/subscriptions/acknowledged' ? objectAt(ack.params, 'notifications')?.taskIds : undefined;
  if (!isDeepStrictEqual(ackIds, owed.accepted)) problems.push(`the acknowledgment names ${JSON.stringify(ackIds)}, owed ${JSON.stringify(owed.accepted)} (the caller's own tasks among those asked for)`);
  let ended = false;
  for (const m of [ack, ...rest]) {
    if (ended) problems.push('a message after the final result');
    if (!isObject(m)) {
      problems.push('a message that is not an object');
      continue;
    }
    if (typeof m.method === 'string') {
      if (m.jsonrpc !== '2.0' || 'id' in m) problems.push(`a malformed notification ${JSON.stringify(m).slice(0, 200)}`);
      const sub = objectAt(m.params, '_meta')?.[SUBSCRIPTION_ID_META];
      if (!isDeepStrictEqual(sub, requestId)) problems.push(`a notification stamped with subscription id ${JSON.stringify(sub)}, not ${JSON.stringify(requestId)}`);
      if (m.method === 'notifications/tasks') {
        const taskId = isObject(m.params) ? m.params.taskId : undefined;
        if (typeof taskId !== 'string' || !owed.accepted.includes(taskId)) problems.push(`notifications/tasks for ${JSON.stringify(taskId)}, not an accepted task`);
        problems.push(...detailedTaskProblems(m.params, undefined, 'notification'));
      }
    } else {
      problems.push(...responseProblems(m, requestId, false));
      ended = true;
    }
  }
  return problems;
}

// ---- leaks ------------------------------------------------------------------------

/** Secrets (tokens, markers) found in `texts`, each named once with where. */
export function leaks(secrets: readonly string[], texts: readonly string[], where: string): string[] {
  const problems: string[] = [];
  for (const secret of secrets) {
    if (secret.length < 8) continue;
    const escaped = JSON.stringify(secret).slice(1, -1);
    const hit = texts.find((t) => t.includes(secret) || t.includes(escaped));
    if (hit !== undefined) problems.push(`${where} holds ${JSON.stringify(secret.slice(0, 40))}: ${hit.slice(0, 300)}`);
  }
  return problems;
}

/** The `TASKMARK…` markers of a text (fuzzed task ids and keys built on one). */
export function markersIn(text: string): string[] {
  return [...new Set(text.match(/TASKMARK[0-9A-F]{12}/g) ?? [])];
}

// ---- the order of a task's states -------------------------------------------------

/** One look at a task: its DetailedTask, and when the request went out and its answer came back. */
export interface Observation {
  readonly task: Obj;
  readonly sentAt: number;
  readonly receivedAt: number;
  readonly via: string;
}

/**
 * For every two looks where the first answer came back before the second
 * request went out: a terminal task never changes (same status, result,
 * error, message, timestamps); `lastUpdatedAt` never goes back; createdAt,
 * ttlMs and pollIntervalMs never change. Looks that overlapped in time may
 * be answered in either order, and are not compared.
 */
export function orderProblems(looks: readonly Observation[]): string[] {
  const problems: string[] = [];
  for (const a of looks) {
    for (const b of looks) {
      if (!(a.receivedAt < b.sentAt)) continue;
      const [ta, tb] = [a.task, b.task];
      const label = `${a.via} (${String(ta.status)} at ${String(ta.lastUpdatedAt)}) then ${b.via} (${String(tb.status)} at ${String(tb.lastUpdatedAt)})`;
      if (TERMINAL.has(ta.status as string) && !isDeepStrictEqual(strip(ta), strip(tb))) problems.push(`a terminal task changed: ${label}: ${JSON.stringify(strip(tb)).slice(0, 300)}`);
      if (Date.parse(tb.lastUpdatedAt as string) < Date.parse(ta.lastUpdatedAt as string)) problems.push(`lastUpdatedAt went back: ${label}`);
      if (ta.createdAt !== tb.createdAt || ta.ttlMs !== tb.ttlMs || ta.pollIntervalMs !== tb.pollIntervalMs) problems.push(`createdAt/ttlMs/pollIntervalMs changed: ${label}`);
    }
  }
  return [...new Set(problems)];
}

/** A DetailedTask without the envelope fields a get (`resultType`) or a notification (`_meta`) adds. */
export function strip(t: Obj): Obj {
  const { resultType: _r, _meta: _m, ...rest } = t;
  return rest;
}

export { isObject };
