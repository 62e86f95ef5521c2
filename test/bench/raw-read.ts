/**
 * The diagnostic floor of a resume: the same 100 events read straight from
 * JetStream the way the log reads them, without classification, chain checks
 * or live tail.
 */
import { createInbox } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import type { LogFill } from './fill.js';
import { BACKLOG, sampleLoop } from './resume.js';
import type { SampleBudget, SamplePlan } from './resume.js';
import { summarize } from './stats.js';
import type { Summary } from './stats.js';

/**
 * Where the fill's events live: the stream holding a session (its partition's,
 * `log.partitionOf(id).streamName`) and a session stream's subject
 * (`createSubjects(prefix, N).log(id, stream)`).
 */
export interface ReadLayout {
  readonly streamOf: (sessionId: string) => string;
  readonly subjectOf: (sessionId: string, stream: string) => string;
}

/** Where a plan's cursor is: the stream and subject, the cursor event's position and the first one's after it. */
export interface PlanTarget {
  readonly streamName: string;
  readonly subject: string;
  /** Log position of the cursor's event. */
  readonly cursorPos: number;
  /** Where the 100 events after the cursor start (the read skips other subjects' messages from there). */
  readonly startSeq: number;
}

/**
 * The read path's floor: one batch direct get `{seq, next_by_subj, batch: 100}`
 * on core NATS, to the session's partition stream, counted until the
 * server's `204 EOB`.
 */
export function measureRawDirectBatch(
  nc: NatsConnection,
  layout: ReadLayout,
  fill: LogFill,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
): Promise<Summary> {
  return measureRawRead(layout, fill, plans, budget, async (t) => {
    const received = await directBatch(nc, t.streamName, { seq: t.startSeq, next_by_subj: t.subject, batch: BACKLOG });
    if (received !== BACKLOG) throw new Error(`batch direct get answered ${received} events, not ${BACKLOG}`);
  });
}

/**
 * Times `read` of each plan's 100 events (stream, subject and first position
 * from the fill); a cleanup it returns runs after the clock stops.
 */
async function measureRawRead(
  layout: ReadLayout,
  fill: LogFill,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
  read: (target: PlanTarget) => Promise<(() => void) | void>,
): Promise<Summary> {
  const samples = await sampleLoop(plans, budget, async (plan) => {
    const t = planTarget(layout, fill, plan);
    const start = performance.now();
    const cleanup = await read(t);
    const ms = performance.now() - start;
    cleanup?.();
    return ms;
  });
  return summarize(samples);
}

export function planTarget(layout: ReadLayout, fill: LogFill, plan: SamplePlan): PlanTarget {
  const stream = fill.streams[plan.stream];
  if (stream === undefined) throw new Error(`no stream ${plan.stream}`);
  const cursorPos = stream.pos[plan.cursor] ?? 0;
  return { streamName: layout.streamOf(stream.sessionId), subject: layout.subjectOf(stream.sessionId, stream.streamId), cursorPos, startSeq: cursorPos + 1 };
}

/** What a batch direct get asks for (ADR-31); `max_bytes` as the log sends it, when given. */
export interface DirectBatchRequest {
  readonly seq: number;
  readonly next_by_subj: string;
  readonly batch: number;
  readonly max_bytes?: number;
}

/** Messages a batch direct get answers before its `204 EOB`. */
export function directBatch(nc: NatsConnection, stream: string, request: DirectBatchRequest): Promise<number> {
  return new Promise((resolve, reject) => {
    const inbox = createInbox();
    let received = 0;
    const timer = setTimeout(() => {
      sub.unsubscribe();
      reject(new Error(`batch direct get: no 204 EOB after 5 s (${received} messages)`));
    }, 5_000);
    const finish = (err: Error | undefined): void => {
      clearTimeout(timer);
      sub.unsubscribe();
      if (err === undefined) resolve(received);
      else reject(err);
    };
    const sub = nc.subscribe(inbox, {
      callback: (err, msg) => {
        if (err !== null) return finish(err);
        const code = msg.headers?.code ?? 0;
        if (code === 204) return finish(undefined);
        if (code >= 300) return finish(new Error(`batch direct get: ${code} ${msg.headers?.description ?? ''}`));
        received += 1;
      },
    });
    nc.publish(`$JS.API.DIRECT.GET.${stream}`, JSON.stringify(request), { reply: inbox });
  });
}
