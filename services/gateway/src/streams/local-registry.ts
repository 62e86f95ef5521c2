import type { AckedFeed } from './acked-feed.js';
import type { LogPort } from '../log/log-port.js';

/** A client connection this instance serves. */
export interface LocalDelivery {
  readonly sessionId: string;
  readonly stream: string;
  /** Random per GET: a `superseded` control message from another token ends this one. */
  readonly token: string;
  readonly abort: AbortController;
}

/** A writer this instance runs (a POST pump or the GET-stream listener). */
export interface LocalWriter {
  readonly sessionId: string;
  readonly stream: string;
  readonly abort: AbortController;
  readonly done: Promise<unknown>;
  /** Its acknowledged appends, for readers on this instance to tap. */
  readonly feed?: AckedFeed;
}

/**
 * What this instance is doing per session, and the one control-subject
 * watch per session that ends it all when another instance closes the
 * session or supersedes its GET stream. Nothing here is shared state: any
 * instance can lose all of it (crash) and the log still holds the truth.
 */
export class LocalRegistry {
  readonly #deliveries = new Map<string, Set<LocalDelivery>>();
  readonly #writers = new Map<string, LocalWriter>();
  /** The control listener per session this instance serves: its unlisten. */
  readonly #watches = new Map<string, () => void>();
  /** Streams this instance has claimed and is about to pump (the upstream is being opened). */
  readonly #claimed = new Set<string>();

  constructor(
    private readonly log: LogPort,
    /** +1 when this instance starts serving a session, -1 when it stops (metrics). */
    private readonly onSessionsChanged: (delta: number) => void = () => undefined,
    /** A writer let a stream of a session go without its end (control `released`). */
    private readonly onReleased: (sessionId: string, stream: string) => void = () => undefined,
  ) {}

  deliveriesOf(sessionId: string): number {
    return this.#deliveries.get(sessionId)?.size ?? 0;
  }

  get openDeliveries(): number {
    let n = 0;
    for (const set of this.#deliveries.values()) n += set.size;
    return n;
  }

  addDelivery(d: LocalDelivery): () => void {
    let set = this.#deliveries.get(d.sessionId);
    if (set === undefined) {
      set = new Set();
      this.#deliveries.set(d.sessionId, set);
    }
    set.add(d);
    this.#watch(d.sessionId);
    return () => {
      set.delete(d);
      if (set.size === 0) this.#deliveries.delete(d.sessionId);
      this.#unwatchIfIdle(d.sessionId);
    };
  }

  writer(sessionId: string, stream: string): LocalWriter | undefined {
    return this.#writers.get(`${sessionId}.${stream}`);
  }

  /**
   * What this instance's presence answers for a stream: true while a pump
   * here writes it, or while a claim of it is being turned into one.
   */
  writes(sessionId: string, stream: string): boolean {
    const key = `${sessionId}.${stream}`;
    return this.#writers.has(key) || this.#claimed.has(key);
  }

  /** Marks a claimed stream as written here until its pump is registered (or the claim is given up); returns the release. */
  holdClaim(sessionId: string, stream: string): () => void {
    const key = `${sessionId}.${stream}`;
    this.#claimed.add(key);
    return () => this.#claimed.delete(key);
  }

  addWriter(w: LocalWriter): void {
    const key = `${w.sessionId}.${w.stream}`;
    this.#writers.set(key, w);
    this.#watch(w.sessionId);
    void w.done.finally(() => {
      if (this.#writers.get(key) === w) this.#writers.delete(key);
      this.#unwatchIfIdle(w.sessionId);
    });
  }

  get writers(): LocalWriter[] {
    return [...this.#writers.values()];
  }

  get deliveries(): LocalDelivery[] {
    return [...this.#deliveries.values()].flatMap((set) => [...set]);
  }

  /** Ends everything this instance does for a session (closed here or elsewhere). */
  endSession(sessionId: string): void {
    for (const d of this.#deliveries.get(sessionId) ?? []) d.abort.abort('closed');
    for (const w of this.#writers.values()) if (w.sessionId === sessionId) w.abort.abort('stopped');
  }

  /** Ends this instance's GET-stream deliveries of a session except the one holding `token`. */
  supersede(sessionId: string, token: string): void {
    for (const d of this.#deliveries.get(sessionId) ?? []) if (d.stream === '0' && d.token !== token) d.abort.abort('superseded');
  }

  #watch(sessionId: string): void {
    if (this.#watches.has(sessionId)) return;
    // A callback on the log's one control subscription: no subscription, generator or timer per session.
    const unlisten = this.log.listenControl(sessionId, (message) => {
      if (message.type === 'closed') this.endSession(sessionId);
      else if (message.type === 'released' && message.stream !== undefined) this.onReleased(sessionId, message.stream);
      else if (message.type === 'superseded' && message.stream === '0' && message.from !== undefined) this.supersede(sessionId, message.from);
    });
    this.#watches.set(sessionId, unlisten);
    this.onSessionsChanged(1);
  }

  #unwatchIfIdle(sessionId: string): void {
    if (this.#deliveries.has(sessionId)) return;
    for (const w of this.#writers.values()) if (w.sessionId === sessionId) return;
    const unlisten = this.#watches.get(sessionId);
    if (unlisten === undefined) return;
    unlisten();
    this.#watches.delete(sessionId);
    this.onSessionsChanged(-1);
  }
}
