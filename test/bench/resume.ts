import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { encodeEventId } from '@tether/protocol';
import type { SessionLog } from '@tether/session-log';
import type { LogFill } from './fill.js';
import { progressMessage } from './payload.js';
import { progress, summarize } from './stats.js';
import type { Summary } from './stats.js';

/** Events a resume must deliver: the backlog after the cursor. */
export const BACKLOG = 100;

/** One resume to measure: a stream of the fill and the index of the cursor event in it. */
export interface SamplePlan {
  readonly stream: number;
  readonly cursor: number;
}

export interface SampleBudget {
  readonly warmup: number;
  readonly max: number;
  readonly min: number;
  readonly budgetMs: number;
}

export interface TetherResumeResult {
  readonly total: Summary;
  /** `log.resume()` returned (classification done). */
  readonly classify: Summary;
  /** First event of the backlog arrived. */
  readonly firstEvent: Summary;
  /** Samples whose verdict was not `resumed` or whose events were out of order (should be 0). */
  readonly anomalies: number;
}

export interface SdkResumeResult {
  readonly total: Summary;
  readonly buildMs: number;
  readonly anomalies: number;
}

/** Random cursors with at least BACKLOG events after them, over every stream long enough. */
export function planSamples(fill: LogFill, count: number, rand: { int(min: number, max: number): number }): SamplePlan[] {
  const eligible = fill.streams.flatMap((s, i) => (s.pos.length > BACKLOG ? [i] : []));
  if (eligible.length === 0) throw new Error('no stream holds more than 100 events');
  return Array.from({ length: count }, () => {
    const stream = eligible[rand.int(0, eligible.length - 1)] ?? 0;
    const length = fill.streams[stream]?.pos.length ?? 0;
    return { stream, cursor: rand.int(0, length - BACKLOG - 1) };
  });
}

/** Runs `warmup` untimed samples, then timed ones until `max` or the time budget (but at least `min`). */
export async function sampleLoop<T>(plans: readonly SamplePlan[], budget: SampleBudget, run: (plan: SamplePlan) => Promise<T>): Promise<T[]> {
  for (let i = 0; i < budget.warmup; i += 1) await run(plans[i % plans.length] as SamplePlan);
  const out: T[] = [];
  const start = performance.now();
  for (const plan of plans) {
    if (out.length >= budget.max) break;
    if (out.length >= budget.min && performance.now() - start > budget.budgetMs) break;
    out.push(await run(plan));
  }
  return out;
}

/** Resume latency of the session log: `log.resume()` until the 100th event of the backlog is in hand. */
export async function measureTetherResume(
  log: SessionLog,
  fill: LogFill,
  principal: string,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
): Promise<TetherResumeResult> {
  let anomalies = 0;
  const samples = await sampleLoop(plans, budget, async (plan) => {
    const r = await resumeOnce(log, fill, principal, plan);
    if (!r.ok) anomalies += 1;
    return r;
  });
  return {
    total: summarize(samples.map((s) => s.totalMs)),
    classify: summarize(samples.map((s) => s.classifyMs)),
    firstEvent: summarize(samples.map((s) => s.firstMs)),
    anomalies,
  };
}

/** One resume: `log.resume()` at the plan's cursor, then its events until the 100th. */
export async function resumeOnce(
  log: SessionLog,
  fill: LogFill,
  principal: string,
  plan: SamplePlan,
): Promise<{ ok: boolean; totalMs: number; classifyMs: number; firstMs: number }> {
  const stream = fill.streams[plan.stream];
  if (stream === undefined) throw new Error(`no stream ${plan.stream}`);
  const pos = stream.pos[plan.cursor] ?? 0;
  const lastEventId = encodeEventId({ epoch: stream.epoch, stream: stream.streamId, seq: plan.cursor + 1, pos });
  const start = performance.now();
  const r = await log.resume(stream.sessionId, lastEventId, principal);
  const classifyMs = performance.now() - start;
  if (r.verdict !== 'resumed') return { ok: false, totalMs: classifyMs, classifyMs, firstMs: classifyMs };
  let ok = true;
  let received = 0;
  let firstMs = Number.NaN;
  let totalMs = Number.NaN;
  // The stream may go on past the backlog (or wait for live events): stop at
  // the 100th event, which ends the reader.
  for await (const event of r.events()) {
    received += 1;
    if (event.seq !== plan.cursor + 1 + received) ok = false;
    if (received === 1) firstMs = performance.now() - start;
    if (received === BACKLOG) {
      totalMs = performance.now() - start;
      break;
    }
  }
  return { ok: ok && received === BACKLOG, totalMs, classifyMs, firstMs };
}

/**
 * The official SDK's example in-memory store holding the same events in the
 * same order (`storeEvent` per event), resumed at the same cursors: time from
 * `replayEventsAfter` until the 100th event was sent.
 */
export async function measureSdkResume(fill: LogFill, events: number, plans: readonly SamplePlan[], budget: SampleBudget): Promise<SdkResumeResult> {
  const store = new InMemoryEventStore();
  const ids: string[][] = fill.streams.map(() => []);
  const buildStart = performance.now();
  for (let i = 0; i < events; i += 1) {
    const index = fill.order[i] ?? 0;
    const stream = fill.streams[index];
    const list = ids[index];
    if (stream === undefined || list === undefined) throw new Error(`no stream ${index}`);
    list.push(await store.storeEvent(stream.streamId, progressMessage(stream.streamId, list.length)));
  }
  const buildMs = performance.now() - buildStart;
  progress(`sdk store: ${events.toLocaleString('en-US')} events stored in ${Math.round(buildMs)} ms`);
  const stop = new Error('enough events');
  let anomalies = 0;
  const samples = await sampleLoop(plans, budget, async (plan) => {
    // The store orders events by localeCompare of their ids (time in ms, then
    // a random suffix), so the cursor is picked in that same order.
    const ordered = [...(ids[plan.stream] ?? [])].sort((a, b) => a.localeCompare(b));
    const cursor = ordered[plan.cursor] ?? '';
    let sent = 0;
    let totalMs = Number.NaN;
    const start = performance.now();
    try {
      await store.replayEventsAfter(cursor, {
        send: async () => {
          sent += 1;
          if (sent === BACKLOG) {
            totalMs = performance.now() - start;
            throw stop;
          }
        },
      });
    } catch (err) {
      if (err !== stop) throw err;
    }
    if (sent !== BACKLOG) anomalies += 1;
    return totalMs;
  });
  return { total: summarize(samples.filter(Number.isFinite)), buildMs, anomalies };
}
