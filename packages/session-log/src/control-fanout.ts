import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import type { ControlMessage, Subjects } from './wire.js';

export type ControlListener = (message: ControlMessage) => void;

interface Watched {
  readonly sub: Subscription;
  readonly listeners: Set<ControlListener>;
}

/**
 * One core-NATS subscription per session's control subject on a connection,
 * however many readers and watchers of that session listen: every live tail
 * of a session and the gateway's own session watch used to hold one each
 * (two or three per idle GET stream). A message is parsed once and handed to
 * each listener synchronously, in the subscription's callback, so listeners
 * see it exactly when they would have with their own subscription. The
 * subscription goes when its last listener does.
 */
export class ControlFanout {
  readonly #nc: NatsConnection;
  readonly #subjects: Subjects;
  readonly #watched = new Map<string, Watched>();

  constructor(nc: NatsConnection, subjects: Subjects) {
    this.#nc = nc;
    this.#subjects = subjects;
  }

  /** Calls `listener` with every control message of the session until the returned function is called. */
  listen(sessionId: string, listener: ControlListener): () => void {
    let watched = this.#watched.get(sessionId);
    if (watched === undefined) {
      const listeners = new Set<ControlListener>();
      const sub = this.#nc.subscribe(this.#subjects.control(sessionId), {
        callback: (err, msg) => {
          if (err !== null) return;
          let message: ControlMessage;
          try {
            message = msg.json<ControlMessage>();
          } catch {
            // Not ours to judge: a malformed control message is ignored.
            return;
          }
          for (const l of [...listeners]) l(message);
        },
      });
      watched = { sub, listeners };
      this.#watched.set(sessionId, watched);
    }
    const { listeners } = watched;
    listeners.add(listener);
    return () => {
      if (!listeners.delete(listener) || listeners.size > 0) return;
      const current = this.#watched.get(sessionId);
      if (current?.listeners === listeners) {
        this.#watched.delete(sessionId);
        current.sub.unsubscribe();
      }
    };
  }
}
