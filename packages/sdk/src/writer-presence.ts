import { newWriterId } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';

/**
 * This process's writer identity (design.md, "Writer liveness per
 * instance"): a random id stamped on every event it appends, and one
 * core-NATS subscription that answers "do you still write this stream?".
 * When the process dies, NATS answers the next probe "no responders" and a
 * reader elsewhere ends the stream explicitly instead of waiting forever.
 *
 * One per process and log; every store and router of the process shares it.
 */
export interface WriterPresence {
  /** The random id of this process incarnation (never reused after a restart). */
  readonly writerId: string;
  /** Marks a stream as being produced here (its probe answers "writing"). */
  begin(sessionId: string, stream: string): void;
  /** The stream ended here (or was given up): probes answer "not writing". */
  finish(sessionId: string, stream: string): void;
  writes(sessionId: string, stream: string): boolean;
  /** Drops the presence: from then on probes get "no responders". */
  close(): Promise<void>;
}

export function createWriterPresence(log: SessionLog): WriterPresence {
  const writerId = newWriterId();
  const open = new Set<string>();
  const key = (sessionId: string, stream: string): string => `${sessionId} ${stream}`;
  const held = log.holdPresence(writerId, (sessionId, stream) => open.has(key(sessionId, stream)));
  return {
    writerId,
    begin: (sessionId, stream) => void open.add(key(sessionId, stream)),
    finish: (sessionId, stream) => void open.delete(key(sessionId, stream)),
    writes: (sessionId, stream) => open.has(key(sessionId, stream)),
    async close() {
      open.clear();
      await held.close();
    },
  };
}
