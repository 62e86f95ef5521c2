import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { ControlMessage, Subjects } from './wire.js';

export type ControlListener = (message: ControlMessage) => void;
/** A listener of every session's control messages (the session is the subject's, not the payload's). */
export type AnyControlListener = (sessionId: string, message: ControlMessage) => void;

/**
 * One core-NATS subscription per connection, `<prefix>.ctl.*`, for every
 * session's control messages, however many readers and watchers listen.
 * Each live tail and each session watch of the gateway used to hold a
 * subscription of its own (a nats.js `Subscription` is about 1.2 KiB, and
 * an idle GET stream held two or three), then one per session. Control
 * messages are rare (a close, a GET superseding another, a stream
 * released) and the gateway's session cache already heard every one of
 * them on its own wildcard subscription, so hearing them all costs no
 * new traffic; the cache now listens here too.
 *
 * A message is parsed once and handed to each listener of its session
 * synchronously, in the subscription's callback, so listeners see it exactly
 * when they would have with their own subscription. The session is the one
 * the subject names: a payload claiming another session is not believed.
 * Malformed messages are ignored. The subscription is made on the first
 * listener and kept for the connection's life.
 */
export class ControlFanout {
  readonly #nc: NatsConnection;
  readonly #subjects: Subjects;
  /** Where the session id starts in a control subject. */
  readonly #prefixLength: number;
  readonly #bySession = new Map<string, Set<ControlListener>>();
  readonly #any = new Set<AnyControlListener>();
  #sub: Subscription | undefined;

  constructor(nc: NatsConnection, subjects: Subjects) {
    this.#nc = nc;
    this.#subjects = subjects;
    this.#prefixLength = subjects.control('').length;
  }

  /** Calls `listener` with every control message of the session until the returned function is called. */
  listen(sessionId: string, listener: ControlListener): () => void {
    this.#subscribe();
    let listeners = this.#bySession.get(sessionId);
    if (listeners === undefined) {
      listeners = new Set();
      this.#bySession.set(sessionId, listeners);
    }
    const mine = listeners;
    mine.add(listener);
    return () => {
      if (!mine.delete(listener) || mine.size > 0) return;
      if (this.#bySession.get(sessionId) === mine) this.#bySession.delete(sessionId);
    };
  }

  /** Calls `listener` with every control message of every session until the returned function is called. */
  listenAll(listener: AnyControlListener): () => void {
    this.#subscribe();
    this.#any.add(listener);
    return () => void this.#any.delete(listener);
  }

  #subscribe(): void {
    if (this.#sub !== undefined && !this.#sub.isClosed()) return;
    this.#sub = this.#nc.subscribe(this.#subjects.control('*'), {
      callback: (err, msg) => {
        if (err !== null) return;
        const sessionId = msg.subject.slice(this.#prefixLength);
        const listeners = this.#bySession.get(sessionId);
        if (listeners === undefined && this.#any.size === 0) return;
        let message: ControlMessage;
        try {
          message = msg.json<ControlMessage>();
        } catch {
          // Not ours to judge: a malformed control message is ignored.
          return;
        }
        if (typeof message !== 'object' || message === null) return;
        if (message.sessionId !== sessionId) message = { ...message, sessionId };
        for (const l of [...this.#any]) l(sessionId, message);
        if (listeners !== undefined) for (const l of [...listeners]) l(message);
      },
    });
  }
}
