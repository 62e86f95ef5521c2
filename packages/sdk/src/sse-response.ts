import { EventKind } from '@tether/protocol';
import { encodeSseComment, encodeSseEvent } from '@tether/protocol';
import type { LogEvent } from '@tether/session-log';

export interface SseResponseOptions {
  readonly headers: Readonly<Record<string, string>>;
  /** Frames sent before the first event (a priming event, the resume acknowledgment). */
  readonly opening?: string;
  /** A comment frame this often, so idle intermediaries keep the connection. Default 15 000 ms (the SDKs' default); 0: none. */
  readonly keepAliveMs?: number;
}

/**
 * A `text/event-stream` Response fed from the log, read as the client takes
 * it (a slow client holds the reader back instead of filling memory). Every
 * frame is an event the log acknowledged; primes carry no message and are
 * not sent. The response ends after the stream's `end`. When the client
 * goes away, `abort` ends the reader.
 */
export function sseResponse(events: AsyncGenerator<LogEvent, void, undefined>, abort: AbortController, options: SseResponseOptions): Response {
  const encoder = new TextEncoder();
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  let keepAlive: NodeJS.Timeout | undefined;
  const stop = (): void => {
    clearInterval(keepAlive);
    abort.abort();
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      if (options.opening !== undefined && options.opening !== '') controller.enqueue(encoder.encode(options.opening));
      if (keepAliveMs > 0) {
        keepAlive = setInterval(() => {
          try {
            controller.enqueue(encoder.encode(encodeSseComment('keepalive')));
          } catch {
            clearInterval(keepAlive);
          }
        }, keepAliveMs);
        keepAlive.unref();
      }
    },
    async pull(controller) {
      try {
        for (;;) {
          const next = await events.next();
          if (next.done === true) {
            stop();
            controller.close();
            return;
          }
          const event = next.value;
          if (event.kind !== EventKind.event) continue;
          controller.enqueue(encoder.encode(encodeSseEvent({ event: 'message', id: event.id, data: Buffer.from(event.payload).toString('utf8') })));
          return;
        }
      } catch (err) {
        // A broken chain, an eviction, a closed session: the client sees the
        // stream end (and resumes, getting the verdict), never a silent skip.
        stop();
        controller.error(err);
      }
    },
    cancel() {
      stop();
      void events.return(undefined);
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', 'x-accel-buffering': 'no', ...options.headers } });
}
