import { isSessionLogError } from '@tether/session-log';
import type { Cursor, LogEvent, WriterState } from '@tether/session-log';
import type { GatewayContext } from '../context.js';

/**
 * Waits of the probes a takeover check makes while the writer is silent.
 * A client resuming right after its writer was SIGKILLed can probe before
 * the server has read the dead socket's close: that probe goes to the dead
 * connection and times out. The next one, once the server dropped the
 * interest, is answered "no responders" at once. So the first wait is
 * short, and a live writer that is merely busy gets longer ones (in all
 * 500 ms) before it counts as silent.
 */
const PROBE_TIMEOUTS_MS = [50, 150, 300];

/** Who writes a stream, as far as this instance can tell (DESIGN section 6). */
export type WriterFound =
  /** A pump on this instance. */
  | { readonly kind: 'here' }
  /** A live writer elsewhere (or one silent for less than `--writer-silence`). */
  | { readonly kind: 'elsewhere'; readonly writer: string }
  /** The stream holds its end marker, or nothing: there is nothing to write. */
  | { readonly kind: 'ended' }
  /** Nobody writes it: its writer is gone, let it go, or never claimed it. */
  | { readonly kind: 'orphaned'; readonly head: LogEvent | undefined };

/**
 * Reads the stream's head and asks its writer (`Tether-Writer`) whether it
 * still writes the stream. One head read and at most one request; a dead
 * writer's subject answers "no responders" at once, so a takeover starts
 * within a round trip of the resume that asks.
 */
export async function findWriter(ctx: GatewayContext, sessionId: string, stream: string): Promise<WriterFound> {
  if (ctx.local.writer(sessionId, stream) !== undefined) return { kind: 'here' };
  const head = await ctx.log.head(sessionId, stream);
  if (head?.kind === 'end' || (head === undefined && stream !== '0')) return { kind: 'ended' };
  const writer = head?.writer;
  // Never claimed (a session's first GET prime), or ours with no pump here (it died without an end).
  if (writer === undefined || writer === ctx.writerId) return { kind: 'orphaned', head };
  let state: WriterState = 'silent';
  for (const timeoutMs of PROBE_TIMEOUTS_MS) {
    state = await ctx.log.probeWriter(writer, sessionId, stream, timeoutMs);
    if (state !== 'silent') break;
  }
  ctx.writers.heard(writer, state);
  if (state === 'writing') return { kind: 'elsewhere', writer };
  if (state === 'silent' && !ctx.writers.silentTooLong(writer)) return { kind: 'elsewhere', writer };
  return { kind: 'orphaned', head };
}

/** A claim that is ours. */
export interface Claimed {
  /**
   * Until this is called, this instance's presence answers "writing" for
   * the stream (its pump is not registered yet while the upstream is
   * opened). Call it once the pump runs, or when the stream will not be
   * pumped after all.
   */
  readonly release: () => void;
  /** Where the claim's prime landed: the pump's first append follows it. */
  readonly at: Cursor;
}

/**
 * Claims an orphaned stream: appends an id-only `prime` stamped with this
 * instance's writer id, directly after the head that was found orphaned
 * (carrying its upstream id, so the next takeover still knows where the
 * upstream stood). The log decides: if anyone appended after that head (the
 * old writer lives after all, or another instance claimed first), the
 * append fails and this instance stands down.
 *
 * When the claim is ours, returns it (see `Claimed`).
 */
export async function claimStream(ctx: GatewayContext, sessionId: string, stream: string, head: LogEvent | undefined): Promise<Claimed | undefined> {
  const release = ctx.local.holdClaim(sessionId, stream);
  try {
    const at = await ctx.log.append(sessionId, stream, 'prime', new Uint8Array(), {
      claim: { afterSeq: head?.seq ?? 0 },
      writer: ctx.writerId,
      existing: head !== undefined,
      ...(head?.upstreamId === undefined ? {} : { upstreamId: head.upstreamId }),
    });
    return { release, at: { seq: at.seq, pos: at.pos } };
  } catch (err) {
    release();
    if (isSessionLogError(err, 'writer_conflict') || isSessionLogError(err, 'stream_ended')) return undefined;
    throw err;
  }
}

/**
 * One claim attempt per stream at a time on this instance: many readers of
 * one orphaned stream (or a resume racing the liveness tick) share it.
 */
export function once<T>(inflight: Map<string, Promise<T>>, key: string, run: () => Promise<T>): Promise<T> {
  const running = inflight.get(key);
  if (running !== undefined) return running;
  const started = run().finally(() => inflight.delete(key));
  inflight.set(key, started);
  return started;
}
