import type { IncomingMessage, ServerResponse } from 'node:http';
import { HttpHeader } from '@tether/protocol';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { passThrough } from '../handlers/pass-through.js';
import { header } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import { handleDiscover } from './discover.js';
import { handleListen } from './listen.js';
import type { EdgeTasks } from './edge-tasks.js';
import { handleTaskMethod } from './task-methods.js';
import { handleTaskStream, TASK_STREAM_METHOD } from './task-stream.js';
import { handleToolCall } from './tool-call.js';
import { replyRpcError } from './rpc-reply.js';
import { isTaskMethod, TASKS_PROTOCOL_VERSION } from './wire.js';

/** A request of the stateless era (2026-07-28 or later), where tasks replace resumable streams. */
export function isTaskEra(req: IncomingMessage): boolean {
  const version = header(req, HttpHeader.protocolVersion);
  // A revision is a date; anything else is the upstream's to refuse (400), not ours to serve.
  return version !== undefined && REVISION.test(version) && version >= TASKS_PROTOCOL_VERSION;
}

const REVISION = /^\d{4}-\d{2}-\d{2}$/;
/** What JSON-RPC 2.0 allows as a request id (null only for errors that cannot name one). */
const validId = (id: unknown): boolean => typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id));
const OWNED = new Set(['tools/call', 'server/discover', 'subscriptions/listen', TASK_STREAM_METHOD]);

/**
 * A 2026-07-28 POST with tasks on: the three things the gateway owns (task
 * methods, task-eligible tool calls, the extension in `server/discover`),
 * everything else passed through untouched.
 */
export function serveModern(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Promise<void> {
  const isRequest = typeof message.method === 'string' && message.id !== undefined && message.id !== null;
  if (!isRequest) return passThrough(ctx, route, caller, req, res, 'POST', body);
  if ((isTaskMethod(message.method) || OWNED.has(message.method as string)) && !validId(message.id)) {
    replyRpcError(res, null, { code: -32600, message: 'Invalid Request: the id must be a string or a finite number' }, 400);
    return Promise.resolve();
  }
  if (isTaskMethod(message.method)) return handleTaskMethod(ctx, tasks, route, caller, req, res, message);
  if (message.method === 'tools/call') return handleToolCall(ctx, tasks, route, caller, req, res, body, message);
  if (message.method === 'server/discover') return handleDiscover(ctx, route, caller, req, res, body);
  if (message.method === TASK_STREAM_METHOD && tasks.config.streams && tasks.events !== undefined) return handleTaskStream(ctx, tasks, tasks.events, route, caller, req, res, message);
  if (message.method === 'subscriptions/listen') return handleListen(ctx, tasks, route, caller, req, res, body, message);
  return passThrough(ctx, route, caller, req, res, 'POST', body);
}
