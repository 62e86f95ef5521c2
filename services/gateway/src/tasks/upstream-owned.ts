import type { IncomingMessage, ServerResponse } from 'node:http';
import { isSessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { StoredTask, TaskRecord } from '@tether/session-log';
import { SseParser } from '@tether/protocol';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { askUpstream, endToEndHeaders, tokenAuth, upstreamFailure, upstreamRefusedCaller } from '../handlers/pass-through.js';
import { fromLogError, replyError } from '../http/reply.js';
import { header } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import { decodeHeaderValue, fieldValue, PROTOCOL_VERSION_META } from '../modern/checks.js';
import { PASS } from '../modern/served.js';
import type { Served } from '../modern/served.js';
import { callUpstream, forwardHeaders, isEventStream, isIdentity, UpstreamError } from '../upstream.js';
import type { UpstreamAnswer } from '../upstream.js';
import type { EdgeTasks } from './edge-tasks.js';
import { tag } from './edge-tasks.js';
import { findOwned, ownedRecord, replicaUrl, settleLost } from './owned-record.js';
import type { LostReason } from './owned-record.js';
import { replyResult, replyRpcError } from './rpc-reply.js';
import { CLIENT_CAPABILITIES_META, declaresTasks, EMPTY_ACK, getTaskResult, isTaskMethod, objectAt, RpcCode, taskExpired, TaskMethod, taskNotFound, TASKS_EXTENSION, TASKS_PROTOCOL_VERSION } from './wire.js';

/** A request that is not about an upstream-owned task: the gateway's own handlers take it. */
export const NOT_ROUTED = 'not_routed' as const;
export type Routed = Promise<typeof NOT_ROUTED | void>;

/** Methods whose `Mcp-Name` names a tool, prompt or resource (SEP-2243), never a task. */
const NAMES_SOMETHING_ELSE = new Set(['tools/call', 'prompts/get', 'resources/read']);

/**
 * A 2026-07-28 `tools/call` that declared the Tasks extension, on a route
 * whose upstream runs tasks itself: the upstream decides, and its answer
 * goes back untouched. When that answer is a `CreateTaskResult`, the route
 * record (task → route, replica, principal) is stored and acknowledged
 * first, so any instance routes the task's next request, as SEP-2663
 * requires a `tasks/get` right after creation to resolve. A client that
 * declared nothing is the upstream's alone (`PASS`): it gets no task.
 */
export async function forwardOwnedCall(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Served {
  const params = objectAt(message, 'params');
  if (!declaresTasks(params)) return PASS;
  const url = ctx.pickers.get(route.path)!.pick();
  const answer = await askUpstream(ctx, route, res, url, { method: 'POST', headers: forwardHeaders(req, caller, undefined), body });
  if (answer === undefined) return;
  const tool = typeof params?.name === 'string' ? params.name : '';
  // The one message that may be a CreateTaskResult: the answer to this request. It leaves only once its route is stored.
  const onAnswer = async (data: string): Promise<string> => {
    const created = createdTask(data, message.id);
    if (created === undefined) return data;
    const record = ownedRecord({ route, replicaUrl: url, principal: caller.principal, created, maxTtlMs: tasks.config.ttlMs, tool });
    try {
      await tasks.table.create(record);
    } catch (err) {
      // The client must not hold a task id no instance can route: the upstream's task is cancelled, and the call refused.
      void cancelUpstream(url, req, caller, created.taskId as string);
      const exists = isSessionLogError(err, SessionLogErrorCode.invalidArgument);
      ctx.logger.warn({ route: route.path, err: String(err) }, exists ? 'an upstream task id is already routed on this route' : 'task store unavailable: an upstream task could not be routed');
      const error = exists
        ? { code: RpcCode.internal, message: 'the upstream issued a task id that another task on this route already has' }
        : { code: RpcCode.internal, message: 'the task store is unavailable; retry shortly' };
      return JSON.stringify({ jsonrpc: '2.0', id: message.id, error });
    }
    tasks.count('upstream_created');
    ctx.logger.debug({ task: tag(created.taskId as string), route: route.path }, 'upstream task routed');
    return data;
  };
  return relayWithAnswerHook(answer, res, tokenAuth(ctx), message.id, onAnswer);
}

/**
 * `tasks/get|update|cancel`, or any other request whose `Mcp-Name` names a
 * task, on a route whose upstream runs tasks: sent to the replica that
 * created the task, from whichever instance received it. Another
 * principal's task is "not found" here, and the upstream is never asked. A
 * replica that is gone (refuses connections, or left the route), or that
 * no longer knows the task, makes the task `failed` with a named reason,
 * stored so every instance says the same. `NOT_ROUTED`: no such task here
 * (the gateway's own tasks, and its "not found", come next).
 */
export async function routeOwnedRequest(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Routed {
  const method = message.method as string;
  const params = objectAt(message, 'params');
  const taskMethod = isTaskMethod(method);
  const taskId = taskMethod ? params?.taskId : nameOf(req, method);
  if (typeof taskId !== 'string' || (taskMethod && !declaresTasks(params))) return NOT_ROUTED;
  if (!(await tasks.owners.mayOwn(route, caller.upstreamHeaders))) return NOT_ROUTED;
  let found: Awaited<ReturnType<typeof findOwned>>;
  try {
    found = await findOwned(tasks.table, route, taskId, caller.principal);
  } catch (err) {
    return storeFailure(ctx, res, message, err);
  }
  if (found.t === 'absent') {
    // Another principal's: the same "not found" as an unknown id, and the upstream never hears of it.
    return found.foreign ? replyRpcError(res, message.id, taskNotFound()) : NOT_ROUTED;
  }
  if (found.t === 'expired') return replyRpcError(res, message.id, taskExpired());
  const { stored } = found;
  if (stored.record.status === 'failed') return answerLost(res, message, stored.record);
  const url = replicaUrl(route, stored.record.upstream!.replica);
  if (url === undefined) return answerLost(res, message, await lost(ctx, tasks, stored, 'replica_removed'));
  let answer: UpstreamAnswer;
  try {
    answer = await callUpstream(url, { method: 'POST', headers: forwardHeaders(req, caller, undefined), body, errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    if (refusedConnection(err)) return answerLost(res, message, await lost(ctx, tasks, stored, 'replica_gone'));
    return replyError(res, upstreamFailure(err));
  }
  const refused = upstreamRefusedCaller(ctx, route, answer.status);
  if (refused !== undefined) {
    await answer.cancel();
    return replyError(res, refused);
  }
  if (!taskMethod) return relayWithAnswerHook(answer, res, tokenAuth(ctx), message.id, async (data) => data);
  // The replica answers "not found" to tasks/get, tasks/update or tasks/cancel for a task it
  // created: it restarted empty, or dropped it. Never passed on as such, whichever method asked first.
  let forgot = false;
  await relayWithAnswerHook(answer, res, tokenAuth(ctx), message.id, async (data) => {
    if (!isNotFound(data)) return data;
    forgot = true;
    const record = await lost(ctx, tasks, stored, 'replica_forgot');
    return JSON.stringify({ jsonrpc: '2.0', id: message.id, result: lostAnswer(method, record) });
  });
  if (forgot) ctx.logger.info({ task: tag(taskId), route: route.path }, 'an upstream replica no longer knows its task: settled failed');
}

/** The request's `Mcp-Name`, decoded, where it may name a task (not on methods naming a tool, prompt or resource). */
export function nameOf(req: IncomingMessage, method: string): string | undefined {
  if (NAMES_SOMETHING_ELSE.has(method)) return undefined;
  const value = fieldValue(header(req, 'mcp-name'));
  return value === undefined ? undefined : decodeHeaderValue(value);
}

async function lost(ctx: GatewayContext, tasks: EdgeTasks, stored: StoredTask, reason: LostReason): Promise<TaskRecord> {
  const record = await settleLost(tasks.table, stored, reason);
  tasks.count(reason);
  ctx.logger.info({ task: tag(stored.record.upstream!.taskId), route: stored.record.route, reason }, 'upstream task lost with its replica: settled failed');
  return record;
}

/** A lost task as the client's method sees it: `tasks/get` the failed task, `tasks/update` and `tasks/cancel` an acknowledgment. */
function lostAnswer(method: string, record: TaskRecord): unknown {
  return method === TaskMethod.get ? { ...getTaskResult(record), taskId: record.upstream!.taskId } : EMPTY_ACK;
}

function answerLost(res: ServerResponse, message: JsonRpcMessage, record: TaskRecord): void {
  return replyResult(res, message.id, lostAnswer(message.method as string, record));
}

/** The task as a listen sends it (`notifications/tasks`): the upstream's id, never the route key. */
export function lostTask(record: TaskRecord): Record<string, unknown> {
  const task: Record<string, unknown> = { ...getTaskResult(record), taskId: record.upstream!.taskId };
  delete task.resultType;
  return task;
}

function storeFailure(ctx: GatewayContext, res: ServerResponse, message: JsonRpcMessage, err: unknown): void {
  const reply = fromLogError(err);
  ctx.logger.warn({ err: String(err), method: message.method }, 'upstream task route could not be read');
  return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
}

/** A connection the replica's address refused or cannot have: the replica is gone, not slow. */
export function refusedConnection(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as { cause?: unknown }).cause, depth += 1) {
    const code = (e as { code?: unknown }).code;
    if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH' || code === 'EADDRNOTAVAIL') return true;
  }
  return err instanceof UpstreamError && /ECONNREFUSED/.test(err.message);
}

/** The `CreateTaskResult` in this message when it answers request `id`, else undefined. */
function createdTask(data: string, id: unknown): Record<string, unknown> | undefined {
  const message = parse(data);
  const result = objectAt(message, 'result');
  if (message?.id !== id || result?.resultType !== 'task' || typeof result.taskId !== 'string' || result.taskId === '') return undefined;
  return result as Record<string, unknown>;
}

function isNotFound(data: string): boolean {
  return objectAt(parse(data), 'error')?.code === RpcCode.invalidParams;
}

function parse(data: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Best effort: the upstream's task that the gateway could not route is cancelled rather than left running for nobody. */
async function cancelUpstream(url: string, req: IncomingMessage, caller: Caller, taskId: string): Promise<void> {
  const headers = { ...forwardHeaders(req, caller, undefined), 'mcp-method': TaskMethod.cancel, 'mcp-name': taskId };
  const _meta = { [PROTOCOL_VERSION_META]: TASKS_PROTOCOL_VERSION, [CLIENT_CAPABILITIES_META]: { extensions: { [TASKS_EXTENSION]: {} } } };
  const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 'tether-cancel', method: TaskMethod.cancel, params: { taskId, _meta } }));
  await callUpstream(url, { method: 'POST', headers, body }).then((a) => a.cancel(), () => undefined);
}

/**
 * Relays an upstream answer as it comes, except the message that answers
 * request `id`, which `onAnswer` sees (and may replace) before it leaves:
 * a JSON body whole, or that one event of an event stream (the events
 * before it, notifications, go on at once). Anything the gateway cannot
 * read (another status, an encoded body) goes back byte for byte.
 */
async function relayWithAnswerHook(answer: UpstreamAnswer, res: ServerResponse, tokenAuth: boolean, id: unknown, onAnswer: (data: string) => Promise<string>): Promise<void> {
  const headers = endToEndHeaders(answer.headers, tokenAuth);
  if (answer.status !== 200 || !isIdentity(answer)) {
    res.writeHead(answer.status, headers);
    for await (const chunk of answer.body) res.write(chunk);
    return void res.end();
  }
  if (!isEventStream(answer)) {
    const text = (await answer.bytes()).toString('utf8');
    const out = await onAnswer(text);
    headers['content-length'] = String(Buffer.byteLength(out));
    res.writeHead(200, headers);
    return void res.end(out);
  }
  res.writeHead(200, headers);
  const parser = new SseParser();
  try {
    for await (const chunk of answer.body) {
      for (const event of parser.push(chunk)) {
        let data = event.data;
        if (event.hasData && parse(data)?.id === id) data = await onAnswer(data);
        if (res.destroyed) return;
        res.write(serializeEvent(event, data));
      }
    }
    for (const event of parser.end()) res.write(serializeEvent(event, event.data));
  } catch {
    // The upstream's stream broke after the headers went: the client's ends with it, as a pass-through's would.
  }
  res.end();
}

function serializeEvent(event: { id?: string | undefined; event?: string | undefined; retryMs?: number | undefined; hasData: boolean }, data: string): string {
  let out = '';
  if (event.id !== undefined) out += `id: ${event.id}\n`;
  if (event.event !== undefined) out += `event: ${event.event}\n`;
  if (event.retryMs !== undefined) out += `retry: ${event.retryMs}\n`;
  if (event.hasData) for (const line of data.split('\n')) out += `data: ${line}\n`;
  return `${out}\n`;
}
