import { createInbox } from '@nats-io/transport-node';
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

/**
 * Messages the `n`-th batch direct get of a pass asks for: `readBatch`,
 * then twice as many each time up to 4 × `readBatch`. A small first batch
 * puts the first events in the client's hands sooner; a reader that keeps
 * draining gets larger batches and fewer requests. A resume's
 * classification reads its batch as the second (`RESUME_FIRST_BATCH`): it
 * returns only once that batch is in, and a backlog it holds whole needs no
 * other read.
 */
export const RESUME_FIRST_BATCH = 1;

export function directBatchSize(readBatch: number, n: number): number {
  return readBatch * 2 ** Math.min(n, 2);
}

/** Largest batch (in bytes of subjects, headers and payloads) a replica sends per request; one bigger message still comes alone. */
export const DIRECT_BATCH_MAX_BYTES = 256 * 1024;

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
 * Returns `undefined` when the answering server ignored `batch` (a replica
 * older than 2.11 in a cluster being upgraded answers one message without
 * `Nats-Num-Pending`): the caller asks the leader instead.
 *
 * @throws SessionLogError `log_unavailable` on a second timeout (a first is asked again) or an error status
 */
export async function directBatch(ctx: LogContext, subject: string, seq: number, batch: number): Promise<DirectBatch | undefined> {
  try {
    return await directBatchOnce(ctx, subject, seq, batch);
  } catch (err) {
    // Asked once more after a timeout: a node killed while it answered takes
    // the requests in flight to it, also those of partitions it did not lead
    // (every R3 node holds a replica of each), and the queue group sends the
    // retry to a live replica. Seen as a resume of an untouched partition
    // failing 'no end of batch' during partition-failover.int.test.ts.
    if ((err as { cause?: unknown }).cause instanceof BatchTimeout) return directBatchOnce(ctx, subject, seq, batch);
    throw err;
  }
}

/** No end of batch within the request timeout: the reply, or the replica, was lost. */
class BatchTimeout extends Error {}

function directBatchOnce(ctx: LogContext, subject: string, seq: number, batch: number): Promise<DirectBatch | undefined> {
  const { nc, config } = ctx;
  const request = JSON.stringify({ seq, next_by_subj: subject, batch, max_bytes: DIRECT_BATCH_MAX_BYTES });
  return new Promise((resolve, reject) => {
    const messages: StoredEvent[] = [];
    // A callback on a private inbox, not `requestMany`'s async iterator: a
    // batch is up to a few hundred replies, and a promise per reply was a
    // large share of a resume's client CPU.
    const inbox = createInbox((nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix);
    const finish = (outcome: DirectBatch | undefined | Error): void => {
      clearTimeout(timer);
      sub.unsubscribe();
      if (outcome instanceof Error) reject(unavailable(outcome));
      else resolve(outcome);
    };
    const sub = nc.subscribe(inbox, {
      max: batch + 1,
      callback: (err, msg) => {
        if (err !== null) return finish(err);
        const headers = msg.headers;
        const code = headers?.code ?? 0;
        if (code === STATUS_END_OF_BATCH) return finish({ messages, pending: count(headers?.get(NUM_PENDING)) ?? 0 });
        // Nothing of the subject at or after `seq` (the replica's view).
        if (code === STATUS_NOT_FOUND && messages.length === 0) return finish({ messages, pending: 0 });
        if (code !== 0) return finish(new Error(`direct get answered ${code} ${headers?.description ?? ''}`.trim()));
        // A server without batch support answered a plain direct get.
        if (messages.length === 0 && headers?.get(NUM_PENDING) === '') return finish(undefined);
        const at = count(headers?.get(SEQUENCE));
        if (at === undefined || headers?.get(SUBJECT) !== subject) return finish(new Error(`direct get answered a message without a valid ${SEQUENCE} for this subject`));
        messages.push({ seq: at, headers, data: msg.data });
        if (messages.length > batch) finish(new Error('direct get answered more messages than the batch asked for'));
      },
    });
    const timer = setTimeout(() => finish(new BatchTimeout(`no end of batch within ${config.requestTimeoutMs} ms`)), config.requestTimeoutMs);
    try {
      nc.publish(`$JS.API.DIRECT.GET.${config.streamName}`, request, { reply: inbox });
    } catch (err) {
      finish(err instanceof Error ? err : new Error(String(err)));
    }
  });
}

function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^(0|[1-9][0-9]{0,15})$/.test(text)) return undefined;
  return Number(text);
}

function unavailable(err: unknown): SessionLogError {
  if (err instanceof SessionLogError) return err;
  return new SessionLogError(SessionLogErrorCode.logUnavailable, `batch direct get failed: ${String(err)}`, {}, { cause: err });
}
