import { EventKind, STANDALONE_STREAM } from '@tether/protocol';
import { isSessionLogError, SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { LogEvent, SessionLog } from '@tether/session-log';
import { endOrphanedStream } from './takeover.js';
import type { WriterPresence } from './writer-presence.js';

/** How a reader watches the writer of the stream it follows. */
export interface WriterWatchOptions {
  /** How long the reader waits for the next event before it asks whether the writer lives. Default 500 ms. */
  readonly checkMs?: number;
  /** A writer that does not answer probes this long is taken for gone (a blocked or cut-off process). Default 3000 ms. */
  readonly silenceMs?: number;
  /** How long one probe waits for an answer. Default 500 ms. */
  readonly probeTimeoutMs?: number;
}

const TICK = Symbol('tick');

/**
 * Passes `events` (a reader of one POST stream) through, and whenever no
 * event came for `checkMs`, asks whether the stream's writer still writes
 * it (design.md, "Writer liveness per instance"): the head's `Tether-Writer`
 * is probed on its presence subject. Gone, or alive but no longer writing
 * it, or silent past `silenceMs`: the stream is ended in the log
 * (`endOrphanedStream`), and `events` then delivers that ending like any
 * other event. So a reader never waits forever on a dead instance, and never
 * skips anything: everything it yields comes from the log, in order. A
 * stream the log holds nothing of any more (retention evicted it whole, what
 * the reader had not read yet included) ends it with `stream_truncated`.
 *
 * The GET stream (`0`) has no single writer and never ends; it is passed
 * through untouched.
 */
export async function* watchWriter(
  log: SessionLog,
  presence: WriterPresence,
  sessionId: string,
  stream: string,
  events: AsyncGenerator<LogEvent, void, undefined>,
  options: WriterWatchOptions = {},
): AsyncGenerator<LogEvent, void, undefined> {
  if (stream === STANDALONE_STREAM) {
    yield* events;
    return;
  }
  const checkMs = options.checkMs ?? 500;
  const silenceMs = options.silenceMs ?? 3_000;
  const probeTimeoutMs = options.probeTimeoutMs ?? 500;
  let silentSinceMs: number | undefined;
  let emptyOnce = false;
  let ended = false;

  const check = async (): Promise<void> => {
    let head: LogEvent | undefined;
    try {
      head = await log.head(sessionId, stream);
    } catch (err) {
      // A closed session ends the reader by itself (control subject); a log
      // outage is the reader's to report. Neither is a reason to take over.
      if (isSessionLogError(err, 'session_not_found') || isSessionLogError(err, 'log_unavailable')) return;
      throw err;
    }
    // Nothing of the stream is left: retention took the rest (its end
    // included) before this reader read it, and nothing can be appended to
    // it any more. Waiting would never end; say so instead. Twice in a row,
    // for a leader still catching up may answer "none" once (writer.ts).
    if (head === undefined) {
      if (!emptyOnce) {
        emptyOnce = true;
        return;
      }
      throw new SessionLogError(SessionLogErrorCode.streamTruncated, 'the rest of this stream was evicted from the log before it was read', { sessionId, stream });
    }
    emptyOnce = false;
    if (head.kind === EventKind.end) return;
    const state = head.writer === undefined ? 'gone' : await log.probeWriter(head.writer, probeTimeoutMs, sessionId, stream);
    if (state === 'writing') {
      silentSinceMs = undefined;
      return;
    }
    if (state === 'silent') {
      silentSinceMs ??= Date.now();
      if (Date.now() - silentSinceMs < silenceMs) return;
    }
    await endOrphanedStream(log, presence, sessionId, stream, head);
  };

  let pending = events.next();
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const tick = new Promise<typeof TICK>((resolve) => (timer = setTimeout(resolve, checkMs, TICK)));
      const next = await Promise.race([pending, tick]);
      clearTimeout(timer);
      if (next === TICK) {
        await check();
        continue;
      }
      if (next.done === true) {
        ended = true;
        return;
      }
      silentSinceMs = undefined;
      yield next.value;
      pending = events.next();
    }
  } finally {
    // A pending read ends when the caller's abort signal fires; don't wait for it here.
    if (!ended) void pending.then(() => events.return(undefined), () => undefined);
  }
}
