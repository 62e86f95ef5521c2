import { randomBytes } from 'node:crypto';
import type { KV } from '@nats-io/kv';
import { isCasFailure, SessionLogError, SessionLogErrorCode } from './errors.js';
import { assertSessionId, assertStreamId } from './ids.js';
import { unavailable } from './setup.js';
import { leaseKeyOf } from './wire.js';

/**
 * A writer lease: who appends to one session stream, and until when.
 *
 * CAVEAT (DESIGN section 4): expiry is judged by wall clocks that may
 * disagree, and a writer may outlive its lease (a pause, a partition), so a
 * lease makes a second writer *unlikely*, not impossible. (On nats-server
 * 2.9.x, before the floor, KV compare-and-set did not even exclude two
 * writers during leader changes: nats-server#4320.) Safety does not rest on it: appends carry
 * the expected-last-subject-sequence tripwire, duplicate acks are verified,
 * and every reader verifies the `Tether-Prev` chain, so two writers surface as
 * an explicit `diverged`/`writer_conflict`, never as a silent fork.
 */
export interface Lease {
  readonly sessionId: string;
  readonly stream: string;
  /** Who holds it: an instance id, for logs and for "is it mine". */
  readonly owner: string;
  /** Random per acquisition: a restarted owner with the same name does not inherit it. */
  readonly token: string;
  readonly expiresAtMs: number;
  /** KV revision of the entry, for compare-and-set. */
  readonly revision: number;
}

interface LeaseValue {
  readonly owner: string;
  readonly token: string;
  readonly expiresAtMs: number;
}

export class LeaseTable {
  readonly #kvOf: (sessionId: string) => KV;

  /** `kvOf`: the lease bucket of a session's partition (`logLayout`); one bucket for an unpartitioned log. */
  constructor(kvOf: KV | ((sessionId: string) => KV)) {
    this.#kvOf = typeof kvOf === 'function' ? kvOf : () => kvOf;
  }

  /**
   * Takes the lease if it is free, expired, or already ours (same owner);
   * otherwise `lease_held` with the holder and its expiry.
   */
  async acquire(sessionId: string, stream: string, owner: string, ttlMs: number): Promise<Lease> {
    const key = keyOf(sessionId, stream);
    const value: LeaseValue = { owner, token: randomBytes(9).toString('base64url'), expiresAtMs: Date.now() + ttlMs };
    // Most leases are of streams just opened: try to create the key first (one
    // round trip); only a key that exists needs the read and compare-and-set.
    try {
      const revision = await this.#kvOf(sessionId).create(key, JSON.stringify(value));
      return { sessionId, stream, ...value, revision };
    } catch (err) {
      if (!isCasFailure(err)) throw unavailable(err);
    }
    const current = await this.#read(sessionId, key);
    try {
      if (current === undefined) {
        const revision = await this.#kvOf(sessionId).create(key, JSON.stringify(value));
        return { sessionId, stream, ...value, revision };
      }
      if (current.value.owner !== owner && current.value.expiresAtMs > Date.now()) {
        throw new SessionLogError(SessionLogErrorCode.leaseHeld, `stream ${stream} is written by ${current.value.owner}`, {
          sessionId,
          stream,
          holder: current.value.owner,
          detail: { expiresAtMs: current.value.expiresAtMs },
        });
      }
      const revision = await this.#kvOf(sessionId).update(key, JSON.stringify(value), current.revision);
      return { sessionId, stream, ...value, revision };
    } catch (err) {
      if (err instanceof SessionLogError) throw err;
      if (isCasFailure(err)) {
        throw new SessionLogError(SessionLogErrorCode.leaseHeld, `stream ${stream} lease was taken concurrently`, { sessionId, stream });
      }
      throw unavailable(err);
    }
  }

  /** Extends our lease; `lease_lost` if someone else took it meanwhile. */
  async renew(lease: Lease, ttlMs: number): Promise<Lease> {
    const value: LeaseValue = { owner: lease.owner, token: lease.token, expiresAtMs: Date.now() + ttlMs };
    try {
      const revision = await this.#kvOf(lease.sessionId).update(keyOf(lease.sessionId, lease.stream), JSON.stringify(value), lease.revision);
      return { ...lease, expiresAtMs: value.expiresAtMs, revision };
    } catch (err) {
      if (isCasFailure(err)) throw lost(lease);
      throw unavailable(err);
    }
  }

  /** Gives the lease up so the next writer need not wait for expiry. Releasing a lost lease is a no-op. */
  async release(lease: Lease): Promise<void> {
    try {
      await this.#kvOf(lease.sessionId).delete(keyOf(lease.sessionId, lease.stream), { previousSeq: lease.revision });
    } catch (err) {
      if (!isCasFailure(err)) throw unavailable(err);
    }
  }

  /** The current holder, or `undefined` when free or expired. */
  async holder(sessionId: string, stream: string): Promise<Omit<Lease, 'revision'> | undefined> {
    const current = await this.#read(sessionId, keyOf(sessionId, stream));
    if (current === undefined || current.value.expiresAtMs <= Date.now()) return undefined;
    return { sessionId, stream, ...current.value };
  }

  async #read(sessionId: string, key: string): Promise<{ value: LeaseValue; revision: number } | undefined> {
    let entry;
    try {
      entry = await this.#kvOf(sessionId).get(key);
    } catch (err) {
      throw unavailable(err);
    }
    if (entry === null) return undefined;
    if (entry.operation !== 'PUT') return { value: { owner: '', token: '', expiresAtMs: 0 }, revision: entry.revision };
    const value = JSON.parse(entry.string()) as LeaseValue;
    return { value, revision: entry.revision };
  }
}

function lost(lease: Lease): SessionLogError {
  return new SessionLogError(SessionLogErrorCode.leaseLost, `lease on stream ${lease.stream} is no longer held by ${lease.owner}`, {
    sessionId: lease.sessionId,
    stream: lease.stream,
  });
}

/** The lease key, from ids checked first: a malformed one is `invalid_argument`, never a strange KV key. */
function keyOf(sessionId: string, stream: string): string {
  assertSessionId(sessionId);
  assertStreamId(stream);
  return leaseKeyOf(sessionId, stream);
}
