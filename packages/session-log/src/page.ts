import type { LogContext } from './context.js';
import { SessionLogError, SessionLogErrorCode } from './errors.js';
import { decodeLogEvent } from './event.js';
import type { Cursor, LogEvent } from './event.js';
import { replay } from './replay.js';

export interface PageQuery {
  readonly afterSeq: number;
  readonly limit: number;
  /** Position of the event at `afterSeq`, when known: the page then starts there instead of scanning. */
  readonly afterPos?: number;
}

/**
 * A page of stored events, for polling. With `afterPos` the page is chained
 * to the caller's cursor exactly like a resume; with only `afterSeq` the
 * stream is scanned from its oldest retained event, and a page that would
 * have to start with an evicted event is `stream_truncated`.
 */
export async function readPage(ctx: LogContext, sessionId: string, stream: string, epoch: string, query: PageQuery): Promise<LogEvent[]> {
  const { afterSeq, limit } = query;
  if (!Number.isSafeInteger(afterSeq) || afterSeq < 0 || !Number.isSafeInteger(limit) || limit < 1 || limit > 10_000) {
    throw new SessionLogError(SessionLogErrorCode.invalidArgument, 'afterSeq must be an integer >= 0 and limit an integer from 1 to 10000', { sessionId, stream });
  }
  const page: LogEvent[] = [];
  let last: Cursor | undefined = query.afterPos === undefined ? undefined : { seq: afterSeq, pos: query.afterPos };
  const where = { sessionId, stream };
  for await (const msg of replay(ctx, ctx.subjects.log(sessionId, stream), last?.pos ?? 0)) {
    const decoded = decodeLogEvent(sessionId, stream, msg.seq, msg.headers, msg.data);
    if (!decoded.ok || decoded.event.epoch !== epoch) {
      throw new SessionLogError(SessionLogErrorCode.streamDiverged, 'an event in the log has malformed chain headers', { ...where, pos: msg.seq });
    }
    const event = decoded.event;
    if (last === undefined) {
      // Scanning: the first retained event is our anchor.
      if (event.seq > afterSeq + 1) {
        throw new SessionLogError(SessionLogErrorCode.streamTruncated, 'the events after afterSeq were evicted from the log', { ...where, seq: event.seq, expectedSeq: afterSeq + 1 });
      }
    } else if (event.seq !== last.seq + 1 || event.prev !== last.pos) {
      const code = event.seq > last.seq + 1 ? SessionLogErrorCode.streamTruncated : SessionLogErrorCode.streamDiverged;
      throw new SessionLogError(code, 'the log breaks the chain of this stream', { ...where, seq: event.seq, pos: event.pos, expectedSeq: last.seq + 1 });
    }
    last = { seq: event.seq, pos: event.pos };
    if (event.seq > afterSeq) page.push(event);
    if (page.length >= limit) break;
  }
  return page;
}
