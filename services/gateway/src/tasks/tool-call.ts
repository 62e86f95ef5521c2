import type { IncomingMessage, ServerResponse } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { isSessionLogError, newTaskId, SessionLogErrorCode } from '@tether/session-log';
import type { JsonObject, TaskRecord } from '@tether/session-log';
import type { Caller } from '../auth/authenticator.js';
import type { Route } from '../config.js';
import type { GatewayContext } from '../context.js';
import { header } from '../http/request.js';
import type { JsonRpcMessage } from '../http/request.js';
import { endToEndHeaders, tokenAuth } from '../handlers/pass-through.js';
import { PASS } from '../modern/served.js';
import type { Served } from '../modern/served.js';
import { GatewayErrorCode, replyError } from '../http/reply.js';
import { copyParamHeaders, forwardHeaders } from '../upstream.js';
import type { EdgeTasks } from './edge-tasks.js';
import { tag } from './edge-tasks.js';
import { replyResult, replyRpcError } from './rpc-reply.js';
import { forwardOwnedCall } from './upstream-owned.js';
import type { CallOutcome, RawAnswer } from './upstream-call.js';
import { bodyWithoutTasksDeclaration, createTaskResult, declaresTasks, missingTasksCapability, RpcCode } from './wire.js';
import type { RpcError } from './wire.js';

/** Headers of the first request that the task's later calls repeat (never credentials). */
const CALL_HEADERS = ['mcp-protocol-version'];
const TIMED_OUT = Symbol('timed out');

/**
 * A 2026-07-28 `tools/call`. From a client that declared the Tasks
 * extension it starts upstream at once; an answer within `--task-after`
 * goes straight back (a result, an error, an input round before any task).
 * Otherwise the gateway stores a task (durable before the client hears of
 * it), answers `CreateTaskResult`, and the call goes on under the task.
 * SEP-2663 makes the server the sole decider with no `tools/list` warm-up,
 * so any tool qualifies except one the catalog rules out (`forbidden` in the
 * upstream's 2025-era list, or `--no-task-tools`), as known at that moment:
 * such a call never waits for the list. A call from a client without the
 * extension passes through untouched, unless the list says the tool
 * requires tasks.
 */
export async function handleToolCall(ctx: GatewayContext, tasks: EdgeTasks, route: Route, caller: Caller, req: IncomingMessage, res: ServerResponse, body: Buffer, message: JsonRpcMessage): Served {
  // An upstream that runs tasks itself decides, and its tasks are routed to it (upstream-owned.ts).
  if (await tasks.owners.owns(route, caller.upstreamHeaders)) return forwardOwnedCall(ctx, tasks, route, caller, req, res, body, message);
  const params = message.params as JsonObject | undefined;
  const tool = params?.name;
  if (typeof tool !== 'string') return PASS;
  const catalog = tasks.catalog(route.path);
  const known = () => catalog?.peek(tool, caller.upstreamHeaders);
  if (!declaresTasks(params)) {
    // Never a task, so waiting for the list costs no task its start: the first
    // call on a route waits for it (once), so a tool that requires tasks is
    // never run for a client that cannot take one.
    const info = await catalog?.lookup(tool, caller.upstreamHeaders);
    if (info?.taskSupport === 'required') return replyRpcError(res, message.id, missingTasksCapability(`tool ${JSON.stringify(tool)}`), 400);
    return PASS;
  }
  if (known()?.taskSupport === 'forbidden') return PASS;

  const upstreamUrl = ctx.pickers.get(route.path)!.pick();
  const call = tasks.startCall(upstreamUrl, forwardHeaders(req, caller, undefined), bodyWithoutTasksDeclaration(body), message.id);
  const early = await Promise.race([call.outcome, sleep(tasks.config.afterMs, TIMED_OUT, { ref: false })]);
  if (early !== TIMED_OUT) return answerWhenDone(res, message.id, early, call.raw(), tokenAuth(ctx));
  // A list that arrived while the call ran may rule it out; it then stays the plain call it is.
  const info = known();
  if (info?.taskSupport === 'forbidden') return answerWhenDone(res, message.id, await call.outcome, call.raw(), tokenAuth(ctx));

  const now = Date.now();
  const record: TaskRecord = {
    v: 1,
    taskId: newTaskId(),
    principal: caller.principal,
    route: route.path,
    tool,
    status: 'working',
    createdAtMs: now,
    updatedAtMs: now,
    ttlMs: tasks.config.ttlMs,
    pollIntervalMs: tasks.config.pollIntervalMs,
    runner: tasks.writerId,
    runnerInstance: tasks.instanceId,
    attempts: 1,
    reruns: 0,
    rounds: 0,
    idempotent: info?.idempotent ?? false,
    params: withoutRoundFields(params!),
    callHeaders: callHeadersOf(req),
    usedKeys: [],
  };
  try {
    await tasks.table.create(record);
  } catch (err) {
    if (isSessionLogError(err, SessionLogErrorCode.payloadTooLarge)) {
      // Arguments too large for a task record: the call goes on as a plain call, and its answer comes back here when it comes.
      ctx.logger.info({ tool }, 'a call too large for a task record runs untasked');
      return answerWhenDone(res, message.id, await call.outcome, call.raw(), tokenAuth(ctx));
    }
    call.abort('the task could not be stored');
    ctx.logger.warn({ err: String(err) }, 'task store unavailable: a call that would have become a task was refused');
    return replyRpcError(res, message.id, { code: RpcCode.internal, message: 'the task store is unavailable; retry shortly' }, 503);
  }
  call.dropRaw();
  tasks.count('created');
  tasks.run(record, call, 'run', tasks.againFor(record, caller.upstreamHeaders, upstreamUrl));
  ctx.logger.debug({ task: tag(record.taskId), tool }, 'task created');
  replyResult(res, message.id, createTaskResult(record));
}

/** A call that did not become a task: the upstream's answer byte for byte when it was kept, else re-encoded. */
function answerWhenDone(res: ServerResponse, id: unknown, outcome: CallOutcome, raw: RawAnswer | undefined, tokenAuth: boolean): void {
  if (outcome.kind === 'lost') return replyError(res, { status: 502, code: GatewayErrorCode.upstream, message: outcome.reason });
  if (raw !== undefined) return passBack(res, raw, tokenAuth);
  // Too large to have kept byte for byte (over 4 MiB): the answer, re-encoded.
  if (outcome.kind === 'answer') return outcome.answer.error === undefined ? replyResult(res, id, outcome.answer.result) : replyRpcError(res, id, outcome.answer.error as unknown as RpcError);
  return replyError(res, { status: 502, code: GatewayErrorCode.upstream, message: `the upstream answered HTTP ${outcome.status} with a body too large to pass back` });
}

/** The upstream's answer as it came: status, headers (less those of its connection), bytes. */
function passBack(res: ServerResponse, raw: RawAnswer, tokenAuth: boolean): void {
  res.writeHead(raw.status, endToEndHeaders(raw.headers, tokenAuth));
  for (const chunk of raw.chunks) res.write(chunk);
  res.end();
}

/** The call as each later upstream call re-sends it: the answers of an input round before the task are not part of it. */
function withoutRoundFields(params: JsonObject): JsonObject {
  const { inputResponses: _answers, requestState: _state, ...rest } = params as Record<string, unknown>;
  return rest;
}

function callHeadersOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of CALL_HEADERS) {
    const value = header(req, name);
    if (value !== undefined) out[name] = value;
  }
  return copyParamHeaders(req, out);
}
