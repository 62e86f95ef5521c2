import { createHash } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { isCasFailure, SessionLogError, SessionLogErrorCode } from './errors.js';
import { unavailable } from './setup.js';

/** Is this session still open? (The registry answers; an idled-out or closed one is not.) */
export type IsOpen = (sessionId: string) => Promise<boolean>;

/** The highest `maxSessionsPerPrincipal`: a principal's entry (about 25 bytes a session) stays far below a NATS message's limit. */
export const MAX_SESSIONS_PER_PRINCIPAL = 10_000;

/** Open sessions checked per refused reservation, oldest first (bounds the reads one initialize can cause). */
const PRUNE_CHECKS = 16;
const CAS_ATTEMPTS = 8;

/**
 * Sessions per principal (DESIGN section 10), shared by every instance: one
 * entry per principal in the `tether_principals` bucket (key: SHA-256 of the
 * principal digest, hex), holding the ids of its sessions, oldest first.
 * Every change is a compare-and-set, so two instances creating sessions for
 * one principal at once cannot both take the last place.
 *
 * Sessions that idle out leave the registry without telling anyone, so the
 * list may hold dead ids. They are pruned when they matter: a principal at
 * its limit has its oldest places checked against the registry (at most
 * PRUNE_CHECKS per try; the ones still open move to the back, so the next
 * try checks others), and the reservation succeeds if that frees a place.
 * Hence the order in `SessionLog.createSession`: the session is registered
 * first and takes its place second (and is removed if refused), so a pruner
 * never mistakes a session being created on another instance for a dead one
 * (reserving first let two instances share a last place: the race test).
 */
export class PrincipalIndex {
  readonly #kv: KV;
  readonly #isOpen: IsOpen;

  constructor(kv: KV, isOpen: IsOpen) {
    this.#kv = kv;
    this.#isOpen = isOpen;
  }

  /** Takes a place for the (already registered) `sessionId`, or refuses `too_many_sessions` when `principal` already has `limit` open. */
  async reserve(principal: string, sessionId: string, limit: number): Promise<void> {
    const key = keyOf(principal);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      const { ids, revision } = await this.#read(key);
      let open = ids;
      if (open.length >= limit) open = await this.#prune(open);
      const full = open.length >= limit;
      const next = full ? open : [...open, sessionId];
      const written = await this.#write(key, next, revision);
      if (full) {
        throw new SessionLogError(SessionLogErrorCode.tooManySessions, `this principal already has ${open.length} open sessions; the limit is ${limit}`, {
          detail: { open: open.length, limit },
        });
      }
      if (written) return;
      // Another instance changed the entry between our read and write: read again.
    }
    throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'the principal entry kept changing under concurrent session creations');
  }

  /** Gives the place back (a session closed). Best effort: pruning catches what this misses. */
  async release(principal: string, sessionId: string): Promise<void> {
    const key = keyOf(principal);
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      const { ids, revision } = await this.#read(key);
      if (!ids.includes(sessionId)) return;
      if (await this.#write(key, ids.filter((id) => id !== sessionId), revision)) return;
    }
  }

  /** The oldest PRUNE_CHECKS ids: dead ones dropped, open ones moved behind the rest. */
  async #prune(ids: readonly string[]): Promise<string[]> {
    const checked = ids.slice(0, PRUNE_CHECKS);
    const open = await Promise.all(checked.map((id) => this.#isOpen(id)));
    return [...ids.slice(PRUNE_CHECKS), ...checked.filter((_, i) => open[i])];
  }

  async #read(key: string): Promise<{ ids: string[]; revision: number }> {
    let entry;
    try {
      entry = await this.#kv.get(key);
    } catch (err) {
      throw unavailable(err);
    }
    if (entry === null || entry.operation !== 'PUT') return { ids: [], revision: entry?.revision ?? 0 };
    let value: { sessions?: unknown };
    try {
      value = JSON.parse(entry.string()) as { sessions?: unknown };
    } catch {
      value = {};
    }
    const ids = Array.isArray(value.sessions) ? value.sessions.filter((id): id is string => typeof id === 'string') : [];
    return { ids, revision: entry.revision };
  }

  /** Compare-and-set against `revision` (0: the key must not exist). False when someone else wrote first. */
  async #write(key: string, ids: readonly string[], revision: number): Promise<boolean> {
    const value = JSON.stringify({ sessions: ids });
    try {
      if (revision === 0) await this.#kv.create(key, value);
      else await this.#kv.update(key, value, revision);
      return true;
    } catch (err) {
      if (isCasFailure(err)) return false;
      throw unavailable(err);
    }
  }
}

function keyOf(principal: string): string {
  return createHash('sha256').update(principal, 'utf8').digest('hex');
}
