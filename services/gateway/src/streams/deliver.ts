import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { encodeResumeAck, encodeSseEvent } from '@tether/protocol';
import type { LogEvent } from '@tether/session-log';
import { defaultHeartbeats } from './heartbeats.js';
import type { Heartbeats } from './heartbeats.js';

/** A served resume, acknowledged by the stream's first frame (`event: resume`, `@tether/protocol` `encodeResumeAck`). */
export interface ResumeAckOptions {
  /** The client's `Last-Event-ID`, sent back as the frame's id. */
  readonly cursor: string;
  /** The stream being resumed. */
  readonly stream: string;
  /** The seq of the next event the stream carries: the cursor's seq + 1. */
  readonly nextSeq: number;
}

export interface DeliverOptions {
  /** Headers of the 200 answer (session id, `Tether-Resume`, …). */
  readonly headers: Readonly<Record<string, string>>;
  /** Clients on 2025-11-25 or later get a `retry:` hint and priming events. */
  readonly priming: boolean;
  readonly retryMs: number;
  /** For a fresh GET: the id of the stream's current head, sent as the priming event. */
  readonly primeId?: string;
  /**
   * For a served resume: with `priming`, the stream opens with the resume
   * acknowledgment instead of a priming event (wins over `primeId`). The
   * SDK client keeps its cursor from it even if the stream ends before the
   * next event, and a client checking "the first id after a resume exceeds
   * the cursor" can tell it from a replay.
   */
  readonly resumeAck?: ResumeAckOptions;
  /** Comment heartbeats after this long without a write. */
  readonly heartbeatMs: number;
  /** The instance's heartbeat ticker. Default: one per process (`defaultHeartbeats`). */
  readonly heartbeats?: Heartbeats;
  /** Ends the delivery (client gone, session closed, superseded, drain). */
  readonly signal: AbortSignal;
  /** Sees every event read, before it is written (the writer watch follows `writer` changes): a callback, not a generator wrapped around `events`. */
  readonly onEvent?: (event: LogEvent) => void;
}

export type DeliveryEnd = 'ended' | 'aborted' | 'client_gone' | 'failed';

/**
 * Writes log events to one client as SSE, at the pace its socket drains:
 * the next event is pulled from the log only after the previous one was
 * accepted by the socket (or its `drain` fired), so a slow client costs lag,
 * never memory or events. Idle streams get comment heartbeats from the
 * instance's one ticker (`Heartbeats`), not from a timer of their own.
 */
export async function deliver(res: ServerResponse, events: AsyncIterable<LogEvent>, options: DeliverOptions): Promise<{ end: DeliveryEnd; lastId: string | undefined; error?: unknown }> {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...options.headers,
  });
  // A primed stream's headers leave with its opening frame, in one write:
  // sent apart, a lost segment and a reset between them leave an SDK client
  // a resumed response with no id, and it reconnects without its cursor
  // (finding 17, docs/reliability.md). Unprimed, the headers go at once.
  if (!options.priming) res.flushHeaders();
  let lastId: string | undefined;
  const heartbeat = (options.heartbeats ?? defaultHeartbeats).add(res, options.heartbeatMs);
  const write = async (chunk: string): Promise<boolean> => {
    heartbeat.touch();
    if (res.write(chunk)) return true;
    const drained = await Promise.race([once(res, 'drain').then(() => true), once(res, 'close').then(() => false)]);
    return drained;
  };
  try {
    if (options.priming) await write(openingFrame(options));
    const { onEvent } = options;
    for await (const event of events) {
      onEvent?.(event);
      if (res.destroyed) return { end: 'client_gone', lastId };
      if (event.kind === 'prime') {
        if (options.priming && (await write(encodeSseEvent({ id: event.id, data: '' })))) lastId = event.id;
        continue;
      }
      if (event.kind === 'end') {
        lastId = event.id;
        return { end: 'ended', lastId };
      }
      if (!(await write(encodeSseEvent({ id: event.id, data: Buffer.from(event.payload).toString('utf8') })))) return { end: 'client_gone', lastId };
      lastId = event.id;
    }
    return { end: options.signal.aborted ? 'aborted' : 'client_gone', lastId };
  } catch (err) {
    return { end: 'failed', lastId, error: err };
  } finally {
    heartbeat.remove();
  }
}

/** The first frame of a primed stream: the resume acknowledgment, or a priming event (the head's id, empty data), or a bare retry hint. */
function openingFrame(options: DeliverOptions): string {
  const { resumeAck, primeId, retryMs } = options;
  if (resumeAck !== undefined) return encodeResumeAck({ ...resumeAck, retryMs });
  return encodeSseEvent(primeId === undefined ? { retryMs } : { id: primeId, data: '', retryMs });
}

/** Ends an SSE response with a retry hint, so the client reconnects (elsewhere) promptly. */
export function endWithRetry(res: ServerResponse, retryMs: number): void {
  if (res.writableEnded || res.destroyed) return;
  if (!res.headersSent) {
    // No Tether-Resume: draining is not a verdict on the cursor, which any other instance serves.
    res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
    res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"gateway instance is draining; retry"}}');
    return;
  }
  res.end(encodeSseEvent({ retryMs }));
}
