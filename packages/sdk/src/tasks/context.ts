import type { JetStreamClient, JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import type { LeaderQuorumCheck } from '@tether/session-log';
import type { DurableTasksConfig } from './config.js';
import { isNoMessageFound, unavailable } from './errors.js';
import type { TtlPath } from './setup.js';
import type { TaskSubjects } from './wire.js';

/** Test seams, reachable only through the internal option of createDurableTasks. */
export interface TaskFaults {
  /** Awaited after a write was prepared from a fresh read and before it is published (tests freeze the server here to lose the ack). */
  beforeCommit?(what: 'create' | 'status' | 'result'): Promise<void>;
}

/** What the store and the queue share: the connection's JetStream handles and the resolved configuration. */
export interface TasksContext {
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly config: DurableTasksConfig;
  readonly subjects: TaskSubjects;
  readonly ttlPath: TtlPath;
  /** The result cap in force: the configured one, lowered to what the server's `max_payload` leaves room for. */
  readonly maxResultBytes: number;
  readonly maxQueuedMessageBytes: number;
  readonly faults: TaskFaults;
  /** Confirms a "no message" of a replicated stream's leader before it is believed (`findTask`). */
  readonly quorum: LeaderQuorumCheck;
}

/** The newest message of a subject, or null; read from the stream leader (the streams have no direct gets). */
export async function lastOnSubject(ctx: TasksContext, stream: string, subject: string): Promise<StoredMsg | null> {
  try {
    return await ctx.jsm.streams.getMessage(stream, { last_by_subj: subject });
  } catch (err) {
    if (isNoMessageFound(err)) return null;
    throw unavailable(err, 'read');
  }
}

/** The oldest message of a subject, or null. `next_by_subj` on STREAM.MSG.GET is answered by 2.9 servers too; the client types it only for direct gets. */
export async function firstOnSubject(ctx: TasksContext, stream: string, subject: string): Promise<StoredMsg | null> {
  try {
    return await ctx.jsm.streams.getMessage(stream, { seq: 1, next_by_subj: subject } as unknown as { seq: number });
  } catch (err) {
    if (isNoMessageFound(err)) return null;
    throw unavailable(err, 'read');
  }
}

/**
 * The `Nats-TTL` of a message that must be gone at `expiresAtMs`, or
 * undefined when the streams expire by `max_age` and read checks only.
 * Whole seconds, rounded up: the server never removes a message before its
 * task expires, and reads hide it from the exact millisecond.
 */
export function messageTtl(ctx: TasksContext, expiresAtMs: number, nowMs: number): string | undefined {
  if (ctx.ttlPath !== 'per-message-ttl') return undefined;
  return `${Math.max(1, Math.ceil((expiresAtMs - nowMs) / 1000))}s`;
}

/** Removes every message of a subject (an expired task on the fallback path). Best effort: `max_age` collects what this misses. */
export async function purgeSubject(ctx: TasksContext, stream: string, subject: string): Promise<void> {
  await ctx.jsm.streams.purge(stream, { filter: subject }).catch(() => undefined);
}
