import { samePrincipal, SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { ControlMessage, SessionRecord } from '@tether/session-log';

/** Records kept; the least recently used goes past this. */
const MAX_RECORDS = 10_000;

interface Cached {
  record: SessionRecord;
  /** When we last saw the registry's idle clock start again (ours or the record's). */
  touchedAtMs: number;
}

/**
 * Session records cached on this instance, so a POST or GET of a session
 * it has seen needs no registry read before the upstream call. A record
 * changes in one way that matters, it closes, and every close is broadcast
 * on `<prefix>.ctl.<session>` (`closed`): the connection's one control
 * subscription (`SessionLog.listenAllControl`) drops the entry on any
 * instance's close. The other way a
 * session ends is the registry's idle timeout; an entry whose idle clock
 * (as far as this instance knows) ran out is read again. Principal and
 * metadata never change after creation, so authorizing from the cache is
 * the same decision the registry would make.
 *
 * Misses, mismatched principals and closed sessions still go to the
 * registry: the cache only ever answers "yes, active, yours".
 */
export class SessionCache {
  readonly #records = new Map<string, Cached>();
  readonly #unlisten: () => void;
  /** Closes heard so far: a read during which any close was heard is not cached (its answer may predate the close). */
  #closes = 0;

  constructor(
    listenAll: (listener: (sessionId: string, message: ControlMessage) => void) => () => void,
    private readonly idleMs: number,
    private readonly read: (sessionId: string, principal: string) => Promise<SessionRecord>,
  ) {
    this.#unlisten = listenAll((sessionId, message) => {
      if (message.type !== 'closed') return;
      this.#closes += 1;
      this.#records.delete(sessionId);
    });
  }

  async authorize(sessionId: string, principal: string): Promise<SessionRecord> {
    const cached = this.#records.get(sessionId);
    if (cached !== undefined && Date.now() - cached.touchedAtMs < this.idleMs) {
      if (!samePrincipal(cached.record.principal, principal)) {
        throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
      }
      // Most recently used last.
      this.#records.delete(sessionId);
      this.#records.set(sessionId, cached);
      return { ...cached.record, touchedAtMs: cached.touchedAtMs };
    }
    const closes = this.#closes;
    const record = await this.read(sessionId, principal);
    if (this.#closes === closes) this.remember(record);
    return record;
  }

  /** This instance restarted the session's idle clock. */
  touched(sessionId: string): void {
    const cached = this.#records.get(sessionId);
    if (cached !== undefined) cached.touchedAtMs = Date.now();
  }

  forget(sessionId: string): void {
    this.#records.delete(sessionId);
  }

  close(): void {
    this.#unlisten();
    this.#records.clear();
  }

  /** Keeps an active record (one this instance just created or read). */
  remember(record: SessionRecord): void {
    if (record.state !== 'active') return;
    this.#records.delete(record.sessionId);
    this.#records.set(record.sessionId, { record, touchedAtMs: record.touchedAtMs });
    if (this.#records.size > MAX_RECORDS) this.#records.delete(this.#records.keys().next().value as string);
  }
}
