import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import type { JsMsg } from '@nats-io/jetstream';
import type { LogContext } from './context.js';
import { unavailable } from './setup.js';

const NANOS_PER_MS = 1_000_000;
/** A consumer a reader forgot (crash) disappears after this long. */
const CONSUMER_IDLE_MS = 60_000;
const FETCH_EXPIRES_MS = 5_000;

/**
 * Stored messages of one subject after `afterPos`, in order, up to the end
 * of the log as it is when the pass starts. An ephemeral, unacknowledged,
 * memory-backed consumer with a single subject filter (2.9-compatible) is
 * pulled one batch at a time, and only when the caller asks for more: the
 * reader sets the pace and at most one batch is held.
 */
export async function* replayAfter(ctx: LogContext, subject: string, afterPos: number): AsyncGenerator<JsMsg> {
  const { streamName, readBatch } = ctx.config;
  let info;
  try {
    info = await ctx.jsm.consumers.add(streamName, {
      filter_subject: subject,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: afterPos + 1,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      num_replicas: 1,
      inactive_threshold: CONSUMER_IDLE_MS * NANOS_PER_MS,
    });
  } catch (err) {
    throw unavailable(err);
  }
  try {
    let pending = info.num_pending;
    if (pending === 0) return;
    // Built from the add() answer: no second round trip for its info.
    const consumer = ctx.js.consumers.getConsumerFromInfo(info);
    while (pending > 0) {
      let delivered = 0;
      const batch = await consumer.fetch({ max_messages: Math.min(readBatch, pending), expires: FETCH_EXPIRES_MS });
      for await (const msg of batch) {
        delivered += 1;
        pending = msg.info.pending;
        yield msg;
        if (pending === 0) break;
      }
      // Messages counted as pending may be evicted before we fetch them; an
      // empty batch means there is nothing more to get. The caller's chain
      // check turns any hole this leaves into an explicit error.
      if (delivered === 0) return;
    }
  } finally {
    // Fire and forget: the inactivity threshold collects it if this fails.
    ctx.jsm.consumers.delete(streamName, info.name).catch(() => undefined);
  }
}
