import { DEFAULT_MAX_TRACKED_IDS, StreamHistory } from './check.js';
import type { JsonRpcId } from './rpc.js';

/** How a session was opened, kept so the guard can open a new one the same way. */
export interface InitRecord {
  readonly url: string;
  readonly body: string;
  /** Request headers of the `initialize` POST, session headers removed. */
  readonly headers: ReadonlyArray<readonly [string, string]>;
}

/** One SSE stream as the guard tracks it: a POST response or the GET stream, with its continuations. */
export interface StreamEntry {
  readonly history: StreamHistory;
  /** JSON-RPC requests answered on this stream: failed for the client if the stream is aborted. */
  readonly requestIds: readonly JsonRpcId[];
  /** Set after a violation: every later resume of this stream is refused without asking the server. */
  dead: boolean;
  /** Its pending requests were failed for the client (once is enough). */
  failed: boolean;
}

/** What the guard knows about one MCP session. */
export class SessionState {
  readonly id: string;
  readonly init: InitRecord | undefined;
  /** A POST on this session was answered with JSON. */
  sawJson = false;
  /** Some stream of this session carried event ids. */
  sawIds = false;
  /** The new session, once a re-initialization has started. */
  replacement: Promise<string | undefined> | undefined;
  /**
   * Cursors whose resume was answered 401, oldest first: the client is
   * re-authenticating, and the SDK v1 client (1.32) then reopens the
   * stream without its cursor (`_authThenStart` restarts with no
   * resumption token). The guard puts the cursor back on that request.
   */
  readonly resumesAwaitingAuth: { readonly cursor: string; readonly atMs: number }[] = [];
  readonly #byEventId = new Map<string, StreamEntry>();
  readonly #maxIds: number;

  constructor(id: string, init: InitRecord | undefined, maxIds: number) {
    this.id = id;
    this.init = init;
    this.#maxIds = maxIds;
  }

  newStream(requestIds: readonly JsonRpcId[]): StreamEntry {
    return { history: new StreamHistory(this.#maxIds), requestIds, dead: false, failed: false };
  }

  /** The stream that delivered `eventId`, if it is still remembered. */
  streamOf(eventId: string): StreamEntry | undefined {
    return this.#byEventId.get(eventId);
  }

  /** Indexes ids the client has now consumed on `entry`. Bounded per session, oldest forgotten first. */
  indexIds(entry: StreamEntry, ids: readonly string[]): void {
    if (ids.length > 0) this.sawIds = true;
    for (const id of ids) {
      this.#byEventId.delete(id);
      this.#byEventId.set(id, entry);
    }
    dropOldest(this.#byEventId, this.#maxIds);
  }
}

/** Retired sessions whose cursors are remembered (each holds at most `maxTrackedIds` ids). */
const MAX_RETIRED_STATES = 16;

/** Options of `SessionTable`. */
export interface SessionTableOptions {
  /** Event ids remembered per session (and per stream). Default 10 000. */
  maxTrackedIds?: number;
  /** Sessions remembered; the least recently used is forgotten first. Default 64. */
  maxSessions?: number;
}

/**
 * Sessions by id, plus aliases from a retired session to its replacement:
 * the SDK transport keeps sending the old `Mcp-Session-Id` until a POST
 * answer tells it the new one, so the guard rewrites it meanwhile.
 */
export class SessionTable {
  readonly #sessions = new Map<string, SessionState>();
  readonly #aliases = new Map<string, string>();
  readonly #retired = new Set<string>();
  /** What the guard knew of retired sessions, most recent last: their cursors must never reach a replacement. */
  readonly #retiredStates = new Map<string, SessionState>();
  readonly #maxIds: number;
  readonly #maxSessions: number;

  constructor(options: SessionTableOptions = {}) {
    this.#maxIds = options.maxTrackedIds ?? DEFAULT_MAX_TRACKED_IDS;
    this.#maxSessions = options.maxSessions ?? 64;
  }

  /** The session that `id` stands for now, following re-initializations. */
  resolve(id: string): string {
    let cur = id;
    for (let hops = 0; hops < 32; hops++) {
      const next = this.#aliases.get(cur);
      if (next === undefined) return cur;
      cur = next;
    }
    return cur;
  }

  isRetired(id: string): boolean {
    return this.#retired.has(id);
  }

  /** The state of `id`, created empty (no init record) if the guard joined late. */
  get(id: string): SessionState {
    let s = this.#sessions.get(id);
    if (s === undefined) return this.open(id, undefined);
    this.#sessions.delete(id);
    this.#sessions.set(id, s);
    return s;
  }

  open(id: string, init: InitRecord | undefined): SessionState {
    const s = new SessionState(id, init, this.#maxIds);
    this.#sessions.set(id, s);
    dropOldest(this.#sessions, this.#maxSessions);
    return s;
  }

  /** Retires `id` for good; with a replacement, later requests naming `id` go to it. */
  retire(id: string, replacement?: string): void {
    this.#retired.add(id);
    const state = this.#sessions.get(id);
    if (state !== undefined) {
      this.#retiredStates.set(id, state);
      dropOldest(this.#retiredStates, MAX_RETIRED_STATES);
    }
    this.#sessions.delete(id);
    if (replacement !== undefined) this.#aliases.set(id, replacement);
  }

  /**
   * The stream of a retired session that delivered `eventId`, if the guard
   * still remembers one. The SDK keeps one reconnection loop per stream with
   * its own cursor, and may send an old session's cursor under the new id.
   */
  retiredStreamOf(eventId: string): { sessionId: string; entry: StreamEntry } | undefined {
    for (const [sessionId, state] of this.#retiredStates) {
      const entry = state.streamOf(eventId);
      if (entry !== undefined) return { sessionId, entry };
    }
    return undefined;
  }

  forget(id: string): void {
    this.#sessions.delete(id);
  }
}

/** Bounds a map used as an LRU (insertion order = use order): forgets the oldest entries beyond `max`. */
function dropOldest(map: Map<string, unknown>, max: number): void {
  for (const key of map.keys()) {
    if (map.size <= max) return;
    map.delete(key);
  }
}
