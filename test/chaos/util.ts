/**
 * Small helpers shared by the chaos harness: a seeded PRNG, sleeps that an
 * abort ends early, payload digests, and the JSON-RPC facts the checker
 * needs from an event's data (never the data itself, to keep a long run's
 * memory bounded).
 */
import { createHash } from 'node:crypto';

/** A seeded PRNG (mulberry32): the same seed gives the same fault schedule and client choices. */
export interface Rng {
  /** Uniform in [0, 1). */
  next(): number;
  /** Integer in [min, max], both included. */
  int(min: number, max: number): number;
  /** True with probability `p`. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** A new generator derived from this one and `salt`, for an independent stream of choices. */
  fork(salt: number): Rng;
}

export function createRng(seed: number): Rng {
  let state = seed >>> 0;
  const next = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
  const rng: Rng = {
    next,
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    chance: (p) => next() < p,
    pick: (items) => {
      if (items.length === 0) throw new RangeError('pick from an empty list');
      return items[Math.floor(next() * items.length)]!;
    },
    fork: (salt) => createRng((Math.imul(seed ^ 0x9e3779b9, 31) + Math.imul(salt + 1, 0x85ebca6b)) >>> 0),
  };
  return rng;
}

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

/** A short digest of an event payload: what the checker compares between a client and the log. */
export function digest(data: string | Uint8Array): string {
  return createHash('sha1').update(data).digest('base64').slice(0, 16);
}

/** The JSON-RPC facts of one event's data that the checker uses. */
export type Meaning =
  | { readonly t: 'empty' }
  | { readonly t: 'progress'; readonly token: string; readonly progress: number }
  | { readonly t: 'log'; readonly seq: number }
  | { readonly t: 'response'; readonly id: string; readonly ok: boolean; readonly code?: number; readonly tether?: string; readonly text?: string }
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
    const seq = (m['params'] as { data?: { seq?: unknown } } | undefined)?.data?.seq;
    if (typeof seq === 'number') return { t: 'log', seq };
  }
  if ('id' in m && ('result' in m || 'error' in m) && !('method' in m)) {
    const id = JSON.stringify(m['id']);
    if ('result' in m) {
      const content = (m['result'] as { content?: Array<{ text?: unknown }> } | undefined)?.content;
      const text = content?.[0]?.text;
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
