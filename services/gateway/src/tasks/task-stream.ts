import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTerminal } from '@tether/session-log';
import type { TaskEventBounds, TaskEvents } from '@tether/session-log';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { fromLogError } from '../http/reply.js';
import type { JsonRpcMessage } from '../http/request.js';
import type { EdgeTasks } from './edge-tasks.js';
import { replyResult, replyRpcError } from './rpc-reply.js';
import { StreamsPerConnection } from './streams-per-connection.js';
import { declaresTasks, missingTasksCapability, objectAt, RpcCode, taskExpired, taskNotFound } from './wire.js';

export const TASK_STREAM_METHOD = 'tasks/stream';
export const TASK_EVENT_NOTIFICATION = 'notifications/tasks/event';
/** SEP-2694's `events_gone` code (the implementation-defined server range), for a cursor the store no longer holds. */
export const EVENTS_GONE_CODE = -32010;
/**
 * The one event type the gateway emits: an upstream notification (progress,
 * log) recorded while the task's call ran, as the payload. SEP-2694 reserves
 * unprefixed types for MCP, so it carries the implementation's prefix.
 */
export const UPSTREAM_NOTIFICATION_EVENT = 'tether.upstream.notification';
const RELATED_TASK_META = 'io.modelcontextprotocol/related-task';
/** How long a stream waits for the end marker of a task already settled (it may never come: streams turned on later, or its append failed). */
const SETTLED_GRACE_MS = 1_000;
/** Every gateway in this process shares it: it is keyed by socket, and a socket belongs to one server. */
const activeStreams = new StreamsPerConnection();

/**
 * Stored positions count from 1 (`TASK_EVENT_SEQ`); the draft's `seq` from 0.
 * A wire cursor `after` (the last seq seen) is the stored position `after + 1`.
 */
const wireSeq = (position: number): number => position - 1;
const positionOf = (seq: number): number => seq + 1;

/**
 * `tasks/stream {taskId, after?}` (the draft SEP-2694, behind
 * `--experimental-task-streams`): the task's recorded notifications with
 * `seq` after `after` (or from the earliest kept, without it), from any
 * instance, then live, as `notifications/tasks/event {seq, taskId, type,
 * payload, _meta}` with `seq` from 0; it ends with an empty result once the
 * task has settled and its events are out. A cursor older than what the
 * store keeps gets -32010 with `data: {reason: "events_gone", taskId,
 * earliestSeq}`, never a silent skip; a second stream of one task on one
 * connection gets -32602 while the first is open.
 */
export async function handleTaskStream(ctx: GatewayContext, tasks: EdgeTasks, events: TaskEvents, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, message: JsonRpcMessage): Promise<void> {
  const params = objectAt(message, 'params');
  if (!declaresTasks(params)) return replyRpcError(res, message.id, missingTasksCapability(TASK_STREAM_METHOD), 400);
  const taskId = params!.taskId;
  const after = params!.after;
  if (typeof taskId !== 'string') return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: 'tasks/stream needs params.taskId (a string)' });
  if (after !== undefined && (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0)) {
    return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: 'tasks/stream params.after must be a non-negative integer (the seq of the last event processed), or absent for the earliest kept' });
  }
  // Claimed before any await, so two pipelined requests cannot both pass; released when the answer closes, whatever it is.
  const release = activeStreams.claim(req.socket, taskId);
  if (release === undefined) return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: 'a tasks/stream for this task is already active on this connection (cancel it before opening another)' });
  res.once('close', release);
  let found;
  let bounds: TaskEventBounds;
  try {
    found = await tasks.find(taskId, caller.principal, route.path);
    bounds = found.t === 'visible' ? await events.bounds(taskId) : { first: 0, last: 0, ended: false };
  } catch (err) {
    // The task store cannot answer (or cannot be sure the task is not there): as the task methods answer it, never a 500.
    const reply = fromLogError(err);
    ctx.logger.warn({ err: String(err) }, 'tasks/stream could not read the task store');
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
  }
  if (found.t === 'absent') return replyRpcError(res, message.id, taskNotFound());
  if (found.t === 'expired') return replyRpcError(res, message.id, taskExpired());
  const from = after === undefined ? 0 : positionOf(after);
  const refusal = cursorRefusal(taskId, after, from, bounds);
  if (refusal !== undefined) return replyRpcError(res, message.id, refusal);
  let settled = isTerminal(found.stored.record.status);
  // Settled with nothing after the cursor: SEP-2694 answers at once, with no event.
  if (settled && from >= lastEventOf(bounds)) return replyResult(res, message.id, { resultType: 'complete' });

  const abort = new AbortController();
  res.once('close', () => abort.abort());
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
  try {
    for await (const event of events.follow(taskId, from, abort.signal)) {
      if (event.end) break;
      res.write(eventFrame(taskId, wireSeq(event.seq), event.data));
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
  res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { resultType: 'complete' } })}\n\n`);
}

/**
 * SEP-2694, "Resume and Replay Semantics": a cursor whose next event is no
 * longer kept gets `events_gone` (with the earliest `seq` kept); a cursor
 * past the task's last event names no sequence number of this task
 * (-32602). Without a cursor nothing is refused: the stream starts at the
 * earliest event kept.
 */
function cursorRefusal(taskId: string, after: number | undefined, from: number, bounds: TaskEventBounds): { code: number; message: string; data?: unknown } | undefined {
  if (after === undefined) return undefined;
  const last = lastEventOf(bounds);
  if (from > last) return { code: RpcCode.invalidParams, message: `tasks/stream params.after (${after}) is past the task's last event (${last === 0 ? 'none yet' : `seq ${wireSeq(last)}`})` };
  if (bounds.first > 0 && from + 1 < bounds.first) {
    return { code: EVENTS_GONE_CODE, message: 'Task events are no longer available', data: { reason: 'events_gone', taskId, earliestSeq: wireSeq(bounds.first) } };
  }
  return undefined;
}

/** The position of the task's last event a client can have seen: the end marker is never sent. */
function lastEventOf(bounds: TaskEventBounds): number {
  return bounds.ended ? bounds.last - 1 : bounds.last;
}

/** One `notifications/tasks/event` frame; the upstream's notification goes in as the payload, byte for byte (it is a JSON object). */
function eventFrame(taskId: string, seq: number, payload: Uint8Array): string {
  const id = JSON.stringify(taskId);
  const params = `{"seq":${seq},"taskId":${id},"type":"${UPSTREAM_NOTIFICATION_EVENT}","payload":${Buffer.from(payload).toString('utf8')},"_meta":{"${RELATED_TASK_META}":{"taskId":${id}}}}`;
  return `id: ${seq}\nevent: message\ndata: {"jsonrpc":"2.0","method":"${TASK_EVENT_NOTIFICATION}","params":${params}}\n\n`;
}
