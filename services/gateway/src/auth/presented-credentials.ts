import { HttpHeader } from '@tether/protocol';
import type { Caller } from './authenticator.js';

/**
 * What an upstream call the gateway makes on its own carries for the
 * caller whose session it serves: a GET listener and its reconnects, a
 * nested resume after a takeover, a rerun or a runner check of a task.
 * Such calls outlive the request that started them, and the caller's
 * token with them: so each one asks for the headers when it connects,
 * never once at the start.
 */
export interface CallerCredentials {
  /** The headers to send now: the newest this instance holds for the caller's principal on its route. */
  current(): Readonly<Record<string, string>>;
  /**
   * After the upstream refused `used` (401): resolves true as soon as the
   * caller has presented other credentials on this instance (at once if it
   * already has), false when `signal` aborts or `waitMs` passes first.
   */
  renewed(used: Readonly<Record<string, string>>, signal: AbortSignal, waitMs?: number): Promise<boolean>;
}

/**
 * How long a refused reconnect waits for the client's next token. A client
 * refreshes its token when it expires, which is when the upstream starts
 * refusing the old one; a few minutes covers a refresh at the client's
 * next request, and a client that never returns lets the stream go.
 */
export const RENEWAL_WAIT_MS = 5 * 60_000;

/**
 * The newest upstream credentials each principal has presented on this
 * instance, per route: in memory only, never in the log, and never shared
 * with another instance (each hears its own clients' refreshed tokens).
 * Bounded: past `maxEntries` the least recently presented goes, and a
 * call for it keeps the headers it last had.
 */
export class PresentedCredentials {
  readonly #latest = new Map<string, Readonly<Record<string, string>>>();
  readonly #waiters = new Map<string, Set<() => void>>();

  constructor(private readonly maxEntries = 100_000) {}

  /** Every authenticated request: the caller's credentials become the newest for its principal on its route. */
  present(caller: Caller): void {
    const key = keyOf(caller);
    const previous = this.#latest.get(key);
    if (previous !== undefined && sameHeaders(previous, caller.upstreamHeaders)) return;
    this.#latest.delete(key);
    if (this.#latest.size >= this.maxEntries) this.#latest.delete(this.#latest.keys().next().value!);
    this.#latest.set(key, caller.upstreamHeaders);
    const waiting = this.#waiters.get(key);
    if (waiting === undefined) return;
    this.#waiters.delete(key);
    for (const wake of waiting) wake();
  }

  /** The credentials of calls made on `caller`'s behalf; `protocolVersion` goes with every one. */
  of(caller: Caller, protocolVersion: string | undefined): CallerCredentials {
    const key = keyOf(caller);
    const withVersion = (headers: Readonly<Record<string, string>>): Readonly<Record<string, string>> =>
      protocolVersion === undefined ? headers : { ...headers, [HttpHeader.protocolVersion]: protocolVersion };
    let last = caller.upstreamHeaders;
    const current = (): Readonly<Record<string, string>> => {
      last = this.#latest.get(key) ?? last;
      return withVersion(last);
    };
    return {
      current,
      renewed: (used, signal, waitMs = RENEWAL_WAIT_MS) => {
        if (!sameHeaders(current(), used)) return Promise.resolve(true);
        if (signal.aborted) return Promise.resolve(false);
        return new Promise((resolve) => {
          let waiting = this.#waiters.get(key);
          if (waiting === undefined) this.#waiters.set(key, (waiting = new Set()));
          const settle = (renewed: boolean): void => {
            clearTimeout(timer);
            signal.removeEventListener('abort', onAbort);
            const set = this.#waiters.get(key);
            set?.delete(wake);
            if (set?.size === 0) this.#waiters.delete(key);
            resolve(renewed);
          };
          const wake = (): void => settle(true);
          const onAbort = (): void => settle(false);
          const timer = setTimeout(() => settle(false), waitMs);
          timer.unref();
          waiting.add(wake);
          signal.addEventListener('abort', onAbort, { once: true });
        });
      },
    };
  }
}

function keyOf(caller: Caller): string {
  return `${caller.route}\0${caller.principal}`;
}

function sameHeaders(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  if (a === b) return true;
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  return keys.every((k) => a[k] === b[k]);
}
