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

/** Where the fill's events live: the log's stream and each session stream's subject. */
export interface LogLayout {
  readonly streamName: string;
  readonly subjectOf: (sessionId: string, stream: string) => string;
}

/**
 * The read path's floor: one batch direct get `{seq, next_by_subj, batch: 100}`
 * on core NATS, counted until the server's `204 EOB`.
 */
export function measureRawDirectBatch(
  nc: NatsConnection,
  layout: LogLayout,
  fill: LogFill,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
): Promise<Summary> {
  return measureRawRead(layout, fill, plans, budget, async (subject, startSeq) => {
    const received = await directBatch(nc, layout.streamName, { seq: startSeq, next_by_subj: subject, batch: BACKLOG });
    if (received !== BACKLOG) throw new Error(`batch direct get answered ${received} events, not ${BACKLOG}`);
  });
}

/**
 * Times `read` of each plan's 100 events (subject and first position from the
 * fill); a cleanup it returns runs after the clock stops.
 */
async function measureRawRead(
  layout: LogLayout,
  fill: LogFill,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
  read: (subject: string, startSeq: number) => Promise<(() => void) | void>,
): Promise<Summary> {
  const samples = await sampleLoop(plans, budget, async (plan) => {
    const { subject, startSeq } = target(layout, fill, plan);
    const start = performance.now();
    const cleanup = await read(subject, startSeq);
    const ms = performance.now() - start;
    cleanup?.();
    return ms;
  });
  return summarize(samples);
}

function target(layout: LogLayout, fill: LogFill, plan: SamplePlan): { subject: string; startSeq: number } {
  const stream = fill.streams[plan.stream];
  if (stream === undefined) throw new Error(`no stream ${plan.stream}`);
  return { subject: layout.subjectOf(stream.sessionId, stream.streamId), startSeq: (stream.pos[plan.cursor] ?? 0) + 1 };
}

/** Messages a batch direct get answers before its `204 EOB`. */
function directBatch(nc: NatsConnection, stream: string, request: { seq: number; next_by_subj: string; batch: number }): Promise<number> {
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
