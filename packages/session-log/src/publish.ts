/**
 * The wire side of an append: the header block as text, and JetStream
 * publish-with-ack on one reply subscription per connection. `StreamWriter`
 * decides what to write and what an answer means; this file only sends it
 * and hands back the answer, with the errors `js.publish` would give.
 */
import { createInbox, MsgHdrsImpl, NoRespondersError, TimeoutError } from '@nats-io/transport-node';
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import { JetStreamApiError } from '@nats-io/jetstream';
import type { ApiError } from '@nats-io/jetstream';
import { SessionLogError, SessionLogErrorCode } from './errors.js';

/**
 * An opaque value (an upstream id, a trace context) as a header can hold
 * it: CR and LF become spaces, at most 1024 characters, trimmed (as nats.js
 * stores values). Upstream ids are opaque text we only echo back.
 */
export function storedHeaderValue(value: string): string {
  if (value.length <= 1024 && !value.includes('\r') && !value.includes('\n')) return value.trim();
  return value.replace(/[\r\n]/g, ' ').slice(0, 1024).trim();
}

/** `Nats-Expected-Last-Subject-Sequence` (nats.js `PubHeaders.ExpectedLastSubjectSequenceHdr`): the tripwire. */
export const EXPECTED_LAST_SUBJECT_SEQUENCE = 'Nats-Expected-Last-Subject-Sequence';

/**
 * A header value as nats.js's `MsgHdrsImpl` stores it: trimmed. CR or LF
 * (only a caller's writer id could hold one) is `invalid_argument`, before
 * anything is sent; nats.js threw its own `InvalidArgumentError` there.
 */
export function headerValue(value: string): string {
  if (value.includes('\r') || value.includes('\n')) throw new SessionLogError(SessionLogErrorCode.invalidArgument, `header values cannot contain CR or LF: ${JSON.stringify(value.slice(0, 64))}`);
  return value.trim();
}

/**
 * A header block encoded once, for `nc.publish`, which only asks headers to
 * `encode()` themselves. Its lookup methods see no headers: it is never
 * read, only sent.
 */
export class EncodedHeaders extends MsgHdrsImpl {
  /** The whole block: `NATS/1.0`, one `Name: value` line each, an empty line. */
  text = '';

  override toString(): string {
    return this.text;
  }

  override encode(): Uint8Array {
    return Buffer.from(this.text, 'utf8');
  }
}

/** What JetStream answers a publish with. */
export interface PubAck {
  readonly stream: string;
  readonly seq: number;
  readonly duplicate: boolean;
}

interface PendingAck {
  readonly subject: string;
  readonly deadline: number;
  readonly resolve: (ack: PubAck) => void;
  readonly reject: (err: Error) => void;
}

/** How often waiting publishes are checked against their deadlines. */
const ACK_SWEEP_MS = 50;

/**
 * JetStream publish-with-ack on one reply subscription per connection:
 * `<inbox>.*`, one token per publish, one timer sweeping every deadline.
 * `js.publish` goes through `nc.request`, which per publish builds headers
 * with `MsgHdrsImpl`, a timer, two deferreds and, when it settles, a
 * `RequestError("cancelled")` whether or not anything failed (nats-core 3.4
 * `request.js`, `cancel()`): a sixth of the gateway's CPU per event in
 * profiles (docs/benchmarks.md). Errors are the ones `js.publish` gives:
 * `JetStreamApiError` (its `code` is the API's `err_code`), a
 * `NoRespondersError` for a 503, a `TimeoutError` after `timeoutMs`.
 */
export class AckInbox {
  static readonly #byConnection = new WeakMap<NatsConnection, AckInbox>();

  /** The connection's inbox, opened on first use (again if its subscription failed). */
  static of(nc: NatsConnection): AckInbox {
    let inbox = AckInbox.#byConnection.get(nc);
    if (inbox === undefined || inbox.#sub.isClosed()) {
      inbox = new AckInbox(nc);
      AckInbox.#byConnection.set(nc, inbox);
    }
    return inbox;
  }

  readonly #nc: NatsConnection;
  readonly #prefix: string;
  readonly #sub: Subscription;
  readonly #pending = new Map<string, PendingAck>();
  #next = 0;
  #sweeper: NodeJS.Timeout | undefined;

  private constructor(nc: NatsConnection) {
    this.#nc = nc;
    // The connection's own inbox prefix: accounts may only allow replies there.
    this.#prefix = `${createInbox((nc as { options?: { inboxPrefix?: string } }).options?.inboxPrefix)}.`;
    this.#sub = nc.subscribe(`${this.#prefix}*`, { callback: (err, msg) => this.#receive(err, msg) });
  }

  publish(subject: string, payload: Uint8Array, headers: MsgHdrsImpl, timeoutMs: number): Promise<PubAck> {
    return new Promise<PubAck>((resolve, reject) => {
      const token = (this.#next++).toString(36);
      this.#pending.set(token, { subject, deadline: Date.now() + timeoutMs, resolve, reject });
      this.#sweeper ??= setInterval(() => this.#sweep(), ACK_SWEEP_MS).unref();
      try {
        this.#nc.publish(subject, payload, { reply: `${this.#prefix}${token}`, headers });
      } catch (err) {
        this.#pending.delete(token);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  #receive(err: Error | null, msg: Msg): void {
    if (err !== null) {
      // The subscription failed (a permissions violation): fail what waits; `of` opens a new one.
      for (const pending of this.#pending.values()) pending.reject(err);
      this.#pending.clear();
      this.#sub.unsubscribe();
      return;
    }
    const token = msg.subject.slice(this.#prefix.length);
    const pending = this.#pending.get(token);
    // An answer after its deadline: the publish was given up (and is retried with the same msg id).
    if (pending === undefined) return;
    this.#pending.delete(token);
    if (msg.data.length === 0) {
      const status = msg.headers?.code ?? 0;
      pending.reject(status === 503 ? new NoRespondersError(pending.subject) : new Error(`publish answered status ${status} ${msg.headers?.description ?? ''}`.trim()));
      return;
    }
    let answer: { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: ApiError };
    try {
      answer = JSON.parse(Buffer.from(msg.data.buffer, msg.data.byteOffset, msg.data.byteLength).toString('utf8')) as typeof answer;
    } catch (parseErr) {
      pending.reject(parseErr as Error);
      return;
    }
    if (answer.error !== undefined) {
      pending.reject(new JetStreamApiError(answer.error));
      return;
    }
    if (typeof answer.stream !== 'string' || answer.stream === '' || typeof answer.seq !== 'number') {
      pending.reject(new Error('invalid ack response'));
      return;
    }
    pending.resolve({ stream: answer.stream, seq: answer.seq, duplicate: answer.duplicate === true });
  }

  #sweep(): void {
    const now = Date.now();
    for (const [token, pending] of this.#pending) {
      if (pending.deadline > now) continue;
      this.#pending.delete(token);
      pending.reject(new TimeoutError());
    }
    if (this.#pending.size === 0) {
      clearInterval(this.#sweeper);
      this.#sweeper = undefined;
    }
  }
}
