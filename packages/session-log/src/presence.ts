import { createHash, randomBytes } from 'node:crypto';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { isNoResponders, SessionLogError, SessionLogErrorCode } from './errors.js';
import type { Subjects } from './wire.js';

/**
 * Writer liveness per process, not per stream (DESIGN section 6).
 *
 * A writer is a process incarnation with a random id. While it lives it
 * holds one core-NATS subscription, `<prefix>.writer.<id>`, and stamps
 * every event it appends with `Tether-Writer: <id>`. Anyone who wants to
 * know whether a stream's writer still writes asks that subject:
 *
 * - an answer says whether the process writes that stream now;
 * - "no responders" means no connection holds the subscription: the process
 *   died (the server drops its interest as soon as its socket closes), was
 *   cut off long enough for the server to drop it, or drained;
 * - silence (a timeout) means it is slow or cut off but still registered.
 *
 * Nothing is renewed: an idle stream costs nothing, and the whole cost of
 * liveness is one subscription per process. Liveness only decides who
 * *tries* to write. Who is recorded is decided by the log (expected last
 * sequence, message id, `Tether-Writer` compared on duplicates, the chain),
 * so a wrong guess costs a `writer_conflict`, never two recorded writers.
 */
export type WriterState =
  /** The process answered that it writes the stream. */
  | 'writing'
  /** The process lives but does not write the stream (its pump ended without an end marker). */
  | 'not_writing'
  /** No process holds the writer's subject: take over at once. */
  | 'gone'
  /** No answer in time: slow, or cut off from NATS. */
  | 'silent';

/** What a presence answers for one stream; `undefined` stream: the process itself (always true while it answers). */
export type WritesStream = (sessionId: string, stream: string) => boolean | Promise<boolean>;

const WRITER_ID = /^[A-Za-z0-9_-]{8,64}$/;

/** A fresh writer id for one process incarnation: random, so a restarted process never inherits its streams. */
export function newWriterId(): string {
  return randomBytes(12).toString('base64url');
}

export function isWriterId(value: unknown): value is string {
  return typeof value === 'string' && WRITER_ID.test(value);
}

/**
 * The writer id a session-log service holds and probes for writer
 * `writerId` of one of its callers (cursor.proto: HoldPresence,
 * ProbeWriter): a digest of both, so two callers naming the same writer
 * are two writers, and no caller can answer for, or probe, another's. Itself
 * a writer id (43 characters), never one `newWriterId` draws (16). An
 * operator probing a task's runner whose record names its caller
 * (`tether.caller`) asks this id.
 */
export function callerWriterId(caller: string, writerId: string): string {
  assertWriterId(writerId);
  return createHash('sha256').update('tether-writer\0').update(caller, 'utf8').update('\0').update(writerId).digest('base64url');
}

export function assertWriterId(value: unknown): asserts value is string {
  if (!isWriterId(value)) {
    throw new SessionLogError(SessionLogErrorCode.invalidArgument, 'writer id is malformed (expected 8 to 64 characters of A-Z, a-z, 0-9, _ and -)', {});
  }
}

/** The question on the wire: empty for "are you alive", else `<session> <stream>`. */
function question(sessionId?: string, stream?: string): string {
  return sessionId === undefined || stream === undefined ? '' : `${sessionId} ${stream}`;
}

/**
 * Holds a writer's presence: answers on its subject until `close()`. The
 * answer for a stream comes from `writes`, the process's own record of the
 * pumps it runs. A malformed question gets no answer (a prober then sees
 * silence, never a false "not writing").
 */
export function holdPresence(nc: NatsConnection, subjects: Subjects, writerId: string, writes: WritesStream): { close(): Promise<void> } {
  assertWriterId(writerId);
  const sub: Subscription = nc.subscribe(subjects.writer(writerId), {
    callback: (err, msg) => {
      if (err !== null) return;
      const text = msg.string();
      if (text === '') return void msg.respond('1');
      const [sessionId, stream, extra] = text.split(' ');
      if (sessionId === undefined || stream === undefined || extra !== undefined) return;
      void Promise.resolve()
        .then(() => writes(sessionId, stream))
        .then(
          (yes) => msg.respond(yes ? '1' : '0'),
          () => undefined,
        );
    },
  });
  return {
    async close() {
      // unsubscribe, then a flush: once close() resolves, the server has
      // dropped the interest and probers get "no responders".
      sub.unsubscribe();
      await nc.flush().catch(() => undefined);
    },
  };
}

/**
 * Asks a writer whether it still writes one stream (or, without a stream,
 * whether it lives). Never throws for the writer's sake: a dead writer is
 * `gone`, a slow one `silent`. Throws `log_unavailable` only when this
 * process cannot reach NATS itself.
 */
export async function probeWriter(nc: NatsConnection, subjects: Subjects, writerId: string, timeoutMs: number, sessionId?: string, stream?: string): Promise<WriterState> {
  assertWriterId(writerId);
  if (nc.isClosed()) throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'the NATS connection is closed', {});
  try {
    const answer = await nc.request(subjects.writer(writerId), question(sessionId, stream), { timeout: timeoutMs });
    return answer.string() === '0' ? 'not_writing' : 'writing';
  } catch (err) {
    if (isNoResponders(err)) return 'gone';
    if (/timeout/i.test(String((err as { code?: string }).code ?? '')) || /timeout/i.test(String(err))) return 'silent';
    if (nc.isClosed() || /disconnect|closed/i.test(String(err))) {
      throw new SessionLogError(SessionLogErrorCode.logUnavailable, `cannot ask writer liveness: ${String(err)}`, {}, { cause: err });
    }
    return 'silent';
  }
}
