import { createHash } from 'node:crypto';
import { SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { SessionLog, SessionRecord } from '@tether/session-log';
import { CursorServiceError, ServiceErrorCode } from './errors.js';

/** Session metadata key holding the caller that opened the session. Keys under `tether.` are reserved. */
export const CALLER_META_KEY = 'tether.caller';
export const RESERVED_META_PREFIX = 'tether.';

/**
 * Caller isolation: a session belongs to the caller (token name or client
 * certificate) that opened it, recorded in its registry metadata. Every RPC
 * that names a session checks it, and another caller's session is
 * `session_not_found`, exactly like an unknown one.
 *
 * Ownership never changes and session ids are never reused, so positive
 * answers are cached (bounded); a miss reads the registry.
 */
export class CallerScope {
  readonly #log: SessionLog;
  readonly #owners = new Map<string, string>();
  readonly #max: number;

  constructor(log: SessionLog, maxCached = 100_000) {
    this.#log = log;
    this.#max = maxCached;
  }

  /** Remembers the owner of a session this instance just opened. */
  remember(sessionId: string, caller: string): void {
    this.#owners.set(sessionId, caller);
    if (this.#owners.size > this.#max) this.#owners.delete(this.#owners.keys().next().value as string);
  }

  /** True when the session exists (in any state) and belongs to `caller`. */
  async owns(sessionId: string, caller: string): Promise<boolean> {
    if (this.#owners.get(sessionId) === caller) return true;
    const record = await this.#log.getSession(sessionId);
    if (record === undefined || record.meta[CALLER_META_KEY] !== caller) return false;
    this.remember(sessionId, caller);
    return true;
  }

  /** Throws `session_not_found` unless the session belongs to `caller`. */
  async check(sessionId: string, caller: string): Promise<void> {
    if (!(await this.owns(sessionId, caller))) throw notFound(sessionId);
  }

  /** The record if it belongs to `caller` (in any state), else `session_not_found`. */
  async record(sessionId: string, caller: string): Promise<SessionRecord> {
    const record = await this.#log.getSession(sessionId);
    if (record === undefined || record.meta[CALLER_META_KEY] !== caller) throw notFound(sessionId);
    return record;
  }
}

/**
 * A caller's tag in the NATS subjects the service holds for it (task
 * cancels, admin requests): 22 base64url characters of a digest of the
 * caller, so a subject built from it is that caller's alone, and another
 * caller's id, whatever it names, never lands there. Not a secret, and no
 * secret goes into it (a caller is a token's name, never the token). The
 * digest's label is `tether-cancel` because cancels used it first: kept,
 * so their subjects stay the same across a rolling upgrade.
 */
export function callerTag(caller: string): string {
  return createHash('sha256').update('tether-cancel\0').update(caller, 'utf8').digest('base64url').slice(0, 22);
}

export function notFound(sessionId: string): SessionLogError {
  return new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
}

/** The caller's metadata without the keys the service reserves. */
export function publicMeta(meta: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta)) if (!key.startsWith(RESERVED_META_PREFIX)) out[key] = value;
  return out;
}

/**
 * Open streams (Resume, Follow, WatchControl, WatchAdmin, HoldPresence) per
 * caller. A caller at its limit gets `too_many_streams` instead of one more
 * open subscription.
 */
export class StreamLimiter {
  readonly #open = new Map<string, number>();
  readonly #max: number;

  constructor(maxPerCaller: number) {
    this.#max = maxPerCaller;
  }

  /** Counts one more stream for `caller`; call the returned function exactly once when it ends. */
  acquire(caller: string): () => void {
    const open = this.#open.get(caller) ?? 0;
    if (open >= this.#max) {
      throw new CursorServiceError(ServiceErrorCode.tooManyStreams, `this caller already has ${open} streams open (limit ${this.#max})`, {
        detail: { open, max: this.#max },
      });
    }
    this.#open.set(caller, open + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const now = (this.#open.get(caller) ?? 1) - 1;
      if (now <= 0) this.#open.delete(caller);
      else this.#open.set(caller, now);
    };
  }

  /** Streams open now, over every caller (for logs and tests). */
  get total(): number {
    let total = 0;
    for (const n of this.#open.values()) total += n;
    return total;
  }
}
