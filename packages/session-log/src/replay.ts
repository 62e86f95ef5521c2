import type { LogContext } from './context.js';
import { directBatch, directBatchSize, RESUME_FIRST_BATCH } from './direct-batch.js';
import type { DirectBatch, StoredEvent } from './direct-batch.js';
import { unavailable } from './setup.js';

/** Options of one replay pass. */
export interface ReplayOptions {
  /** The pass's first batch, already read (a resume's classification reads it with the cursor). */
  readonly first?: DirectBatch;
  /**
   * `first` was read after the reader's live tail opened: its end of batch
   * (nothing more pending) is the log's end, with no read to confirm it.
   */
  readonly firstIsFresh?: boolean;
  /**
   * A stream position the log is known to hold (the leader's head at
   * classification, a live event the reader could not place). A pass whose
   * direct reads end before it asks the leader for the rest: a replica may lag.
   */
  readonly reach?: number;
}

/**
 * Stored messages of one subject after `afterPos`, in order, up to the end of
 * the log as it is when the pass starts: batch direct gets (one request per
 * batch, no consumer), reader-paced: the next batch is requested only when
 * the caller has taken the last one.
 *
 * What a replica answers is a prefix of the log (it applies only committed
 * entries), so every message it returns is exact; only its end can be early.
 * A pass that ends before `reach` finishes from the leader, which decides.
 */
export async function* replay(ctx: LogContext, subject: string, afterPos: number, options: ReplayOptions = {}): AsyncGenerator<StoredEvent> {
  const reach = options.reach ?? 0;
  let pos = afterPos;
  let batch: DirectBatch | undefined = options.first;
  // A batch read before the reader's live tail opened (the classification's)
  // cannot say where the log ends: an event stored between that read and the
  // tail's subscription would reach neither. Its "nothing more" is checked
  // with one read made after the tail opened, which closes the seam.
  let fresh = batch === undefined || options.firstIsFresh === true;
  let n = batch === undefined ? 0 : RESUME_FIRST_BATCH + 1;
  for (;;) {
    if (batch === undefined) {
      batch = await directBatch(ctx, subject, pos + 1, directBatchSize(ctx.config.readBatch, n));
      n += 1;
      fresh = true;
    }
    // The replica that answered ignored `batch` (a node older than 2.11 in a cluster being upgraded): the leader decides.
    if (batch === undefined) return yield* replayFromLeader(ctx, subject, pos, Number.MAX_SAFE_INTEGER);
    for (const msg of batch.messages) {
      if (msg.seq <= pos) continue;
      pos = msg.seq;
      yield msg;
    }
    const more = (batch.pending > 0 && batch.messages.length > 0) || !fresh;
    batch = undefined;
    if (more) continue;
    if (pos < reach) yield* replayFromLeader(ctx, subject, pos, reach);
    return;
  }
}

/**
 * The leader's word after a replica's short answer: one leader get per
 * message (`next_by_subj`), up to `reach`, or to the subject's end. Only the
 * few events a lagging replica had not applied yet come this way, so one
 * message per request costs less than a consumer's create, fetch and delete.
 */
async function* replayFromLeader(ctx: LogContext, subject: string, afterPos: number, reach: number): AsyncGenerator<StoredEvent> {
  let pos = afterPos;
  while (pos < reach) {
    let msg;
    try {
      // `next_by_subj` is accepted by the leader's STREAM.MSG.GET; the client's type only lists it for direct gets.
      msg = await ctx.jsm.streams.getMessage(ctx.config.streamName, { seq: pos + 1, next_by_subj: subject } as unknown as { seq: number });
    } catch (err) {
      throw unavailable(err);
    }
    if (msg === null) return;
    pos = msg.seq;
    yield { seq: msg.seq, headers: msg.header, data: msg.data };
  }
}
