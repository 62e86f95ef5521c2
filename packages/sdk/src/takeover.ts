import { EndReason, EventKind } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { LogEvent, SessionLog } from '@tether/session-log';
import { errorResponse, idKey, responseIdOfBytes } from './json-rpc.js';
import type { JsonRpcId } from './json-rpc.js';
import { decodeOpening } from './stream-opening.js';
import { JsonRpcCode } from './wire.js';
import type { WriterPresence } from './writer-presence.js';

/** Events read per page while working out what an orphaned stream still owes. */
const OWED_PAGE = 256;

export type TakeoverOutcome =
  /** This instance ended the stream: an error per request it owed, then `end abandoned` (or `end complete` when it owed nothing). */
  | 'ended'
  /** Someone appended after the head we saw (the writer lives after all, or another reader ended it first): keep following. */
  | 'raced';

/**
 * Ends a POST stream whose writer is gone. An SDK server cannot continue
 * another process's tool call (there is no upstream to resume, unlike the
 * gateway), so the stream is finished in the log: one JSON-RPC error per
 * request it still owes, then the `end` marker. Every reader, on any
 * instance, then reads those and ends; a later resume is refused
 * `abandoned`. The first append is a claim that must directly follow
 * `head`, so two readers racing (or a writer that was only slow) cannot both
 * be recorded: the loser gets `writer_conflict` and just keeps following.
 */
export async function endOrphanedStream(log: SessionLog, presence: WriterPresence, sessionId: string, stream: string, head: LogEvent): Promise<TakeoverOutcome> {
  const owed = await owedRequests(log, sessionId, stream, head.seq);
  const base = { writer: presence.writerId, existing: true } as const;
  try {
    let claim: { afterSeq: number } | undefined = { afterSeq: head.seq };
    for (const id of owed ?? []) {
      const error = errorResponse(id, JsonRpcCode.writerLost, 'the server instance producing this response stopped before it finished; the request may or may not have completed', { tether: 'writer_lost' });
      await log.append(sessionId, stream, EventKind.event, Buffer.from(JSON.stringify(error), 'utf8'), { ...base, ...(claim === undefined ? {} : { claim }) });
      claim = undefined;
    }
    // Owed nothing: the writer died between its last response and its end marker. The stream is complete.
    const reason = owed !== undefined && owed.length === 0 ? EndReason.complete : EndReason.abandoned;
    await log.append(sessionId, stream, EventKind.end, new Uint8Array(), { ...base, endReason: reason, ...(claim === undefined ? {} : { claim }) });
    return 'ended';
  } catch (err) {
    if (isSessionLogError(err, 'writer_conflict') || isSessionLogError(err, 'stream_ended')) return 'raced';
    throw err;
  }
}

/**
 * The requests the stream's opening names, less the responses recorded
 * after it, in the order the opening lists them. `undefined` when the
 * opening names none (the store was used without `requestsOf`).
 */
async function owedRequests(log: SessionLog, sessionId: string, stream: string, headSeq: number): Promise<readonly JsonRpcId[] | undefined> {
  let owed: Map<string, JsonRpcId> | undefined;
  let after = { seq: 0, pos: 0 };
  while (after.seq < headSeq) {
    const page = await log.readPage(sessionId, stream, after.seq, OWED_PAGE, after.seq === 0 ? undefined : after.pos);
    if (page.length === 0) break;
    for (const event of page) {
      if (event.seq === 1 && event.kind === EventKind.prime) {
        const requests = decodeOpening(event.payload);
        if (requests !== undefined) owed = new Map(requests.map((id) => [idKey(id), id]));
      } else if (event.kind === EventKind.event && owed !== undefined) {
        const answered = responseIdOfBytes(event.payload);
        if (answered !== undefined) owed.delete(idKey(answered));
      }
    }
    const last = page[page.length - 1]!;
    after = { seq: last.seq, pos: last.pos };
  }
  return owed === undefined ? undefined : [...owed.values()];
}
