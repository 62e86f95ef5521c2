import type { WriterState } from '@tether/session-log';
import type { Logger } from 'pino';

/** What a delivery does when its stream's writer is found gone: take over if it can; returns the writer found then. */
export type Recheck = () => Promise<string | undefined>;

interface Watched {
  writer: string;
  readonly key: string;
  readonly recheck: Recheck;
}

/**
 * The liveness of the writers this instance's readers depend on, checked
 * per writer process, never per stream: one timer for the instance, and on
 * each tick one probe per distinct remote writer (O(instances)). A writer
 * found gone, or silent for longer than `silenceMs`, gets every stream of it
 * rechecked here at once (each recheck claims the stream or finds its new
 * writer). A stream let go without its end marker (control `released`) is
 * rechecked on the message, without waiting for a tick.
 */
export class WriterWatch {
  readonly #byWriter = new Map<string, Set<Watched>>();
  readonly #byStream = new Map<string, Set<Watched>>();
  /** When each writer first went unanswered, cleared by any answer. */
  readonly #silentSince = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #ticking = false;

  constructor(
    /** This instance's own writer id: never probed (its pumps are in `LocalRegistry`). */
    private readonly self: string,
    private readonly probe: (writer: string) => Promise<WriterState>,
    private readonly intervalMs: number,
    private readonly silenceMs: number,
    private readonly logger: Logger,
  ) {}

  /** Watches `writer` for one reader of `sessionId`/`stream`; call the result to stop, `.moved(writer)` when the stream's writer changed. */
  follow(writer: string, sessionId: string, stream: string, recheck: Recheck): { moved(writer: string): void; stop(): void } {
    const entry: Watched = { writer, key: `${sessionId}.${stream}`, recheck };
    this.#add(entry);
    return {
      moved: (next) => {
        if (next === entry.writer) return;
        this.#remove(entry);
        entry.writer = next;
        this.#add(entry);
      },
      stop: () => this.#remove(entry),
    };
  }

  /** A stream let go by its writer: recheck its readers here now. */
  released(sessionId: string, stream: string): void {
    for (const entry of [...(this.#byStream.get(`${sessionId}.${stream}`) ?? [])]) this.#recheck(entry);
  }

  /** Records what a probe heard, wherever it was made. */
  heard(writer: string, state: WriterState): void {
    if (state === 'silent') {
      if (!this.#silentSince.has(writer)) this.#silentSince.set(writer, Date.now());
    } else this.#silentSince.delete(writer);
  }

  /** True once a writer has not answered for `silenceMs`: its streams may be taken over. */
  silentTooLong(writer: string): boolean {
    const since = this.#silentSince.get(writer);
    return since !== undefined && Date.now() - since >= this.silenceMs;
  }

  get watchedWriters(): number {
    return this.#byWriter.size;
  }

  close(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#byWriter.clear();
    this.#byStream.clear();
  }

  #add(entry: Watched): void {
    let set = this.#byWriter.get(entry.writer);
    if (set === undefined) this.#byWriter.set(entry.writer, (set = new Set()));
    set.add(entry);
    let streams = this.#byStream.get(entry.key);
    if (streams === undefined) this.#byStream.set(entry.key, (streams = new Set()));
    streams.add(entry);
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => void this.#tick(), this.intervalMs);
      this.#timer.unref();
    }
  }

  #remove(entry: Watched): void {
    const set = this.#byWriter.get(entry.writer);
    if (set?.delete(entry) === true && set.size === 0) {
      this.#byWriter.delete(entry.writer);
      this.#silentSince.delete(entry.writer);
    }
    const streams = this.#byStream.get(entry.key);
    if (streams?.delete(entry) === true && streams.size === 0) this.#byStream.delete(entry.key);
    if (this.#byStream.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }

  async #tick(): Promise<void> {
    if (this.#ticking) return;
    this.#ticking = true;
    try {
      const writers = [...this.#byWriter.keys()].filter((w) => w !== this.self);
      await Promise.all(
        writers.map(async (writer) => {
          let state: WriterState;
          try {
            state = await this.probe(writer);
          } catch {
            return; // We cannot reach NATS ourselves: no verdict on anyone else.
          }
          this.heard(writer, state);
          if (state === 'gone' || (state === 'silent' && this.silentTooLong(writer))) {
            this.logger.info({ writer, state, streams: this.#byWriter.get(writer)?.size ?? 0 }, 'writer lost: taking its streams over');
            for (const entry of [...(this.#byWriter.get(writer) ?? [])]) this.#recheck(entry);
          }
        }),
      );
    } finally {
      this.#ticking = false;
    }
  }

  #recheck(entry: Watched): void {
    entry.recheck().then(
      (writer) => {
        if (writer === undefined || writer === entry.writer) return;
        const watched = this.#byWriter.get(entry.writer);
        if (watched?.has(entry) !== true) return; // stopped meanwhile
        this.#remove(entry);
        entry.writer = writer;
        this.#add(entry);
      },
      (err: unknown) => this.logger.warn({ err: (err as Error).message }, 'writer recheck failed'),
    );
  }
}
