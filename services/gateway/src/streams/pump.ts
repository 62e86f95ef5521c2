import { SseParser, isSseLimitError } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import type { EndReason, EventKind } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { AppendOptions, AppendResult } from '@tether/session-log';
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
  /** Called with each event once the log acknowledged it, in the stream's order (see `AckedFeed`). */
  readonly onStored?: (stored: StoredEvent) => void;
}

/** One event a pump appended, as the log acknowledged it. */
export interface StoredEvent {
  readonly kind: EventKind;
  readonly payload: Uint8Array;
  readonly result: AppendResult;
  readonly upstreamId: string | undefined;
  readonly endReason: EndReason | undefined;
}

const APPEND_RETRIES = 5;
const EMPTY = new Uint8Array();
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

  const { writer, traceparent, onAppend, counters, onStored } = options;
  /** Each append's options, built as one literal (a pump appends once per upstream event). */
  const appendOptions = (upstream: string | undefined, endReason: EndReason | undefined, retry: boolean): AppendOptions => {
    const o: { -readonly [K in keyof AppendOptions]: AppendOptions[K] } = { writer, existing: true, retry };
    if (upstream !== undefined) o.upstreamId = upstream;
    if (endReason !== undefined) o.endReason = endReason;
    if (traceparent !== undefined) o.traceparent = traceparent;
    return o;
  };
  const append = async (kind: 'event' | 'prime' | 'end', payload: Uint8Array, upstream?: string, endReason?: EndReason): Promise<void> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        const startedAt = onAppend === undefined ? 0 : performance.now();
        // A pump always writes after the stream's opening prime: it is never empty.
        const result = await log.append(sessionId, stream, kind, payload, appendOptions(upstream, endReason, attempt > 1));
        onAppend?.(performance.now() - startedAt);
        onStored?.({ kind, payload, result, upstreamId: upstream, endReason });
        if (counters !== undefined) counters.appended += 1;
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
    if (!msg.hasData) {
      // An id-only event (the upstream's priming event): kept for its cursor.
      if (msg.id !== undefined) await append('prime', EMPTY, upstreamId);
      return;
    }
    await append('event', Buffer.from(msg.data, 'utf8'), upstreamId);
    for (const id of responseIds(msg.data)) outstanding.delete(id);
  };

  const finish = async (reason: 'complete' | 'abandoned' | 'deadline'): Promise<PumpOutcome> => {
    if (reason !== 'complete') {
      // Every request still waiting gets an explicit JSON-RPC error, so a
      // client never waits forever for a response that cannot come.
      for (const id of outstanding) {
        const error = { jsonrpc: '2.0', id: JSON.parse(id) as unknown, error: { code: -32001, message: `upstream response stream ${reason === 'deadline' ? 'passed its deadline' : 'was lost and could not be resumed'}`, data: { tether: reason } } };
        await append('event', Buffer.from(JSON.stringify(error)));
      }
    }
    await append('end', EMPTY, undefined, reason);
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

/**
 * JSON-encoded ids of the responses in one SSE data payload (a message or a
 * batch). Most payloads of a long stream are notifications (progress, logs):
 * a payload whose text holds neither a `"result"` nor an `"error"` key can
 * hold no response, and is not parsed. (A key spelled with a `\u` escape
 * would hide from that check, so a payload with any backslash is parsed.)
 */
export function responseIds(data: string): string[] {
  if (!data.includes('"result"') && !data.includes('"error"') && !data.includes('\\')) return [];
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

/** A body's chunks (see `untilAborted`); `return()` stops the body at any time. */
export interface BodyChunks<T> extends AsyncIterableIterator<T> {
  return(): Promise<IteratorResult<T>>;
}

/**
 * The body's chunks until `signal` aborts, then stops reading it (its
 * iterator is returned, which cancels a fetch body or destroys a response).
 * The pump must not rely on the body to notice the abort: undici can lose the
 * link between the signal given to `fetch` and the request once the Request
 * object is garbage-collected (nodejs/node#55428, nodejs/undici#4984), and a
 * deadline or drain would then wait on an upstream that never sends again.
 *
 * A plain iterator, not an async generator: one promise per read, and one
 * abort listener for the whole body (not a Promise.race per read against one
 * long-lived "aborted" promise, which left a reaction on it per chunk until
 * the body ended: the session's GET stream lives as long as its session).
 */
export function untilAborted<T>(body: AsyncIterable<T>, signal: AbortSignal): BodyChunks<T> {
  const iterator = body[Symbol.asyncIterator]();
  const reason = (): Error => (signal.reason instanceof Error ? signal.reason : new DOMException(String(signal.reason ?? 'aborted'), 'AbortError'));
  let closed = false;
  let failRead: ((err: Error) => void) | undefined;
  const onAbort = (): void => failRead?.(reason());
  signal.addEventListener('abort', onAbort, { once: true });
  const close = (): void => {
    if (closed) return;
    closed = true;
    failRead = undefined;
    signal.removeEventListener('abort', onAbort);
    // Stop the body whether we finished, broke off or were aborted. (A fetch
    // body's iterator cancels only once a pending read settles; the pump
    // does not wait for that.)
    void iterator.return?.()?.catch?.(() => undefined);
  };
  const done: IteratorReturnResult<undefined> = { done: true, value: undefined };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next(): Promise<IteratorResult<T>> {
      if (closed) return Promise.resolve(done);
      if (signal.aborted) {
        close();
        return Promise.reject(reason());
      }
      return new Promise<IteratorResult<T>>((resolve, reject) => {
        failRead = (err) => {
          close();
          reject(err);
        };
        iterator.next().then(
          (result) => {
            failRead = undefined;
            if (result.done === true) close();
            resolve(result.done === true ? done : result);
          },
          (err: unknown) => {
            close();
            reject(err);
          },
        );
      });
    },
    return(): Promise<IteratorResult<T>> {
      close();
      return Promise.resolve(done);
    },
  };
}
