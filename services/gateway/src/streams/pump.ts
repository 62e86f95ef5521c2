import { SseParser, isSseLimitError } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { Logger } from 'pino';
import type { LogPort } from '../log/log-port.js';

export type PumpOutcome = 'complete' | 'abandoned' | 'deadline' | 'stopped' | 'conflict' | 'log_failed';

export interface PumpOptions {
  readonly log: LogPort;
  /** Bound to the stream already (`child({ sessionId, stream })`): lines add only their own facts. */
  readonly logger: Logger;
  readonly sessionId: string;
  readonly stream: string;
  /** This instance's writer id, stamped on every event (`Tether-Writer`). */
  readonly writer: string;
  /** JSON-encoded ids of the requests whose responses this stream must carry (empty for the GET stream). */
  readonly outstanding: Set<string>;
  /** The upstream's SSE body. */
  readonly body: AsyncIterable<Uint8Array>;
  /** The upstream's cursor of the last recorded event (a writer taking over starts from it). */
  readonly lastUpstreamId: string | undefined;
  /** Nested resume: a new body continuing after `lastUpstreamId`, or undefined when the upstream cannot. */
  readonly reopen: (lastUpstreamId: string) => Promise<AsyncIterable<Uint8Array> | undefined>;
  /** Aborted by drain or session close (reason 'stopped'), or the deadline (reason 'deadline'). */
  readonly signal: AbortSignal;
  readonly maxEventBytes: number;
  /** The GET stream never completes: when the upstream ends it, reopen. */
  readonly endless: boolean;
  /** Trace context of the recording, stored with every event so readers elsewhere can link to it. */
  readonly traceparent?: string;
  /** Observes each append's latency (ms) until acknowledged. */
  readonly onAppend?: (ms: number) => void;
  /** Counts events appended (for the recording span). */
  readonly counters?: { appended: number };
}

const APPEND_RETRIES = 5;
const REOPEN_ATTEMPTS = 3;

/**
 * Records an upstream SSE response into the log, event by event, each one
 * acknowledged by the log before the next is read (so nothing reaches a
 * client that the log does not hold). It never depends on a client being
 * connected: it runs until the upstream completes, the deadline passes, or
 * it is stopped. A POST stream always ends with an `end` marker unless the
 * log itself failed or it was stopped (then another instance takes it over:
 * this one's presence stops answering "writing" for it).
 */
