import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Span } from '@opentelemetry/api';
import { createFollowStats } from '@tether/session-log';
import type { Cursor, FollowStats, LogEvent, StreamReader } from '@tether/session-log';
import { linkToTraceparent } from '@tether/telemetry';
import type { GatewayContext } from '../context.js';
import { deliver, endWithRetry } from '../streams/deliver.js';
import type { ResumeAckOptions } from '../streams/deliver.js';
import type { Recheck } from '../streams/writer-watch.js';

export interface ServeOptions {
  readonly sessionId: string;
  readonly stream: string;
  /** Where to start: after this cursor. */
  readonly from: Cursor;
  /** Or: an accepted resume's own iterator. */
  readonly events?: (signal: AbortSignal, stats: FollowStats) => AsyncIterable<LogEvent>;
  /** Or: a reader opened before `from` was known to be the stream's end (it starts live). Closed when done. */
  readonly reader?: StreamReader;
  /** A resume: measured as a replay (span `tether.replay`, replay size and lag metrics). */
  readonly replay?: boolean;
  readonly headers: Readonly<Record<string, string>>;
  readonly priming: boolean;
  readonly primeId?: string;
  /** For a served resume: the acknowledgment frame that opens the stream (wins over `primeId`). */
  readonly resumeAck?: ResumeAckOptions;
  /** For GET streams: the token that a newer GET's `superseded` message names. */
  readonly token?: string;
  /**
   * For a stream that is still being written: its writer now (undefined
   * when not known yet: the first event read names it), and what to do when
   * that writer is found gone or lets the stream go (take it over, and
   * return the new writer). The instance's `WriterWatch` calls it; without
   * it a reader of an orphaned stream would wait until its client reconnected.
   */
  readonly writer?: { readonly current: string | undefined; readonly recheck: Recheck };
  /** The audit id of this delivery's request (`ctx.audit.open`): its end is recorded as `delivered` with the event count. */
  readonly conn?: string;
}

/** Serves one client from the log until the stream ends, the client leaves, or the instance drains. */
export async function serveFromLog(ctx: GatewayContext, req: IncomingMessage, res: ServerResponse, options: ServeOptions): Promise<void> {
  const abort = new AbortController();
  const onClose = (): void => abort.abort('client_gone');
  res.on('close', onClose);
  const unregister = ctx.local.addDelivery({
    sessionId: options.sessionId,
    stream: options.stream,
    token: options.token ?? randomBytes(8).toString('hex'),
    abort,
  });
  // Not known yet: registered under our own id (never probed) until the first event names the writer.
  const watch = options.writer === undefined ? undefined : ctx.writers.follow(options.writer.current ?? ctx.writerId, options.sessionId, options.stream, options.writer.recheck);
  const stats = createFollowStats();
  // Counted here too: in gRPC mode the log's own follow stats stay on the service.
  const replayed = { events: 0 };
  const replaySpan: Span | undefined = options.replay === true ? ctx.tracer.startSpan('tether.replay', { attributes: { 'tether.stream': options.stream, 'tether.cursor.seq': options.from.seq } }) : undefined;
  ctx.metrics.streamsOpen.add(1);
  let delivered = 0;
  let ending: string = 'ended';
  try {
    const source =
      options.events?.(abort.signal, stats) ??
      options.reader?.follow(options.from, { signal: abort.signal, stats }) ??
      ctx.log.follow(options.sessionId, options.stream, options.from, { signal: abort.signal, stats });
    const events = replaySpan === undefined ? source : linkFirst(source, replaySpan, replayed);
    const result = await deliver(res, events, {
      headers: options.headers,
      priming: options.priming,
      retryMs: ctx.config.retryMs,
      ...(options.primeId === undefined ? {} : { primeId: options.primeId }),
      ...(options.resumeAck === undefined ? {} : { resumeAck: options.resumeAck }),
      heartbeatMs: ctx.config.heartbeatMs,
      signal: abort.signal,
      // The writer watch learns of a takeover from the claim's event (it names the new writer).
      onEvent: (event: LogEvent) => {
        if (event.kind === 'event') delivered += 1;
        if (watch !== undefined && event.writer !== undefined) watch.moved(event.writer);
      },
    });
    ending = result.end === 'aborted' ? String(abort.signal.reason ?? 'aborted') : result.end;
    if (result.end === 'failed') {
      const code = (result.error as { code?: string } | undefined)?.code;
      ctx.logger.warn({ sessionId: options.sessionId, stream: options.stream, code, lastId: result.lastId }, 'stream ended by the log');
      // An explicit end: the client's next resume gets the verdict from the log.
      if (!res.writableEnded) res.end();
      return;
    }
    if (abort.signal.reason === 'drain') endWithRetry(res, ctx.config.retryMs);
    else if (!res.writableEnded) res.end();
  } finally {
    if (options.conn !== undefined) ctx.audit.record(options.sessionId, { kind: 'delivered', conn: options.conn, stream: options.stream, events: delivered, reason: ending.slice(0, 32) });
    ctx.metrics.streamsOpen.add(-1);
    if (replaySpan !== undefined) {
      replaySpan.setAttributes({
        'tether.events': replayed.events,
        'tether.events.from_log': stats.fromLog,
        'tether.events.from_live': stats.fromLive,
        'tether.log_passes': stats.logPasses,
      });
      // Delivered in all, and how many had to come from the log (how far behind the head it was).
      ctx.metrics.replayEvents.record(replayed.events);
      ctx.metrics.streamLag.record(stats.fromLog);
      replaySpan.end();
    }
    watch?.stop();
    options.reader?.close();
    res.off('close', onClose);
    unregister();
    void req;
  }
}

/**
 * Passes events through; the first one links the replay span to the trace
 * that recorded it (its `traceparent` header), so a trace view follows the
 * event from the instance that recorded it to the one that replays it.
 */
async function* linkFirst(events: AsyncIterable<LogEvent>, span: Span, counted: { events: number }): AsyncGenerator<LogEvent> {
  let first = true;
  for await (const event of events) {
    counted.events += 1;
    if (first) {
      first = false;
      const link = linkToTraceparent(event.traceparent);
      if (link !== undefined) span.addLink(link);
      span.setAttribute('tether.first_event', event.id);
    }
    yield event;
  }
}

