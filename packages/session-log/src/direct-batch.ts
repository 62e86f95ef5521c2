import type { MsgHdrs } from '@nats-io/transport-node';
import type { LogContext } from './context.js';
import { SessionLogError, SessionLogErrorCode } from './errors.js';

/** A message as the log stores it: its stream sequence (our `pos`), headers and bytes. */
export interface StoredEvent {
  readonly seq: number;
  readonly headers: MsgHdrs | undefined;
  readonly data: Uint8Array;
}

/** What one batch direct get answered. */
export interface DirectBatch {
  /** Messages of the subject from `seq` on, in order. */
  readonly messages: readonly StoredEvent[];
  /**
   * Messages of the subject left after this batch, as the answering replica
   * counts them (its `204 EOB` says so). On a replicated stream the replica
   * may lag the leader: 0 here is "nothing more *that I hold*".
   */
  readonly pending: number;
}

/** Messages per batch direct get, for a log configured with `readBatch` (its consumer fetch size): direct reads are cheap per request, so they take more. */
export function directBatchSize(readBatch: number): number {
  return readBatch * 4;
}

/** Largest batch (in bytes of subjects, headers and payloads) a replica sends per request; one bigger message still comes alone. */
export const DIRECT_BATCH_MAX_BYTES = 1024 * 1024;

const NUM_PENDING = 'Nats-Num-Pending';
const SEQUENCE = 'Nats-Sequence';
const SUBJECT = 'Nats-Subject';
const STATUS_END_OF_BATCH = 204;
const STATUS_NOT_FOUND = 404;

/**
 * One batch direct get (nats-server 2.11+, ADR-31): up to `batch` messages of
 * `subject` from stream sequence `seq` on, in one request, with no consumer.
 * `$JS.API.DIRECT.GET.<stream>` is answered inline by any replica holding the
 * stream (a queue group), so what it returns is a true prefix of the log but
 * may end before the leader's head; callers check that against what they
 * know the log holds.
 *
 * Returns `undefined` when the answering server ignored `batch` (a 2.9/2.10
 * replica in a mixed cluster answers one message without `Nats-Num-Pending`):
 * the caller falls back to its consumer path.
 *
 * @throws SessionLogError `log_unavailable` on a timeout or an error status
 */
export async function directBatch(ctx: LogContext, subject: string, seq: number, batch: number): Promise<DirectBatch | undefined> {
  const { streamName, requestTimeoutMs } = ctx.config;
  const request = JSON.stringify({ seq, next_by_subj: subject, batch, max_bytes: DIRECT_BATCH_MAX_BYTES });
  const messages: StoredEvent[] = [];
  let replies;
  try {
    // `count` bounds the wait at batch + EOB; we stop at the EOB ourselves.
    replies = await ctx.nc.requestMany(`$JS.API.DIRECT.GET.${streamName}`, request, { strategy: 'count', maxMessages: batch + 1, maxWait: requestTimeoutMs });
  } catch (err) {
    throw unavailable(err);
  }
  try {
    for await (const msg of replies) {
      const code = msg.headers?.code ?? 0;
      if (code === STATUS_END_OF_BATCH) {
        return { messages, pending: count(msg.headers?.get(NUM_PENDING)) ?? 0 };
      }
      // Nothing of the subject at or after `seq` (the replica's view).
      if (code === STATUS_NOT_FOUND && messages.length === 0) {
        return { messages, pending: 0 };
      }
      if (code !== 0) throw unavailable(new Error(`direct get answered ${code} ${msg.headers?.description ?? ''}`.trim()));
      const headers = msg.headers;
      if (messages.length === 0 && headers?.get(NUM_PENDING) === '') {
        // A server without batch support answered a plain direct get.
        return undefined;
      }
      const at = count(headers?.get(SEQUENCE));
      if (at === undefined || headers?.get(SUBJECT) !== subject) {
        throw unavailable(new Error(`direct get answered a message without a valid ${SEQUENCE} for this subject`));
      }
      messages.push({ seq: at, headers, data: msg.data });
    }
  } catch (err) {
    throw unavailable(err);
  }
  // The replies stopped without an end of batch: the wait ran out.
  throw unavailable(new Error(`no end of batch within ${requestTimeoutMs} ms`));
}

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0|[1-9][0-9]{0,15})$/.test(text)) return undefined;
  return Number(text);
}

function unavailable(err: unknown): SessionLogError {
  if (err instanceof SessionLogError) return err;
  return new SessionLogError(SessionLogErrorCode.logUnavailable, `batch direct get failed: ${String(err)}`, {}, { cause: err });
}
