import type { KV, KvEntry } from '@nats-io/kv';
import { newEpoch, newSessionId } from '@tether/protocol';
import { isCasFailure, SessionLogError, SessionLogErrorCode } from './errors.js';
import { assertSessionId } from './ids.js';
import { samePrincipal } from './principal.js';
import { unavailable } from './setup.js';

export type SessionState = 'active' | 'closed';

/** One session's registry entry (KV `tether_sessions`, key = session id). */
export interface SessionRecord {
  readonly sessionId: string;
  /** The incarnation of this session's log; every event id carries it. */
  readonly epoch: string;
  /** Digest of the principal that created the session (see `principalDigest`). */
  readonly principal: string;
  readonly state: SessionState;
  readonly createdAtMs: number;
  readonly touchedAtMs: number;
  /** Caller metadata (route, upstream URL, upstream session id, protocol version…). Never payloads. */
  readonly meta: Readonly<Record<string, string>>;
}

interface Stored {
  readonly record: SessionRecord;
  readonly revision: number;
}

/** Before a "no such session" is believed: throws when it may not be, else returns what `reread()` finds. */
export type ConfirmAbsent = (sessionId: string, reread: () => Promise<KvEntry | undefined>) => Promise<KvEntry | undefined>;

/**
 * The session registry. Every read goes to the bucket's stream leader, so a
 * session created on one instance is visible on the next request to another.
 */
export class SessionRegistry {
  readonly #kvOf: (sessionId: string) => KV;
  readonly #confirmAbsent: ConfirmAbsent;

  /**
   * `kvOf`: the registry bucket of a session's partition (`logLayout`); one
   * bucket for an unpartitioned log. `confirmAbsent` runs before a missing
   * entry is reported: it throws (`log_unavailable`) when the bucket leader
   * that said "no such key" may not be the only leader (a node cut off from
   * its peers keeps leading for seconds after they elected another:
   * `LeaderQuorumCheck.recheck`, finding 16), else returns what the read
   * asked again finds. A false "not found" ends a live session at its
   * client; a 503 is retried. The default believes the first answer (R1).
   */
  constructor(kvOf: KV | ((sessionId: string) => KV), confirmAbsent: ConfirmAbsent = async () => undefined) {
    this.#kvOf = typeof kvOf === 'function' ? kvOf : () => kvOf;
    this.#confirmAbsent = confirmAbsent;
  }

  async create(principal: string, meta: Readonly<Record<string, string>> = {}): Promise<SessionRecord> {
    const now = Date.now();
    const record: SessionRecord = {
      sessionId: newSessionId(),
      epoch: newEpoch(),
      principal,
      state: 'active',
      createdAtMs: now,
      touchedAtMs: now,
      meta: { ...meta },
    };
    try {
      // `create` fails if the key exists: with 128 random bits it never does,
      // and if it did we would refuse rather than overwrite someone's session.
      await this.#kvOf(record.sessionId).create(record.sessionId, JSON.stringify(record));
    } catch (err) {
      throw unavailable(err);
    }
    return record;
  }

  /** The session, or `undefined` when it does not exist or has idled out. */
  async get(sessionId: string): Promise<SessionRecord | undefined> {
    return (await this.#read(sessionId))?.record;
  }

  /**
   * The session if it exists, is active and belongs to `principal`; otherwise
   * `session_not_found`. A principal mismatch is indistinguishable from an
   * unknown session on purpose.
   */
  async authorize(sessionId: string, principal: string): Promise<SessionRecord> {
    const record = await this.get(sessionId);
    if (record === undefined || record.state !== 'active' || !samePrincipal(record.principal, principal)) {
      throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
    }
    return record;
  }

  /** Re-puts the entry so the bucket's max age (the idle timeout) starts again. */
  async touch(sessionId: string): Promise<SessionRecord | undefined> {
    return this.#update(sessionId, (r) => (r.state === 'active' ? { ...r, touchedAtMs: Date.now() } : undefined));
  }

  /** Replaces the metadata of an active session. */
  async setMeta(sessionId: string, meta: Readonly<Record<string, string>>): Promise<SessionRecord | undefined> {
    return this.#update(sessionId, (r) => (r.state === 'active' ? { ...r, meta: { ...meta } } : undefined));
  }

  /** Deletes the entry of a session whose id was never handed out (refused at creation). */
  async remove(sessionId: string): Promise<void> {
    try {
      await this.#kvOf(sessionId).delete(sessionId);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** Marks the session closed. Returns the closed record, or `undefined` if it was unknown. */
  async markClosed(sessionId: string): Promise<SessionRecord | undefined> {
    const updated = await this.#update(sessionId, (r) => (r.state === 'closed' ? undefined : { ...r, state: 'closed', touchedAtMs: Date.now() }));
    return updated ?? (await this.get(sessionId));
  }

  /** Compare-and-set loop: `change` returns the new record, or `undefined` for no write. */
  async #update(sessionId: string, change: (r: SessionRecord) => SessionRecord | undefined): Promise<SessionRecord | undefined> {
    for (let attempt = 0; attempt < 8; attempt += 1) {
      const stored = await this.#read(sessionId);
      if (stored === undefined) return undefined;
      const next = change(stored.record);
      if (next === undefined) return stored.record;
      try {
        await this.#kvOf(sessionId).update(sessionId, JSON.stringify(next), stored.revision);
        return next;
      } catch (err) {
        if (!isCasFailure(err)) throw unavailable(err);
        // Someone else changed the entry between our read and write: read again.
      }
    }
    throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'session entry kept changing under concurrent updates', { sessionId });
  }

  async #read(sessionId: string): Promise<Stored | undefined> {
    assertSessionId(sessionId);
    const entry = (await this.#get(sessionId)) ?? (await this.#confirmAbsent(sessionId, () => this.#get(sessionId)));
    if (entry === undefined) return undefined;
    return { record: parseRecord(sessionId, entry.string()), revision: entry.revision };
  }

  /** The session's entry, or undefined when the bucket holds none (or a delete). */
  async #get(sessionId: string): Promise<KvEntry | undefined> {
    let entry;
    try {
      entry = await this.#kvOf(sessionId).get(sessionId);
    } catch (err) {
      throw unavailable(err);
    }
    return entry === null || entry.operation !== 'PUT' ? undefined : entry;
  }
}

function parseRecord(sessionId: string, text: string): SessionRecord {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  const r = value as Partial<SessionRecord> | undefined;
  if (
    typeof r !== 'object' || r === null || r.sessionId !== sessionId || typeof r.epoch !== 'string' ||
    typeof r.principal !== 'string' || (r.state !== 'active' && r.state !== 'closed') ||
    typeof r.createdAtMs !== 'number' || typeof r.touchedAtMs !== 'number' || typeof r.meta !== 'object' || r.meta === null
  ) {
    throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'session registry entry is not a valid session record', { sessionId });
  }
  return r as SessionRecord;
}
