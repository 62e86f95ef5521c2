import type { IncomingMessage, ServerResponse } from 'node:http';
import type { JsonObject } from '@tether/session-log';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { fromLogError } from '../http/reply.js';
import type { JsonRpcMessage } from '../http/request.js';
import type { EdgeTasks } from './edge-tasks.js';
import { replyResult, replyRpcError } from './rpc-reply.js';
import { declaresTasks, EMPTY_ACK, getTaskResult, missingTasksCapability, objectAt, RpcCode, taskExpired, TaskMethod, taskNotFound } from './wire.js';
import type { RpcError } from './wire.js';

/** The largest `inputResponses` a `tasks/update` may carry (serialized): the record must still fit one message. */
export const MAX_INPUT_RESPONSES_BYTES = 256 * 1024;

/**
 * `tasks/get`, `tasks/update` and `tasks/cancel`, answered by whichever
 * instance receives them from the task's record: no sticky routing.
 * `Mcp-Name` was checked by the dispatcher (modern/checks.ts), never needed.
 */
export async function handleTaskMethod(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, message: JsonRpcMessage): Promise<void> {
  const method = message.method as TaskMethod;
  const params = objectAt(message, 'params');
  if (!declaresTasks(params)) return replyRpcError(res, message.id, missingTasksCapability(method), 400);
  const taskId = params!.taskId;
  let inputResponses: JsonObject | undefined;
  if (method === TaskMethod.update) {
    const invalid = checkInputResponses(params!.inputResponses);
    if (invalid !== undefined) return replyRpcError(res, message.id, invalid);
    inputResponses = params!.inputResponses as JsonObject;
  }
  if (typeof taskId !== 'string') return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: `${method} needs params.taskId (a string)` });

  try {
    const found = await tasks.find(taskId, caller.principal, route.path);
    if (found.t === 'absent') return replyRpcError(res, message.id, taskNotFound());
    if (found.t === 'expired') return replyRpcError(res, message.id, taskExpired());
    const upstreamUrl = route.upstreams[0]!;
    // The request's own credentials: it is the caller's newest, and the calls below happen now.
    const asCaller = caller.upstreamHeaders;
    switch (method) {
      case TaskMethod.get: {
        const current = await tasks.checkRunner(found.stored, asCaller, upstreamUrl);
        return replyResult(res, message.id, getTaskResult(current.record));
      }
      case TaskMethod.update:
        await tasks.checkRunner(found.stored, asCaller, upstreamUrl);
        await tasks.answerInput(taskId, inputResponses!, asCaller, upstreamUrl);
        return replyResult(res, message.id, EMPTY_ACK);
      case TaskMethod.cancel:
        await tasks.cancel(taskId);
        return replyResult(res, message.id, EMPTY_ACK);
    }
  } catch (err) {
    const reply = fromLogError(err);
    ctx.logger.warn({ err: String(err), method }, 'task method failed on the task store');
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
  }
}

function checkInputResponses(value: unknown): RpcError | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { code: RpcCode.invalidParams, message: `tasks/update needs params.inputResponses, an object keyed by inputRequests keys (got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value})` };
  }
  const size = Buffer.byteLength(JSON.stringify(value));
  if (size > MAX_INPUT_RESPONSES_BYTES) {
    return { code: RpcCode.invalidParams, message: `tasks/update params.inputResponses is ${size} bytes, more than the ${MAX_INPUT_RESPONSES_BYTES} accepted` };
  }
  return undefined;
}
