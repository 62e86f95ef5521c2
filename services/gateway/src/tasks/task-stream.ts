import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTerminal } from '@tether/session-log';
import type { TaskEvents } from '@tether/session-log';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { fromLogError } from '../http/reply.js';
import type { JsonRpcMessage } from '../http/request.js';
import type { EdgeTasks } from './edge-tasks.js';
import { replyRpcError } from './rpc-reply.js';
import { declaresTasks, missingTasksCapability, objectAt, RpcCode, taskExpired, taskNotFound } from './wire.js';

export const TASK_STREAM_METHOD = 'tasks/stream';
export const TASK_EVENT_NOTIFICATION = 'notifications/tasks/event';
/** The session era's resume-refused code, for a cursor the store no longer holds. */
export const EVENTS_GONE_CODE = -32010;
/** How long a stream waits for the end marker of a task already settled (it may never come: streams turned on later, or its append failed). */
const SETTLED_GRACE_MS = 1_000;

/**
 * `tasks/stream {taskId, after}` (the draft SEP-2694, behind
 * `--experimental-task-streams`): the task's recorded notifications after
 * position `after`, from any instance, then live, as
 * `notifications/tasks/event {taskId, seq, event}` on an event stream whose
 * SSE ids are the positions; it ends with the request's result once the
 * task has settled. A cursor older than what the store keeps gets -32010
 * with `data.reason: "events_gone"` and `earliestSeq`, never a silent skip.
 */
export async function handleTaskStream(ctx: GatewayContext, tasks: EdgeTasks, events: TaskEvents, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, message: JsonRpcMessage): Promise<void> {
  const params = objectAt(message, 'params');
  if (!declaresTasks(params)) return replyRpcError(res, message.id, missingTasksCapability(TASK_STREAM_METHOD), 400);
  const taskId = params!.taskId;
  const after = params!.after ?? 0;
  if (typeof taskId !== 'string') return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: 'tasks/stream needs params.taskId (a string)' });
  if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) {
    return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: 'tasks/stream params.after must be a non-negative integer (the seq of the last event seen; 0 for the start)' });
  }
  let found;
  try {
    found = await tasks.find(taskId, caller.principal, route.path);
  } catch (err) {
    // The task store cannot answer (or cannot be sure the task is not there): as the task methods answer it, never a 500.
    const reply = fromLogError(err);
    ctx.logger.warn({ err: String(err) }, 'tasks/stream could not read the task store');
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
  }
  if (found.t === 'absent') return replyRpcError(res, message.id, taskNotFound());
  if (found.t === 'expired') return replyRpcError(res, message.id, taskExpired());
  const { first, last } = await events.bounds(taskId);
  if (after > last) return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: `tasks/stream params.after (${after}) is past the task's last event (${last})` });
  if (first > 0 && after + 1 < first) {
    return replyRpcError(res, message.id, { code: EVENTS_GONE_CODE, message: `the task's events after ${after} are gone (the store keeps them from ${first})`, data: { reason: 'events_gone', earliestSeq: first } });
  }

  const abort = new AbortController();
  res.once('close', () => abort.abort());
  let settled = isTerminal(found.stored.record.status);
  let graceTimer: NodeJS.Timeout | undefined;
  const armGrace = (): void => {
    graceTimer ??= setTimeout(() => abort.abort(), SETTLED_GRACE_MS);
    graceTimer.unref();
  };
  const stopWatch = tasks.table.watch(taskId, (stored) => {
    if (isTerminal(stored.record.status)) {
      settled = true;
      armGrace();
    }
  });
  if (settled) armGrace();
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' });
  let lastSeq = after;
  try {
    for await (const event of events.follow(taskId, after, abort.signal)) {
      if (event.end) break;
      lastSeq = event.seq;
      // The upstream's notification as it sent it, inside ours.
      res.write(`id: ${event.seq}\nevent: message\ndata: {"jsonrpc":"2.0","method":"${TASK_EVENT_NOTIFICATION}","params":{"taskId":${JSON.stringify(taskId)},"seq":${event.seq},"event":${Buffer.from(event.data).toString('utf8')}}}\n\n`);
      if (settled) {
        clearTimeout(graceTimer);
        graceTimer = undefined;
        armGrace();
      }
    }
  } catch (err) {
    ctx.logger.warn({ err: String(err) }, 'tasks/stream read failed');
  } finally {
    stopWatch();
    clearTimeout(graceTimer);
  }
  if (res.writableEnded || res.destroyed) return;
  const now = await tasks.table.read(taskId).catch(() => undefined);
  res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { resultType: 'complete', taskId, lastSeq, status: now?.record.status ?? found.stored.record.status } })}\n\n`);
}
