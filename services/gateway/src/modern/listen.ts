import type { IncomingMessage, ServerResponse } from 'node:http';
import { isTerminal } from '@tether/session-log';
import type { JsonObject, StoredTask } from '@tether/session-log';
import { SseParser } from '@tether/protocol';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { upstreamFailure } from '../handlers/pass-through.js';
import { fromLogError, replyError } from '../http/reply.js';
import type { JsonRpcMessage } from '../http/request.js';
import { callUpstream, forwardHeaders, isEventStream } from '../upstream.js';
import type { UpstreamAnswer } from '../upstream.js';
import type { EdgeTasks } from '../tasks/edge-tasks.js';
import { replyRpcError } from '../tasks/rpc-reply.js';
import { declaresTasks, detailedTask, missingTasksCapability, objectAt, RpcCode } from '../tasks/wire.js';

export const SUBSCRIPTION_ID_META = 'io.modelcontextprotocol/subscriptionId';
/** Task ids one listen may name. */
export const MAX_LISTEN_TASKS = 100;
/** How often the runners of the tasks a listen follows are checked (a dead runner is settled, and the change arrives here as any other). */
const RUNNER_CHECK_MS = 500;

/**
 * `subscriptions/listen` naming `notifications.taskIds`, served by whichever
 * instance receives it. The acknowledgment comes first and names the task
 * ids accepted (the caller's own, unexpired); then each task's state as it
 * is now and a `notifications/tasks` with the full task on every change,
 * from any instance, through NATS. A listen that also asks the upstream for
 * its notifications (tools, prompts, resources) is split: that part goes to
 * the upstream with the same request id, and both parts merge into this one
 * stream, the upstream's acknowledgment merged into ours.
 */
export async function handleListen(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Promise<void> {
  const params = objectAt(message, 'params');
  const notifications = objectAt(params, 'notifications');
  const taskIds = notifications?.taskIds;
  // The dispatcher sends a listen here only when it names task ids.
  if (notifications === undefined || taskIds === undefined) throw new Error('handleListen: a listen without notifications.taskIds is the upstream\'s');
  if (!declaresTasks(params)) return replyRpcError(res, message.id, missingTasksCapability('subscriptions/listen with notifications.taskIds'), 400);
  if (!Array.isArray(taskIds) || !taskIds.every((id) => typeof id === 'string') || taskIds.length > MAX_LISTEN_TASKS) {
    return replyRpcError(res, message.id, { code: RpcCode.invalidParams, message: `Invalid params: notifications.taskIds must be an array of at most ${MAX_LISTEN_TASKS} task id strings` });
  }

  // Subscribe before reading, so no change falls between the read and the feed.
  const latest = new Map<string, StoredTask>();
  const pending: StoredTask[] = [];
  let write: ((stored: StoredTask) => void) | undefined;
  const stops: (() => void)[] = [];
  const onChange = (stored: StoredTask): void => (write === undefined ? void pending.push(stored) : write(stored));
  const accepted: string[] = [];
  try {
    for (const taskId of new Set(taskIds as string[])) {
      const stop = tasks.table.watch(taskId, onChange);
      const found = await tasks.find(taskId, caller.principal, route.path);
      if (found.t !== 'visible') {
        stop();
        continue;
      }
      stops.push(stop);
      accepted.push(taskId);
      latest.set(taskId, found.stored);
    }
  } catch (err) {
    for (const stop of stops) stop();
    // The task store is unavailable: answered as the task methods answer it, never a 500.
    const reply = fromLogError(err);
    ctx.logger.warn({ err: String(err) }, 'subscriptions/listen could not read the task store');
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
  }

  const upstreamPart = withoutTaskIds(notifications);
  let upstream: UpstreamAnswer | undefined;
  if (upstreamPart !== undefined) {
    const upstreamBody = Buffer.from(JSON.stringify({ ...message, params: { ...params, notifications: upstreamPart } }));
    try {
      upstream = await callUpstream(ctx.pickers.get(route.path)!.pick(), { method: 'POST', headers: forwardHeaders(req, caller, undefined), body: upstreamBody, errors: ctx.metrics.upstreamErrors });
    } catch (err) {
      for (const stop of stops) stop();
      return replyError(res, upstreamFailure(err));
    }
    if (upstream.status !== 200 || !isEventStream(upstream)) {
      // The upstream refused its part (or has no listen): its answer goes back as it is.
      for (const stop of stops) stop();
      res.writeHead(upstream.status, { 'content-type': upstream.header('content-type') ?? 'application/json' });
      res.end(await upstream.bytes());
      return;
    }
  }

  const subscriptionId = message.id;
  const stamp = (p: JsonObject): JsonObject => ({ ...p, _meta: { ...objectAt(p, '_meta'), [SUBSCRIPTION_ID_META]: subscriptionId } });
  const send = (method: string, p: JsonObject): void => {
    if (!res.writableEnded) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method, params: stamp(p) })}\n\n`);
  };
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no' });

  let closed = false;
  let runnerCheck: NodeJS.Timeout | undefined;
  let keepAlive: NodeJS.Timeout | undefined;
  let upstreamAbort: (() => void) | undefined;
  const live = new Set(accepted);
  const finish = (): void => {
    if (closed) return;
    closed = true;
    for (const stop of stops) stop();
    clearInterval(runnerCheck);
    clearInterval(keepAlive);
    upstreamAbort?.();
    if (!res.writableEnded) {
      res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: subscriptionId, result: { resultType: 'complete', _meta: { [SUBSCRIPTION_ID_META]: subscriptionId } } })}\n\n`);
      res.end();
    }
  };
  res.once('close', () => {
    closed = true;
    for (const stop of stops) stop();
    clearInterval(runnerCheck);
    clearInterval(keepAlive);
    upstreamAbort?.();
  });
  // The highest record sent per task: the read and the feed may carry the same one, or cross.
  const sent = new Map<string, number>();
  const deliver = (stored: StoredTask): void => {
    const { taskId } = stored.record;
    if (closed || !live.has(taskId) || stored.seq <= (sent.get(taskId) ?? 0)) return;
    sent.set(taskId, stored.seq);
    latest.set(taskId, stored);
    send('notifications/tasks', detailedTask(stored.record));
    if (isTerminal(stored.record.status)) {
      live.delete(taskId);
      if (live.size === 0 && upstream === undefined) finish();
    }
  };

  // The acknowledgment first: the upstream's (when it has a part) with our task ids merged in.
  const upstreamAck = upstream === undefined ? undefined : await relayUpstream(upstream, res, (abort) => (upstreamAbort = abort), () => {
    upstream = undefined;
    if (live.size === 0) finish();
  }, () => tasks.catalog(route.path)?.invalidate());
  send('notifications/subscriptions/acknowledged', { notifications: { ...(upstreamAck ?? {}), taskIds: accepted } });
  // Then each task as it is now, then the changes.
  for (const taskId of accepted) deliver(latest.get(taskId)!);
  write = deliver;
  for (const stored of pending) deliver(stored);
  // Runner checks go on for as long as the listen lasts: each takes the caller's newest credentials.
  const asCaller = ctx.credentials.of(caller, undefined);
  if (closed) return;
  runnerCheck = setInterval(() => {
    for (const taskId of live) {
      const stored = latest.get(taskId);
      if (stored !== undefined && stored.record.status === 'working') void tasks.checkRunner(stored, asCaller.current(), route.upstreams[0]!).catch(() => undefined);
    }
  }, RUNNER_CHECK_MS);
  runnerCheck.unref();
  keepAlive = setInterval(() => {
    if (!res.writableEnded) res.write(': keepalive\n\n');
  }, ctx.config.heartbeatMs);
  keepAlive.unref();
  if (live.size === 0 && upstream === undefined) finish();
}