export async function pumpStream(options: PumpOptions): Promise<PumpOutcome> {
  const { log, sessionId, stream, outstanding, signal } = options;
  let upstreamId = options.lastUpstreamId;
  let body: AsyncIterable<Uint8Array> | undefined = options.body;
  let reopenAttempts = 0;

  const traceField = options.traceparent === undefined ? {} : { traceparent: options.traceparent };
  const append = async (kind: 'event' | 'prime' | 'end', payload: Uint8Array, extra: { upstreamId?: string; endReason?: 'complete' | 'abandoned' | 'deadline' }): Promise<void> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const startedAt = performance.now();
        // A pump always writes after the stream's opening prime: it is never empty.
        await log.append(sessionId, stream, kind, payload, { ...extra, ...traceField, writer: options.writer, existing: true, retry: attempt > 1 });
        options.onAppend?.(performance.now() - startedAt);
        if (options.counters !== undefined) options.counters.appended += 1;
        return;
      } catch (err) {
        // Unknown outcome: the retry says so (`retry`), and the log returns the first attempt if it landed.
        if (!isSessionLogError(err, 'log_unavailable') || attempt >= APPEND_RETRIES) throw err;
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** attempt));
      }
    }
  };

  const record = async (msg: SseMessage): Promise<void> => {
    if (msg.lastEventId !== '') upstreamId = msg.lastEventId;
    const idField = upstreamId === undefined ? {} : { upstreamId };
    if (!msg.hasData) {
      // An id-only event (the upstream's priming event): kept for its cursor.
      if (msg.id !== undefined) await append('prime', new Uint8Array(), idField);
      return;
    }
    const payload = Buffer.from(msg.data, 'utf8');
    await append('event', payload, idField);
    for (const id of responseIds(msg.data)) outstanding.delete(id);
  };

  const finish = async (reason: 'complete' | 'abandoned' | 'deadline'): Promise<PumpOutcome> => {
    if (reason !== 'complete') {
      // Every request still waiting gets an explicit JSON-RPC error, so a
      // client never waits forever for a response that cannot come.
      for (const id of outstanding) {
        const error = { jsonrpc: '2.0', id: JSON.parse(id) as unknown, error: { code: -32001, message: `upstream response stream ${reason === 'deadline' ? 'passed its deadline' : 'was lost and could not be resumed'}`, data: { tether: reason } } };
        await append('event', Buffer.from(JSON.stringify(error)), {});
      }
    }
    await append('end', new Uint8Array(), { endReason: reason });
    return reason;
  };

  try {
    while (body !== undefined) {
      const parser = new SseParser({ maxBlockBytes: options.maxEventBytes, maxLineBytes: options.maxEventBytes });
      let failed = false;
      try {
        for await (const chunk of untilAborted(body, signal)) {
          for (const msg of parser.push(chunk)) await record(msg);
          if (!options.endless && outstanding.size === 0) break;
        }
      } catch (err) {
        if (signal.aborted) break;
        if (isSessionLogError(err)) throw err;
        if (isSseLimitError(err)) {
          for (const msg of err.messages) await record(msg);
          options.logger.warn({ limitBytes: options.maxEventBytes }, 'upstream event exceeds the size limit');
          return await finish('abandoned');
        }
        failed = true;
        options.logger.info({ err: (err as Error).message }, 'upstream stream broke');
      }
      if (signal.aborted) break;
      if (!options.endless && outstanding.size === 0) return await finish('complete');
      if (!failed && !options.endless) {
        // The upstream closed cleanly without answering: nothing more will come.
        return await finish('abandoned');
      }
      body = undefined;
      if (upstreamId !== undefined && reopenAttempts < REOPEN_ATTEMPTS) {
        reopenAttempts += 1;
        body = await options.reopen(upstreamId).catch(() => undefined);
      }
      if (body === undefined && !options.endless) return await finish('abandoned');
    }
    // Stopped (drain, session close) right after the last owed response was
    // recorded: the stream is whole, so say so now; left without its end, a
    // takeover elsewhere would have to work that out from the log.
    if (!options.endless && outstanding.size === 0) return await finish('complete');
    if (signal.aborted && signal.reason === 'deadline') return await finish('deadline');
    return signal.aborted ? 'stopped' : 'abandoned';
  } catch (err) {
    if (isSessionLogError(err, 'writer_conflict') || isSessionLogError(err, 'stream_ended')) return 'conflict';
    if (isSessionLogError(err, 'session_not_found') || isSessionLogError(err, 'session_closed')) return 'stopped';
    options.logger.error({ code: (err as { code?: string }).code, err: (err as Error).message }, 'recording to the log failed');
    return 'log_failed';
  }
}

/** JSON-encoded ids of the responses in one SSE data payload (a message or a batch). */
export function responseIds(data: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const m of Array.isArray(value) ? value : [value]) {
    if (typeof m === 'object' && m !== null && 'id' in m && ('result' in m || 'error' in m) && !('method' in m)) out.push(JSON.stringify((m as { id: unknown }).id));
  }
  return out;
}

/**
 * The body's chunks until `signal` aborts, then stops reading it (its
 * iterator is returned, which cancels a fetch body or destroys a response).
 * The pump must not rely on the body to notice the abort: undici can lose the
 * link between the signal given to `fetch` and the request once the Request
 * object is garbage-collected (nodejs/node#55428, nodejs/undici#4984), and a
 * deadline or drain would then wait on an upstream that never sends again.
 */
export async function* untilAborted<T>(body: AsyncIterable<T>, signal: AbortSignal): AsyncGenerator<T, void, undefined> {
  const iterator = body[Symbol.asyncIterator]();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    if (signal.aborted) resolve('aborted');
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next === 'aborted') throw signal.reason instanceof Error ? signal.reason : new DOMException(String(signal.reason ?? 'aborted'), 'AbortError');
      if (next.done === true) return;
      yield next.value;
    }
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
    // Stop the body whether we finished, broke off or were aborted. (A fetch
    // body's iterator cancels only once a pending read settles; the pump
    // does not wait for that.)
    void iterator.return?.()?.catch?.(() => undefined);
  }
}
