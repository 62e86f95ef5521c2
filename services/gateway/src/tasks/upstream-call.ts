import type { Counter } from '@opentelemetry/api';
import { SseParser } from '@tether/protocol';
import type { JsonObject } from '@tether/session-log';
import { callUpstream, isEventStream, UpstreamError } from '../upstream.js';

/** A JSON-RPC response to our request: its result or its error. */
export type RpcAnswer = { readonly result: JsonObject; readonly error?: undefined } | { readonly error: JsonObject; readonly result?: undefined };

/** How one upstream `tools/call` ended. */
export type CallOutcome =
  /** The upstream answered our request id (a result, an input round or an error). */
  | { readonly kind: 'answer'; readonly answer: RpcAnswer }
  /** No JSON-RPC answer came: the upstream refused at the HTTP level (400 -32020, 401, 5xx…) or sent something else. */
  | { readonly kind: 'http'; readonly status: number; readonly body: Buffer }
  /** The connection failed or broke before an answer, or `abort()` was called. */
  | { readonly kind: 'lost'; readonly reason: string; readonly aborted: boolean };

/** The answer exactly as the upstream sent it, for passing it straight back. */
export interface RawAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly chunks: readonly Buffer[];
}

export interface ToolCall {
  readonly outcome: Promise<CallOutcome>;
  /** The answer's bytes as received, while kept (`keepRaw`); undefined if the connection never answered. */
  raw(): RawAnswer | undefined;
  /** Stops keeping bytes: the call became a task, nothing will be passed back. */
  dropRaw(): void;
  /** Closes the upstream request: in 2026-07-28 closing the stream is the cancellation. */
  abort(reason: string): void;
  /** Where the call's notifications go from now on; those that came before are handed over first, in order. */
  setNotificationSink(sink: (message: Uint8Array) => void): void;
}

export interface ToolCallOptions {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
  /** Our request's id, as it is in the body. */
  readonly id: unknown;
  /** Bytes kept for passing back before the call becomes a task. */
  readonly maxRawBytes: number;
  readonly errors?: Counter;
}

/**
 * One upstream `tools/call` the gateway reads itself: a JSON answer, or an
 * event stream read until the response to our id (notifications on the
 * way go to `onNotification`). Until `dropRaw()`, the bytes are also kept,
 * so an answer that comes before the call becomes a task goes back to the
 * client byte for byte.
 */
export function startToolCall(options: ToolCallOptions): ToolCall {
  const abort = new AbortController();
  let abortReason: string | undefined;
  let raw: { status: number; headers: RawAnswer['headers']; chunks: Buffer[]; bytes: number } | undefined;
  let keepRaw = true;
  // Notifications before a sink is set (the call is not a task yet): kept, bounded.
  let early: Uint8Array[] | undefined = [];
  let sink: ((message: Uint8Array) => void) | undefined;
  const onNotification = (text: string): void => {
    const bytes = new TextEncoder().encode(text);
    if (sink !== undefined) sink(bytes);
    else if (early !== undefined && early.length < MAX_EARLY_NOTIFICATIONS) early.push(bytes);
  };

  const outcome = (async (): Promise<CallOutcome> => {
    let answer;
    try {
      answer = await callUpstream(options.url, { method: 'POST', headers: options.headers, body: options.body, signal: abort.signal, ...(options.errors === undefined ? {} : { errors: options.errors }) });
    } catch (err) {
      return lost(err, abortReason);
    }
    raw = { status: answer.status, headers: answer.headers, chunks: [], bytes: 0 };
    const keep = (chunk: Buffer): void => {
      if (!keepRaw || raw === undefined) return;
      raw.chunks.push(chunk);
      raw.bytes += chunk.length;
      if (raw.bytes > options.maxRawBytes) keepRaw = false;
    };
    try {
      if (isEventStream(answer) && answer.status === 200) {
        const parser = new SseParser();
        for await (const piece of answer.body) {
          const chunk = Buffer.from(piece);
          keep(chunk);
          for (const event of parser.push(chunk)) {
            const found = readMessage(event.data, options.id, onNotification);
            if (found !== undefined) {
              // Read no further: returning from the loop closes the stream.
              return { kind: 'answer', answer: found };
            }
          }
        }
        return { kind: 'lost', reason: 'the upstream event stream ended without an answer to the call', aborted: false };
      }
      const body = await answer.bytes();
      keep(body);
      if (answer.status === 200 || answer.status === 202) {
        const found = readMessage(body.toString('utf8'), options.id, onNotification);
        if (found !== undefined) return { kind: 'answer', answer: found };
      }
      return { kind: 'http', status: answer.status, body };
    } catch (err) {
      return lost(err, abortReason);
    }
  })();

  return {
    outcome,
    raw: () => (raw === undefined || !keepRaw ? undefined : { status: raw.status, headers: raw.headers, chunks: raw.chunks }),
    dropRaw: () => {
      keepRaw = false;
      if (raw !== undefined) raw.chunks = [];
    },
    abort: (reason) => {
      abortReason ??= reason;
      abort.abort(new Error(reason));
    },
    setNotificationSink: (next) => {
      for (const bytes of early ?? []) next(bytes);
      early = undefined;
      sink = next;
    },
  };
}

function lost(err: unknown, abortReason: string | undefined): CallOutcome {
  if (abortReason !== undefined) return { kind: 'lost', reason: abortReason, aborted: true };
  const reason = err instanceof UpstreamError ? err.message : `the upstream connection broke before it answered (${(err as Error).message ?? String(err)})`;
  return { kind: 'lost', reason, aborted: false };
}

/** Notifications kept before the call becomes a task (it has 250 ms to send them). */
const MAX_EARLY_NOTIFICATIONS = 1_000;

/** The response to our id in one JSON text (a message or a batch); notifications are handed on, anything else is skipped. */
function readMessage(text: string, id: unknown, onNotification: (text: string) => void): RpcAnswer | undefined {
  if (text === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  for (const m of Array.isArray(value) ? value : [value]) {
    if (typeof m !== 'object' || m === null) continue;
    const message = m as Record<string, unknown>;
    if (typeof message.method === 'string') {
      if (message.id === undefined) onNotification(Array.isArray(value) ? JSON.stringify(message) : text);
      continue;
    }
    if (!sameId(message.id, id)) continue;
    if (isObject(message.error)) return { error: message.error };
    if (isObject(message.result)) return { result: message.result };
  }
  return undefined;
}

const isObject = (v: unknown): v is JsonObject => typeof v === 'object' && v !== null && !Array.isArray(v);
const sameId = (a: unknown, b: unknown): boolean => a === b || (a !== undefined && a !== null && JSON.stringify(a) === JSON.stringify(b));
