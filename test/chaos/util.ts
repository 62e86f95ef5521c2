/**
 * Small helpers shared by the chaos harness: sleeps that an abort ends early,
 * payload digests, and the JSON-RPC facts the checker needs from an event's
 * data (never the data itself, to keep a long run's memory bounded). Its
 * seeded PRNG is test/shared/random.ts, shared with the benchmarks.
 */
import { createHash } from 'node:crypto';

/** Resolves after `ms`, or early (without throwing) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted === true || ms <= 0) return Promise.resolve();
  return new Promise((done) => {
    const timer = setTimeout(finish, ms);
    function finish(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', finish);
      done();
    }
    signal?.addEventListener('abort', finish, { once: true });
  });
}

/**
 * A body's chunks until any of `signals` aborts; then it stops reading and
 * throws an AbortError (listeners on each signal, no composite signal).
 */
export async function* untilAborted<T>(body: AsyncIterable<T>, signals: readonly AbortSignal[]): AsyncGenerator<T, void, undefined> {
  const iterator = body[Symbol.asyncIterator]();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<'aborted'>((resolve) => {
    onAbort = () => resolve('aborted');
    for (const s of signals) {
      if (s.aborted) resolve('aborted');
      else s.addEventListener('abort', onAbort, { once: true });
    }
  });
  try {
    for (;;) {
      const next = await Promise.race([iterator.next(), aborted]);
      if (next === 'aborted') throw new DOMException('This operation was aborted', 'AbortError');
      if (next.done === true) return;
      yield next.value;
    }
  } finally {
    for (const s of signals) if (onAbort !== undefined) s.removeEventListener('abort', onAbort);
    void iterator.return?.()?.catch?.(() => undefined);
  }
}

/** A short digest of an event payload: what the checker compares between a client and the log. */
export function digest(data: string | Uint8Array): string {
  return createHash('sha1').update(data).digest('base64').slice(0, 16);
}

/** The JSON-RPC facts of one event's data that the checker uses. */
export type Meaning =
  | { readonly t: 'empty' }
  | { readonly t: 'progress'; readonly token: string; readonly progress: number }
  | { readonly t: 'log'; readonly seq: number; readonly call: string | undefined }
  | { readonly t: 'response'; readonly id: string; readonly ok: boolean; readonly code?: number; readonly tether?: string; readonly text?: string; readonly toolError?: true }
  | { readonly t: 'other' };

/** Reads the facts out of an event's data. Total: anything unexpected is `other`. */
export function meaningOf(data: string): Meaning {
  if (data === '') return { t: 'empty' };
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return { t: 'other' };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { t: 'other' };
  const m = value as Record<string, unknown>;
  if (m['method'] === 'notifications/progress') {
    const params = m['params'] as { progressToken?: unknown; progress?: unknown } | undefined;
    if (typeof params?.progress === 'number') return { t: 'progress', token: String(params.progressToken), progress: params.progress };
  }
  if (m['method'] === 'notifications/message') {
    const data = (m['params'] as { data?: { seq?: unknown; call?: unknown } } | undefined)?.data;
    if (typeof data?.seq === 'number') return { t: 'log', seq: data.seq, call: typeof data.call === 'string' ? data.call : undefined };
  }
  if ('id' in m && ('result' in m || 'error' in m) && !('method' in m)) {
    const id = JSON.stringify(m['id']);
    if ('result' in m) {
      const result = m['result'] as { content?: Array<{ text?: unknown }>; isError?: unknown } | undefined;
      const text = result?.content?.[0]?.text;
      // A tool's `isError` result is how MCP reports a failed tool call: explicit, not a success.
      if (result?.isError === true) return { t: 'response', id, ok: false, toolError: true, ...(typeof text === 'string' ? { text } : {}) };
      return { t: 'response', id, ok: true, ...(typeof text === 'string' ? { text } : {}) };
    }
    const error = m['error'] as { code?: unknown; data?: { tether?: unknown } } | undefined;
    return {
      t: 'response',
      id,
      ok: false,
      ...(typeof error?.code === 'number' ? { code: error.code } : {}),
      ...(typeof error?.data?.tether === 'string' ? { tether: error.data.tether } : {}),
    };
  }
  return { t: 'other' };
}

/** `12.3s`-style durations for the CLI: `60s`, `5m`, `1500ms`, or a bare number of seconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(text.trim());
  if (match === null) throw new Error(`invalid duration ${JSON.stringify(text)}; use e.g. 60s, 5m or 1500ms`);
  const n = Number(match[1]);
  const unit = match[2] ?? 's';
  return Math.round(unit === 'ms' ? n : unit === 'm' ? n * 60_000 : n * 1000);
}

/** Counts by key, for summaries. */
export function bump(counts: Record<string, number>, key: string, by = 1): void {
  counts[key] = (counts[key] ?? 0) + by;
}
