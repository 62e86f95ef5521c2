import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { isDeepStrictEqual } from 'node:util';
import { TaskTools } from '@tether/testing';
import type { CaseCounter } from './fuzz-kit.js';
import type { WireRequest, WireResponse } from './gateway-stack.js';
import type { LiveOp, LiveRecipe } from './gateway-tasks-arbitraries.js';
import { Code, detailedTaskProblems, isObject, orderProblems, owedProblems, strip, SUBSCRIPTION_ID_META, TERMINAL } from './gateway-tasks-checks.js';
import type { Observation } from './gateway-tasks-checks.js';
import { ELICITING_META, messagesOf, modernHeaders, rpc } from './gateway-tasks-stack.js';
import type { TaskGatewayStack } from './gateway-tasks-stack.js';

/**
 * Property 2 of the task suite: one live task under random interleavings
 * of get, update, cancel, upstream release and another principal's
 * requests, from both gateways at once, maybe followed by a listen. Every
 * look is kept with when its request went out and its answer came back, so
 * the order checks compare only looks that did not overlap.
 */

/** What a live case needs of the suite. */
export interface LiveContext {
  readonly stack: TaskGatewayStack;
  readonly counter: CaseCounter;
  /** Another principal's `Authorization`. */
  readonly foreign: string;
  createTask(index: number, tool: string, args: Record<string, unknown>): Promise<string>;
  fail(title: string, req: WireRequest, res: WireResponse | undefined, problems: readonly string[]): never;
  /** Problems of the log lines since `mark` (credentials, task ids whole). */
  logProblems(mark: number): string[];
  healthCheck(property: string): Promise<void>;
}

/** How long a case waits for a cancelled or finishing task to be terminal. */
const SETTLE_MS = 8_000;
/** A listen following a live task is read until it ends by itself, at most this long. */
const LISTEN_READ_MS = 18_000;

interface LiveState {
  readonly taskId: string;
  readonly looks: Observation[];
  openKeys: string[];
  firstCancelAt: number;
  releasedAt: number;
  readonly releasedText: string;
}

async function look(ctx: LiveContext, property: string, s: LiveState, index: number, via: string): Promise<Record<string, unknown>> {
  const id = s.looks.length + 100;
  const { req, res, sentAt, receivedAt } = await rpc(ctx.stack, index, 'tasks/get', { taskId: s.taskId }, { name: s.taskId, id });
  ctx.counter.time(property, res.elapsedMs);
  const [m] = messagesOf(res) ?? [];
  const problems = [...owedProblems({ t: 'result', taskId: s.taskId, method: 'tasks/get' }, res, id)];
  if (problems.length > 0) ctx.fail(`${property}: tasks/get of the live task (${via})`, req, res, problems);
  const task = (m as { result: Record<string, unknown> }).result;
  s.looks.push({ task, sentAt, receivedAt, via: `${via} on gateway ${index}` });
  if (task.status === 'input_required') s.openKeys = Object.keys(task.inputRequests as object);
  return task;
}

async function liveOp(ctx: LiveContext, property: string, r: LiveRecipe, s: LiveState, op: LiveOp, key: string): Promise<void> {
  switch (op.t) {
    case 'get':
      await look(ctx, property, s, op.gateway, 'get');
      return;
    case 'wait':
      await sleep(op.ms);
      return;
    case 'until': {
      const from = String(s.looks.at(-1)?.task.status ?? 'working');
      if (TERMINAL.has(from)) return;
      for (const until = performance.now() + 1_000; performance.now() < until; await sleep(40)) {
        if ((await look(ctx, property, s, op.gateway, 'until')).status !== from) return;
      }
      return;
    }
    case 'release':
      if (r.tool === TaskTools.Hold && s.releasedAt === Number.POSITIVE_INFINITY) {
        s.releasedAt = performance.now();
        ctx.stack.upstream.release(key, s.releasedText);
      }
      return;
    case 'update':
    case 'cancel': {
      const inputResponses = Object.fromEntries(op.t === 'cancel' ? [] : op.keys.map((k, i) => [k === 'open' && s.openKeys.length > 0 ? s.openKeys[(op.pick + i) % s.openKeys.length]! : `unknown-${op.pick + i}`, op.answer]));
      const method = op.t === 'cancel' ? 'tasks/cancel' : 'tasks/update';
      if (op.t === 'cancel') s.firstCancelAt = Math.min(s.firstCancelAt, performance.now());
      const { req, res } = await rpc(ctx.stack, op.gateway, method, { taskId: s.taskId, ...(op.t === 'update' ? { inputResponses } : {}) }, { name: s.taskId, id: 7 });
      ctx.counter.time(property, res.elapsedMs);
      const problems = owedProblems({ t: 'result', taskId: s.taskId, method }, res, 7);
      if (problems.length > 0) ctx.fail(`${property}: ${method} of the live task`, req, res, problems);
      return;
    }
    case 'foreign': {
      const { req, res } = await rpc(ctx.stack, op.gateway, op.method, { taskId: s.taskId, ...(op.method === 'tasks/update' ? { inputResponses: { confirm: { action: 'accept' } } } : {}) }, { name: s.taskId, id: 8, authorization: ctx.foreign });
      const problems = owedProblems({ t: 'error', status: 200, code: Code.invalidParams, rung: 'not found', why: 'another principal\'s task' }, res, 8);
      if (problems.length > 0) ctx.fail(`${property}: ${op.method} of the live task as another principal`, req, res, problems);
    }
  }
}

