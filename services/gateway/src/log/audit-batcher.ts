/**
 * Audit events to the session-log service in batches (`RecordAuditBatch`),
 * for a gateway in `--log grpc://` mode. One unary call per event cost the
 * gateway about two thirds of an Append's CPU (bench:audit); a core NATS
 * publish, what the in-process log does, is buffered and written with
 * others by the client anyway. Events wait at most `delayMs` (or until
 * `maxEvents` have gathered), nothing in the request path waits for them,
 * and a batch that fails is dropped, as a lost publish would be: audit
 * events are metadata, never worth a retry loop or a failed request.
 *
 * The service records a batch entry by entry and names the events it
 * refused (a session not the caller's, a bad field): the rest are kept.
 * Refusals are a gateway bug worth seeing, so they are logged, as counts by
 * code (never a session id, never an event), at most one line per
 * `logEveryMs`, however many batches they came in.
 */
import type { RecordAuditRequest } from '@tether/cursor-proto';
import type { Logger } from 'pino';

export interface AuditBatcherOptions {
  /** Send at once when this many are waiting. Default 256. */
  readonly maxEvents?: number;
  /** Longest an event waits to be sent. Default 5 ms. */
  readonly delayMs?: number;
  /** Where refused events are counted. Default: nowhere. */
  readonly logger?: Pick<Logger, 'warn'>;
  /** At most one line of refusals per this long; it counts every refusal since the last. Default 10 s. */
  readonly logEveryMs?: number;
}

/** What a batch's delivery found out: the events the service refused, by code (`session_not_found`, `invalid_argument`). */
export interface AuditBatchOutcome {
  readonly refused: readonly { readonly code: string }[];
}

export class AuditBatcher {
  readonly #send: (events: RecordAuditRequest[]) => Promise<AuditBatchOutcome | void>;
  readonly #maxEvents: number;
  readonly #delayMs: number;
  readonly #logger: Pick<Logger, 'warn'> | undefined;
  readonly #logEveryMs: number;
  #waiting: RecordAuditRequest[] = [];
  #timer: NodeJS.Timeout | undefined;
  readonly #inFlight = new Set<Promise<void>>();
  /** Refusals not logged yet, by code. */
  readonly #refused = new Map<string, number>();
  #loggedAtMs = -Infinity;
  #logTimer: NodeJS.Timeout | undefined;

  /** `send` must not throw: it drops what it cannot deliver, and says what the service refused. */
  constructor(send: (events: RecordAuditRequest[]) => Promise<AuditBatchOutcome | void>, options: AuditBatcherOptions = {}) {
    this.#send = send;
    this.#maxEvents = options.maxEvents ?? 256;
    this.#delayMs = options.delayMs ?? 5;
    this.#logger = options.logger;
    this.#logEveryMs = options.logEveryMs ?? 10_000;
  }

  add(event: RecordAuditRequest): void {
    this.#waiting.push(event);
    if (this.#waiting.length >= this.#maxEvents) this.#sendWaiting();
    // Unref'd: a gateway that is done does not wait out a timer for metadata (close() flushes).
    else this.#timer ??= setTimeout(() => this.#sendWaiting(), this.#delayMs).unref();
  }

  /** Sends what waits and resolves when every batch sent so far has been answered or dropped; refusals not yet logged are logged now. */
  async flush(): Promise<void> {
    this.#sendWaiting();
    await Promise.all(this.#inFlight);
    this.#logRefused();
  }

  #sendWaiting(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#waiting.length === 0) return;
    const batch = this.#waiting;
    this.#waiting = [];
    const sent = this.#send(batch)
      .then((outcome) => this.#noteRefused(outcome?.refused ?? []))
      .finally(() => this.#inFlight.delete(sent));
    this.#inFlight.add(sent);
  }

  #noteRefused(refused: AuditBatchOutcome['refused']): void {
    if (refused.length === 0 || this.#logger === undefined) return;
    for (const { code } of refused) this.#refused.set(code, (this.#refused.get(code) ?? 0) + 1);
    if (this.#logTimer !== undefined) return;
    const waitMs = this.#loggedAtMs + this.#logEveryMs - Date.now();
    if (waitMs <= 0) return this.#logRefused();
    // Unref'd like the send timer: close() flushes what is left.
    this.#logTimer = setTimeout(() => this.#logRefused(), waitMs).unref();
  }

  #logRefused(): void {
    if (this.#logTimer !== undefined) clearTimeout(this.#logTimer);
    this.#logTimer = undefined;
    if (this.#refused.size === 0 || this.#logger === undefined) return;
    const byCode = Object.fromEntries(this.#refused);
    const refused = [...this.#refused.values()].reduce((a, b) => a + b, 0);
    this.#refused.clear();
    this.#loggedAtMs = Date.now();
    this.#logger.warn({ refused, byCode }, 'audit events refused by the session-log service');
  }
}
