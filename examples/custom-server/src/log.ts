import { callUnary, createCursorClient, EndReason, EventKind, readCallFailure, resumeVerdictSpelling } from '@tether/cursor-proto';
import type { CursorServiceClient, Event, ResumeAck, Session } from '@tether/cursor-proto';

/**
 * Everything this server asks of Tether, over the generated gRPC client and
 * nothing else: no NATS, no Tether library. A server in any language with
 * gRPC stubs of cursor.proto could do the same.
 */
export class EventLog {
  readonly #client: CursorServiceClient;
  /** The last seq each of our streams got: the next append's `expected_seq` (its idempotency key). */
  readonly #lastSeq = new Map<string, number>();

  constructor(target: string, token: string | undefined) {
    this.#client = createCursorClient({ target, ...(token === undefined ? {} : { token }) });
  }

  async openSession(principal: string, meta: Record<string, string>): Promise<Session> {
    const { session } = await callUnary(this.#client.openSession.bind(this.#client), { principal, meta }, { deadlineMs: 5_000 });
    if (session === undefined) throw new Error('OpenSession answered without a session');
    return session;
  }

  /** The session if it exists and is this principal's, else undefined (NOT_FOUND). */
  async findSession(sessionId: string, principal: string): Promise<Session | undefined> {
    try {
      return (await callUnary(this.#client.getSession.bind(this.#client), { sessionId, principal }, { deadlineMs: 5_000 })).session;
    } catch (err) {
      const failure = readCallFailure(err);
      if (failure.detail?.code === 'session_not_found' || failure.detail?.code === 'invalid_argument') return undefined;
      throw err;
    }
  }

  async closeSession(sessionId: string, from: string): Promise<boolean> {
    return (await callUnary(this.#client.closeSession.bind(this.#client), { sessionId, from }, { deadlineMs: 5_000 })).closed;
  }

  /**
   * Appends one event; resolves with its id once it is durable. A lost reply
   * is retried with the same expected seq, so it is never stored twice.
   */
  async append(sessionId: string, stream: string, kind: 'event' | 'prime' | 'end', payload: string): Promise<string> {
    const key = `${sessionId}.${stream}`;
    const expectedSeq = (this.#lastSeq.get(key) ?? 0) + 1;
    const request = {
      sessionId,
      stream,
      kind: kind === 'event' ? EventKind.EVENT : kind === 'prime' ? EventKind.PRIME : EventKind.END,
      payload: Buffer.from(payload, 'utf8'),
      upstreamId: undefined,
      endReason: EndReason.UNSPECIFIED,
      traceparent: undefined,
      expectedSeq,
    };
    for (let attempt = 1; ; attempt += 1) {
      try {
        const result = await callUnary(this.#client.append.bind(this.#client), request, { deadlineMs: 5_000 });
        if (kind === 'end') this.#lastSeq.delete(key);
        else this.#lastSeq.set(key, result.seq);
        return result.id;
      } catch (err) {
        const { code } = readCallFailure(err);
        if (attempt >= 3 || (code !== 14 && code !== 4)) throw err; // UNAVAILABLE, DEADLINE_EXCEEDED
        await new Promise((r) => setTimeout(r, 100 * attempt));
      }
    }
  }

  /**
   * Resumes a client's `Last-Event-ID`: the ack (or the refusal's verdict),
   * then the events, through `onEvent`, until the stream's end, an error or
   * `signal`.
   */
  resume(sessionId: string, lastEventId: string, principal: string, signal: AbortSignal): ResumeCall {
    const call = this.#client.resume({ sessionId, lastEventId, principal });
    signal.addEventListener('abort', () => call.cancel(), { once: true });
    const ack = new Promise<ResumeAck | { refused: string }>((resolve, reject) => {
      call.once('data', (m: { ack?: ResumeAck }) => {
        // Hold the events until someone listens for them.
        call.pause();
        if (m.ack === undefined) reject(new Error('the resume started without an ack'));
        else resolve(m.ack);
      });
      call.once('error', (err) => {
        const { detail } = readCallFailure(err);
        if (detail?.code === 'resume_refused') resolve({ refused: resumeVerdictSpelling(detail.verdict) ?? 'unknown' });
        else reject(err);
      });
    });
    return {
      ack,
      events: (onEvent) =>
        new Promise<void>((resolve, reject) => {
          call.on('data', (m: { event?: Event }) => {
            if (m.event === undefined) return;
            const wait = onEvent(m.event);
            if (wait === undefined) return;
            // The client's socket is full: read nothing more from the log
            // until it drains (gRPC flow control carries this to the service).
            call.pause();
            wait.then(() => call.resume(), () => call.cancel());
          });
          call.on('end', resolve);
          call.on('error', (err) => (signal.aborted ? resolve() : reject(err)));
          call.resume();
        }),
    };
  }

  close(): void {
    this.#client.close();
  }
}

export interface ResumeCall {
  readonly ack: Promise<ResumeAck | { refused: string }>;
  /** Delivers every event; when `onEvent` returns a promise, the next waits for it. Resolves at the stream's end. */
  events(onEvent: (event: Event) => Promise<void> | undefined): Promise<void>;
}