/** What the live task may end as, given its tool and what the case did. */
function outcomeProblems(r: LiveRecipe, s: LiveState, label: string): string[] {
  const problems: string[] = [];
  const final = s.looks.at(-1)!.task;
  const text = isObject(final.result) && Array.isArray(final.result.content) ? (final.result.content[0] as { text?: unknown } | undefined)?.text : undefined;
  const asks = r.tool === TaskTools.ConfirmDelete || r.tool === TaskTools.MultiInput;
  for (const l of s.looks) {
    if (l.task.status === 'input_required' && !asks) problems.push(`${r.tool} never asks for input, yet the task was input_required (${l.via})`);
    if (l.task.status === 'cancelled' && l.receivedAt < s.firstCancelAt) problems.push(`cancelled before any tasks/cancel was sent (${l.via})`);
    if (l.task.status === 'completed' && r.tool === TaskTools.Hold && l.receivedAt < s.releasedAt) problems.push(`the hold task completed before its key was released (${l.via})`);
  }
  switch (final.status) {
    case 'cancelled':
      break;
    case 'failed': {
      const error = final.error as { code?: unknown; data?: { reason?: unknown } };
      if (r.tool !== TaskTools.ProtocolErrorJob) problems.push(`${r.tool} failed: ${JSON.stringify(final.error).slice(0, 300)}`);
      else if (error.code !== -32603 || error.data?.reason !== undefined) problems.push(`protocol_error_job failed with ${JSON.stringify(final.error).slice(0, 300)}, not the upstream's -32603`);
      break;
    }
    case 'completed':
      if (r.tool === TaskTools.Hold && text !== s.releasedText) problems.push(`the hold task completed with ${JSON.stringify(text)}, not the released ${JSON.stringify(s.releasedText)}`);
      if (r.tool === TaskTools.SlowCompute && text !== `slow_compute ${label} done after ${r.seconds} s`) problems.push(`slow_compute completed with ${JSON.stringify(text)}`);
      if (r.tool === TaskTools.FailingJob && (final.result as { isError?: unknown }).isError !== true) problems.push('failing_job completed without isError');
      if (r.tool === TaskTools.ProtocolErrorJob) problems.push('protocol_error_job completed');
      if (typeof text !== 'string') problems.push(`completed without a text result: ${JSON.stringify(final.result).slice(0, 200)}`);
      break;
    default:
      problems.push(`still ${String(final.status)} ${SETTLE_MS} ms after a tasks/cancel`);
  }
  return problems;
}

/** The listen that followed the task: acknowledged it, told the same story in order, ended with the final state, then its result. */
function listenStory(res: WireResponse, s: LiveState, listenId: number, listenedAt: number): string[] {
  const messages = messagesOf(res);
  if (res.status !== 200 || messages === undefined) return [`the listen answered ${res.status}: ${res.body.slice(0, 200)}`];
  const problems = owedProblems({ t: 'listen', accepted: [s.taskId], upstreamPart: false }, res, listenId);
  // Left open: a finding when the task had ended well before the read was cut (not when the case itself ran that long).
  const endedAt = s.looks.find((l) => TERMINAL.has(l.task.status as string))?.receivedAt ?? Number.POSITIVE_INFINITY;
  if (res.cutOpen && endedAt < listenedAt + LISTEN_READ_MS - 3_000) problems.push(`the listen was still open ${Math.round(listenedAt + LISTEN_READ_MS - endedAt)} ms after the task ended`);
  const told = messages.filter((m): m is { params: Record<string, unknown> } => isObject(m) && m.method === 'notifications/tasks').map((m) => m.params);
  for (let i = 1; i < told.length; i += 1) {
    const [a, b] = [told[i - 1]!, told[i]!];
    if (TERMINAL.has(a.status as string)) problems.push(`a notification after the terminal one: ${String(a.status)} then ${String(b.status)}`);
    if (Date.parse(b.lastUpdatedAt as string) < Date.parse(a.lastUpdatedAt as string)) problems.push(`the listen's lastUpdatedAt went back: ${String(a.lastUpdatedAt)} then ${String(b.lastUpdatedAt)}`);
  }
  const last = told.at(-1);
  const final = s.looks.at(-1)!.task;
  if (res.cutOpen) return problems;
  if (last === undefined || !isDeepStrictEqual(strip(last), strip(final))) problems.push(`the listen's last notification ${JSON.stringify(last === undefined ? null : strip(last)).slice(0, 300)} is not the final state ${JSON.stringify(strip(final)).slice(0, 300)}`);
  const end = messages.at(-1);
  if (!(isObject(end) && end.id === listenId && isObject(end.result) && isObject(end.result._meta) && end.result._meta[SUBSCRIPTION_ID_META] === listenId)) problems.push('the listen ended without its final result');
  return problems;
}

