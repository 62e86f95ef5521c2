import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpHeader } from '@tether/protocol';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { passThrough } from '../handlers/pass-through.js';
import { header } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import type { EdgeTasks } from '../tasks/edge-tasks.js';
import { replyRpcError } from '../tasks/rpc-reply.js';
import { handleTaskMethod } from '../tasks/task-methods.js';
import { handleTaskStream, TASK_STREAM_METHOD } from '../tasks/task-stream.js';
import { handleToolCall } from '../tasks/tool-call.js';
import { routeOwnedListen } from '../tasks/owned-listen.js';
import { nameOf, NOT_ROUTED, routeOwnedRequest } from '../tasks/upstream-owned.js';
import { bodyWithoutTasksDeclaration, declaresTasks, isTaskMethod, objectAt, RpcCode, TASKS_PROTOCOL_VERSION } from '../tasks/wire.js';
import { checkModernRequest } from './checks.js';
import { handleDiscover } from './discover.js';
import { handleListen } from './listen.js';
import { PASS } from './served.js';
import type { Served } from './served.js';

/** A request of the stateless era (2026-07-28 or later), where tasks replace resumable streams. */
export function isModernRequest(req: IncomingMessage): boolean {
  const version = header(req, HttpHeader.protocolVersion);
  // A revision is a date; anything else is the upstream's to refuse (400), not ours to serve.
  return version !== undefined && REVISION.test(version) && version >= TASKS_PROTOCOL_VERSION;
}

const REVISION = /^\d{4}-\d{2}-\d{2}$/;
/** What JSON-RPC 2.0 allows as a request id (null only for errors that cannot name one). */
const validId = (id: unknown): boolean => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
/**
 * Methods of the 2025-11-25 tasks that SEP-2663 removed: a client that sends
 * them to a gateway serving the extension gets -32601 from the gateway,
 * whatever the upstream would have answered.
 */
const REMOVED_TASK_METHODS = new Set(['tasks/result', 'tasks/list']);

/**
 * A 2026-07-28 POST with tasks on: the one place that decides whether the
 * gateway answers a request itself or passes it through untouched.
 *
 * The gateway answers the Tasks extension's methods, `subscriptions/listen`
 * naming task ids, `tasks/stream` (behind its flag), and takes part in
 * `tools/call` (it may make the call a task) and `server/discover` (it adds
 * the extension). Those are first checked as a 2026-07-28 server checks them
 * (`checkModernRequest`). A handler that finds the request is not its own
 * after all (a tool call the gateway will not make a task, a listen without
 * task ids) answers `PASS`, and the request goes through here; nothing else
 * calls `passThrough` for this era.
 */
export async function serveModern(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Promise<void> {
  const served = await serve(ctx, tasks, route, caller, req, res, body, message);
  // A tool call the gateway did not take: when the gateway owns this route's tasks, the upstream must not make one (wire.ts, withoutTasksDeclaration).
  if (served === PASS) return passThrough(ctx, route, caller, req, res, 'POST', message.method === 'tools/call' ? bodyWithoutTasksDeclaration(body) : body);
}

async function serve(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Served {
  const method = message.method;
  const isRequest = typeof method === 'string' && message.id !== undefined && message.id !== null;
  if (!isRequest) return PASS;
  if (!owned(tasks, message)) {
    // Any other request naming an upstream-owned task in Mcp-Name goes to the replica that holds it.
    if (nameOf(req, method) === undefined) return PASS;
    const routed = await routeOwnedRequest(ctx, tasks, route, caller, req, res, body, message);
    return routed === NOT_ROUTED ? PASS : undefined;
  }
  if (!validId(message.id)) return refused(res, null, { code: -32600, message: 'Invalid Request: the id must be a string or a finite number' });
  // A tool call from a client that did not declare the extension is the upstream's to check
  // (the gateway only refuses a required tool to it); everything else the gateway answers is checked here.
  const refusal = method === 'tools/call' && !declaresTasks(objectAt(message, 'params')) ? undefined : checkModernRequest(req, message);
  if (refusal !== undefined) return refused(res, message.id, refusal.error);
  if (REMOVED_TASK_METHODS.has(method)) {
    return refused(res, message.id, { code: RpcCode.methodNotFound, message: `Method not found: ${method} is not part of the Tasks extension (SEP-2663); poll with tasks/get` }, 200);
  }
  if (isTaskMethod(method)) {
    // An upstream-owned task goes to its replica; the gateway's own (and "not found") are answered here.
    if ((await routeOwnedRequest(ctx, tasks, route, caller, req, res, body, message)) !== NOT_ROUTED) return;
    return handleTaskMethod(ctx, tasks, route, caller, req, res, message);
  }
  if (method === TASK_STREAM_METHOD) {
    // An upstream-owned task's events are its replica's to stream (SEP-2694 routes like the other task methods).
    if ((await routeOwnedRequest(ctx, tasks, route, caller, req, res, body, message)) !== NOT_ROUTED) return;
    return handleTaskStream(ctx, tasks, tasks.events!, route, caller, req, res, message);
  }
  if (method === 'tools/call') return handleToolCall(ctx, tasks, route, caller, req, res, body, message);
  if (method === 'server/discover') return handleDiscover(ctx, route, caller, req, res, body, (result) => tasks.owners.learn(route.path, result));
  if ((await routeOwnedListen(ctx, tasks, route, caller, req, res, message)) !== NOT_ROUTED) return;
  return handleListen(ctx, tasks, route, caller, req, res, body, message);
}

/** Whether the gateway answers (or takes part in) this request; everything else is the upstream's alone. */
function owned(tasks: EdgeTasks, message: JsonRpcMessage): boolean {
  const method = message.method as string;
  if (isTaskMethod(method) || REMOVED_TASK_METHODS.has(method) || method === 'tools/call' || method === 'server/discover') return true;
  if (method === TASK_STREAM_METHOD) return tasks.config.streams && tasks.events !== undefined;
  // A listen is the gateway's when it names task ids; the rest of it is the upstream's.
  return method === 'subscriptions/listen' && objectAt(objectAt(message, 'params'), 'notifications')?.taskIds !== undefined;
}

function refused(res: ServerResponse, id: unknown, error: { code: number; message: string; data?: unknown }, status = 400): void {
  replyRpcError(res, id, error, status);
}