/** The listen's filter for the upstream: everything but `taskIds`, or undefined when nothing is left. */
function withoutTaskIds(notifications: JsonObject): JsonObject | undefined {
  const { taskIds: _ours, ...rest } = notifications as Record<string, unknown>;
  return Object.keys(rest).length === 0 ? undefined : rest;
}

/**
 * Reads the upstream's listen stream: resolves with the notifications its
 * acknowledgment agreed to, then keeps relaying its notifications (they
 * carry the same subscription id: same request id) until it ends.
 */
function relayUpstream(
  upstream: UpstreamAnswer,
  res: ServerResponse,
  setAbort: (abort: () => void) => void,
  onEnd: () => void,
  onToolsChanged: () => void,
): Promise<JsonObject | undefined> {
  return new Promise((resolve) => {
    let acknowledged = false;
    const iterator = upstream.body[Symbol.asyncIterator]();
    setAbort(() => void iterator.return?.());
    const parser = new SseParser();
    void (async () => {
      try {
        for (;;) {
          const { value, done } = await iterator.next();
          if (done === true) break;
          for (const event of parser.push(value)) {
            let m: { method?: unknown; params?: unknown; id?: unknown };
            try {
              m = JSON.parse(event.data) as typeof m;
            } catch {
              continue;
            }
            if (m.method === 'notifications/subscriptions/acknowledged' && !acknowledged) {
              acknowledged = true;
              resolve(objectAt(m.params, 'notifications') ?? {});
            } else if (typeof m.method === 'string' && acknowledged && !res.writableEnded) {
              if (m.method === 'notifications/tools/list_changed') onToolsChanged();
              // Already stamped by the upstream with the subscription id.
              res.write(`event: message\ndata: ${event.data}\n\n`);
            }
            // The upstream's final result ends its part only: ours may go on.
          }
        }
      } catch {
        // The upstream part broke: the task part goes on.
      } finally {
        if (!acknowledged) resolve(undefined);
        onEnd();
      }
    })();
  });
}
