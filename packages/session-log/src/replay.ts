import { AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import type { JsMsg } from '@nats-io/jetstream';
import { setTimeout as delay } from 'node:timers/promises';
import type { LogContext } from './context.js';
import { isNoResponders } from './errors.js';
import { directBatch, directBatchSize } from './direct-batch.js';
import type { DirectBatch, StoredEvent } from './direct-batch.js';
import { unavailable } from './setup.js';

const NANOS_PER_MS = 1_000_000;
/** A consumer a reader forgot (crash) disappears after this long. */
const CONSUMER_IDLE_MS = 60_000;
const FETCH_EXPIRES_MS = 5_000;
/** Fetches a consumer just created may answer "no responders" before it is asked again. */
const NOT_YET_RETRIES = 20;

/** Options of one replay pass. */
export interface ReplayOptions {
  /** The pass's first batch, already read (a resume's classification reads it with the cursor). */
  readonly first?: DirectBatch;
  /**
   * A stream position the log is known to hold (the leader's head at
   * classification, a live event the reader could not place). A pass whose
   * direct reads end before it asks the leader for the rest: a replica may lag.
   */
  readonly reach?: number;
}

/**
 * Stored messages of one subject after `afterPos`, in order, up to the end of
 * the log as it is when the pass starts, read the way the server allows:
 * batch direct gets on 2.11+ (one request per batch, no consumer), else an
 * ephemeral consumer. Reader-paced either way: the next batch is requested
 * only when the caller has taken the last one.
 */
export function replay(ctx: LogContext, subject: string, afterPos: number, options: ReplayOptions = {}): AsyncGenerator<StoredEvent> {
  return ctx.paths().replay === 'direct-batch' ? replayDirect(ctx, subject, afterPos, options) : replayAfter(ctx, subject, afterPos);
}

/**
 * The direct-get pass. What a replica answers is a prefix of the log (it
 * applies only committed entries), so every message it returns is exact;
 * only its end can be early. A pass that ends before `reach` finishes from
 * the leader's consumer, which decides.
 */
async function* replayDirect(ctx: LogContext, subject: string, afterPos: number, options: ReplayOptions): AsyncGenerator<StoredEvent> {
  const reach = options.reach ?? 0;
  let pos = afterPos;
  let batch: DirectBatch | undefined = options.first;
  // A batch read before the reader's live tail opened (the classification's)
  // cannot say where the log ends: an event stored between that read and the
  // tail's subscription would reach neither. Its "nothing more" is checked
  // with one read made after the tail opened, which closes the seam.
  let fresh = batch === undefined;
  let n = batch === undefined ? 0 : 1;
  for (;;) {
    if (batch === undefined) {
      batch = await directBatch(ctx, subject, pos + 1, directBatchSize(ctx.config.readBatch, n));
      n += 1;
      fresh = true;
    }
    // The replica that answered ignored `batch` (an older server in a mixed cluster).
    if (batch === undefined) return yield* replayAfter(ctx, subject, pos);
    for (const msg of batch.messages) {
      if (msg.seq <= pos) continue;
      pos = msg.seq;
      yield msg;
    }
    const more = (batch.pending > 0 && batch.messages.length > 0) || !fresh;
    batch = undefined;
    if (more) continue;
    if (pos < reach) yield* replayAfter(ctx, subject, pos);
    return;
  }
}

/**
 * The consumer pass (2.9/2.10, and the leader's word after a short direct
 * read). An ephemeral, unacknowledged,
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
    let notYet = 0;
    while (pending > 0) {
      let delivered = 0;
      try {
        const batch = await consumer.fetch({ max_messages: Math.min(readBatch, pending), expires: FETCH_EXPIRES_MS });
        for await (const msg of batch) {
          delivered += 1;
          pending = msg.info.pending;
          yield msg;
          if (pending === 0) break;
        }
      } catch (err) {
        // On a cluster a consumer just created may not answer its first
        // fetch yet ("no responders"; test/bench/r3-read-paths.ts saw 6 in
        // 400 on 2.15.1). Nothing was delivered by that fetch: ask again.
        if (!isNoResponders(err) || notYet >= NOT_YET_RETRIES) throw unavailable(err);
        notYet += 1;
        await delay(5 * notYet);
        continue;
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
