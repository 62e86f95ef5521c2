import { once } from 'node:events';
import type { ServerResponse } from 'node:http';
import { encodeSseComment, encodeSseEvent, HttpHeader } from '@tether/protocol';
import type { LogEvent } from '@tether/session-log';

export interface DeliverOptions {
  /** Headers of the 200 answer (session id, `Tether-Resume`, …). */
  readonly headers: Readonly<Record<string, string>>;
  /** Clients on 2025-11-25 or later get a `retry:` hint and priming events. */
  readonly priming: boolean;
  readonly retryMs: number;
  /** For a fresh GET: the id of the stream's current head, sent as the priming event. */
  readonly primeId?: string;
  readonly heartbeatMs: number;
  /** Ends the delivery (client gone, session closed, superseded, drain). */
  readonly signal: AbortSignal;
}

export type DeliveryEnd = 'ended' | 'aborted' | 'client_gone' | 'failed';

/**
 * Writes log events to one client as SSE, at the pace its socket drains:
 * the next event is pulled from the log only after the previous one was
 * accepted by the socket (or its `drain` fired), so a slow client costs lag,
 * never memory or events. Idle streams get comment heartbeats.
 */
export async function deliver(res: ServerResponse, events: AsyncIterable<LogEvent>, options: DeliverOptions): Promise<{ end: DeliveryEnd; lastId: string | undefined; error?: unknown }> {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
    ...options.headers,
  });
  res.flushHeaders();
  let lastId: string | undefined;
  let lastWriteAt = Date.now();
  const write = async (chunk: string): Promise<boolean> => {
    lastWriteAt = Date.now();
    if (res.write(chunk)) return true;
    const drained = await Promise.race([once(res, 'drain').then(() => true), once(res, 'close').then(() => false)]);
    return drained;
  };
  const heartbeat = setInterval(() => {
    if (Date.now() - lastWriteAt >= options.heartbeatMs && !res.writableEnded) {
      lastWriteAt = Date.now();
      res.write(encodeSseComment('keepalive'));
    }
  }, Math.max(50, Math.floor(options.heartbeatMs / 2)));
  heartbeat.unref();
  try {
    if (options.priming) {
      const prime = options.primeId === undefined ? { retryMs: options.retryMs } : { id: options.primeId, data: '', retryMs: options.retryMs };
      await write(encodeSseEvent(prime));
    }
    for await (const event of events) {
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
    clearInterval(heartbeat);
  }
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
