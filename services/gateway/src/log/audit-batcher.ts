/**
 * Audit events to the session-log service in batches (`RecordAuditBatch`),
 * for a gateway in `--log grpc://` mode. One unary call per event cost the
 * gateway about two thirds of an Append's CPU (bench:audit); a core NATS
 * publish, what the in-process log does, is buffered and written with
 * others by the client anyway. Events wait at most `delayMs` (or until
 * `maxEvents` have gathered), nothing in the request path waits for them,
 * and a batch that fails is dropped, as a lost publish would be: audit
 * events are metadata, never worth a retry loop or a failed request.
 */
import type { RecordAuditRequest } from '@tether/cursor-proto';

export interface AuditBatcherOptions {
  /** Send at once when this many are waiting. Default 256. */
  readonly maxEvents?: number;
  /** Longest an event waits to be sent. Default 5 ms. */
  readonly delayMs?: number;
}

export class AuditBatcher {
  readonly #send: (events: RecordAuditRequest[]) => Promise<void>;
  readonly #maxEvents: number;
  readonly #delayMs: number;
  #waiting: RecordAuditRequest[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inFlight = new Set<Promise<void>>();

  /** `send` must not throw: it drops what it cannot deliver. */
  constructor(send: (events: RecordAuditRequest[]) => Promise<void>, options: AuditBatcherOptions = {}) {
    this.#send = send;
    this.#maxEvents = options.maxEvents ?? 256;
    this.#delayMs = options.delayMs ?? 5;
  }

  add(event: RecordAuditRequest): void {
    this.#waiting.push(event);
    if (this.#waiting.length >= this.#maxEvents) this.#sendWaiting();
    // Unref'd: a gateway that is done does not wait out a timer for metadata (close() flushes).
    else this.#timer ??= setTimeout(() => this.#sendWaiting(), this.#delayMs).unref();
  }

  /** Sends what waits and resolves when every batch sent so far has been answered or dropped. */
  async flush(): Promise<void> {
    this.#sendWaiting();
    await Promise.all(this.#inFlight);
  }

  #sendWaiting(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#waiting.length === 0) return;
    const batch = this.#waiting;
    this.#waiting = [];
    const sent = this.#send(batch).finally(() => this.#inFlight.delete(sent));
    this.#inFlight.add(sent);
  }
}