export async function liveCase(ctx: LiveContext, property: string, r: LiveRecipe): Promise<void> {
  ctx.counter.hit(property);
  const key = `live-${randomBytes(6).toString('hex')}`;
  const label = `L${key}`;
  const args = r.tool === TaskTools.Hold ? { key } : r.tool === TaskTools.SlowCompute ? { seconds: r.seconds, label } : r.tool === TaskTools.ConfirmDelete ? { filename: 'f' } : {};
  const inFlightBefore = ctx.stack.upstream.inFlight(r.tool);
  const mark = ctx.stack.logLines.length;
  const taskId = await ctx.createTask(r.creator, r.tool, args);
  const listenId = 4242;
  const listenReq: WireRequest = {
    method: 'POST',
    path: '/mcp',
    headers: modernHeaders('subscriptions/listen', undefined),
    body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: listenId, method: 'subscriptions/listen', params: { notifications: { taskIds: [taskId] }, _meta: ELICITING_META } })),
  };
  // Not timed: it is open for the whole case.
  const listenedAt = performance.now();
  const listening = r.listenOn === undefined ? undefined : ctx.stack.send(r.listenOn, listenReq, LISTEN_READ_MS);
  listening?.catch(() => undefined);
  const s: LiveState = { taskId, looks: [], openKeys: [], firstCancelAt: Number.POSITIVE_INFINITY, releasedAt: Number.POSITIVE_INFINITY, releasedText: `released ${key}` };
  for (const step of r.steps) await Promise.all(step.map((op) => liveOp(ctx, property, r, s, op, key)));
  // The end: a cancel from either gateway always ends the task (or finds it ended).
  await liveOp(ctx, property, r, s, { t: 'cancel', gateway: r.finalCancel }, key);
  const deadline = performance.now() + SETTLE_MS;
  for (let i = 0; !TERMINAL.has((await look(ctx, property, s, i % 2, 'settling')).status as string) && performance.now() < deadline; i += 1) await sleep(50);
  await look(ctx, property, s, 0, 'final');
  await look(ctx, property, s, 1, 'final');
  if (r.tool === TaskTools.Hold) ctx.stack.upstream.release(key, 'too late');
  const problems = [
    ...s.looks.flatMap((l) => detailedTaskProblems(l.task, taskId, 'get').map((p) => `${l.via}: ${p}`)),
    ...orderProblems(s.looks),
    ...outcomeProblems(r, s, label),
  ];
  // The upstream call ends with the task (a cancelled one is closed).
  for (const until = performance.now() + 3_000; ctx.stack.upstream.inFlight(r.tool) > inFlightBefore && performance.now() < until; ) await sleep(25);
  if (ctx.stack.upstream.inFlight(r.tool) > inFlightBefore) problems.push(`${ctx.stack.upstream.inFlight(r.tool) - inFlightBefore} upstream ${r.tool} call(s) still running 3 s after the task ended`);
  if (listening !== undefined) problems.push(...listenStory(await listening, s, listenId, listenedAt));
  problems.push(...ctx.logProblems(mark));
  const final = s.looks.at(-1)!.task;
  if (problems.length > 0) {
    const story = s.looks.map((l) => `${l.via} ${Math.round(l.sentAt)}-${Math.round(l.receivedAt)}: ${String(l.task.status)} ${String(l.task.lastUpdatedAt)}`).join('\n  ');
    ctx.fail(`${property} (${r.tool}, ${s.looks.length} looks)\n  ${story}`, listenReq, undefined, problems);
  }
  const seen = [...new Set(s.looks.map((l) => l.task.status as string))].join('>');
  ctx.counter.note(property, `${r.tool} ${String(final.status)}${seen.includes('input_required') ? ' (asked)' : ''}`);
  await ctx.healthCheck(property);
}

