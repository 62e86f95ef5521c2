import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StoredTask, TaskRecord } from '@tether/session-log';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { endToEndHeaders, tokenAuth, upstreamFailure } from '../handlers/pass-through.js';
import { fromLogError, replyError } from '../http/reply.js';
import type { JsonRpcMessage } from '../http/request.js';
import { MAX_LISTEN_TASKS, SUBSCRIPTION_ID_META } from '../modern/listen.js';
import { callUpstream, forwardHeaders } from '../upstream.js';
import type { EdgeTasks } from './edge-tasks.js';
import { findOwned, replicaUrl, settleLost } from './owned-record.js';
import { replyRpcError } from './rpc-reply.js';
import { lostTask, NOT_ROUTED, refusedConnection } from './upstream-owned.js';
import type { Routed } from './upstream-owned.js';
import { declaresTasks, objectAt, RpcCode } from './wire.js';

/**
 * `subscriptions/listen` naming upstream-owned tasks: the listen goes to
 * the replica holding them, with the request id, and its stream comes back
 * untouched (the replica sends the acknowledgment and `notifications/tasks`
 * itself). One replica serves one listen: when the ids live on several,
 * the listen goes to the replica of the first, naming only its tasks, and
 * the acknowledgment says which ids were accepted (SEP-2663: the server
 * lists the task ids it agreed to). Another principal's ids, and unknown
 * ones, are never sent upstream. Tasks whose replica is gone are answered
 * here, `failed` with the reason, and the stream ends.
 * `NOT_ROUTED`: the listen names no upstream-owned task of this caller.
 */
export async function routeOwnedListen(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, message: JsonRpcMessage): Routed {
  const params = objectAt(message, 'params');
  const notifications = objectAt(params, 'notifications');
  const taskIds = notifications?.taskIds;
  // The gateway's listen answers the malformed and the undeclared (-32602, -32021).
  if (!declaresTasks(params) || !Array.isArray(taskIds) || taskIds.length > MAX_LISTEN_TASKS || !taskIds.every((id) => typeof id === 'string')) return NOT_ROUTED;
  if (!(await tasks.owners.mayOwn(route, caller.upstreamHeaders))) return NOT_ROUTED;
  const routed: StoredTask[] = [];
  try {
    for (const taskId of new Set(taskIds as string[])) {
      const found = await findOwned(tasks.table, route, taskId, caller.principal);
      if (found.t === 'routed') routed.push(found.stored);
    }
  } catch (err) {
    const reply = fromLogError(err);
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: reply.message }, reply.status >= 500 ? 503 : 200);
  }
  if (routed.length === 0) return NOT_ROUTED;

  const live = routed.filter((s) => s.record.status !== 'failed');
  if (live.length === 0) return sendLost(res, message.id, routed.map((s) => s.record));
  const replica = live[0]!.record.upstream!.replica;
  const group = live.filter((s) => s.record.upstream!.replica === replica);
  const url = replicaUrl(route, replica);
  if (url === undefined) return sendLost(res, message.id, await Promise.all(group.map((s) => settleLost(tasks.table, s, 'replica_removed'))));
  const upstreamIds = group.map((s) => s.record.upstream!.taskId);
  const body = Buffer.from(JSON.stringify({ ...message, params: { ...params, notifications: { ...notifications, taskIds: upstreamIds } } }));
  let answer;
  try {
    answer = await callUpstream(url, { method: 'POST', headers: forwardHeaders(req, caller, undefined), body, errors: ctx.metrics.upstreamErrors });
  } catch (err) {
    if (refusedConnection(err)) return sendLost(res, message.id, await Promise.all(group.map((s) => settleLost(tasks.table, s, 'replica_gone'))));
    return replyError(res, upstreamFailure(err));
  }
  res.writeHead(answer.status, endToEndHeaders(answer.headers, tokenAuth(ctx)));
  res.once('close', () => void answer.cancel());
  try {
    for await (const chunk of answer.body) {
      if (res.destroyed) break;
      res.write(chunk);
    }
  } catch {
    // The replica's stream broke: the client's ends with it, and it listens again.
  }
  res.end();
}

/** A listen answered here: the lost tasks acknowledged, each sent once (`failed`, terminal), then the end. */
function sendLost(res: ServerResponse, id: unknown, records: readonly TaskRecord[]): void {
  const meta = { [SUBSCRIPTION_ID_META]: id };
  const event = (message: unknown): string => `event: message\ndata: ${JSON.stringify(message)}\n\n`;
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform' });
  res.write(event({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: { taskIds: records.map((r) => r.upstream!.taskId) }, _meta: meta } }));
  for (const record of records) res.write(event({ jsonrpc: '2.0', method: 'notifications/tasks', params: { ...lostTask(record), _meta: meta } }));
  res.end(event({ jsonrpc: '2.0', id, result: { resultType: 'complete', _meta: meta } }));
}
