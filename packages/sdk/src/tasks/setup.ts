import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import type { DurableTasksConfig } from './config.js';
import { isStreamNotFound, TaskErrorCode, TaskStoreError, unavailable } from './errors.js';
import { createTaskSubjects } from './wire.js';

const NANOS_PER_MS = 1_000_000;
const DUPLICATE_WINDOW_MS = 120_000;

/** How expiry is enforced on this server and these streams, for startup logs. */
export type TtlPath = 'per-message-ttl' | 'max-age-and-read-check';

type WantedStream = Partial<StreamConfig> & { name: string };

/**
 * The two streams. Records: one message per task subject (a KV bucket's
 * shape, written with compare-and-set on the subject's last sequence), so
 * the newest record is the task. Messages: a FIFO per task subject.
 *
 * `max_age` is the backstop on every server: the longest a message may live
 * is the TTL cap (records; a record's expiry is at most `maxTtlMs` after its
 * last write) or twice it (messages, see message-queue.ts). Each message
 * also carries `Nats-TTL`, and the server removes it when its task expires.
 */
export function desiredTaskStreams(config: DurableTasksConfig): { records: WantedStream; messages: WantedStream } {
  const subjects = createTaskSubjects(config.subjectPrefix);
  const common = {
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: config.replicas,
    discard: DiscardPolicy.Old,
    duplicate_window: Math.min(DUPLICATE_WINDOW_MS, config.maxTtlMs) * NANOS_PER_MS,
    // A task created on instance A is read by instance B right after: reads
    // go to the leader (no direct gets), as the session registry's do.
    allow_direct: false,
    allow_msg_ttl: true,
  };
  return {
    records: { ...common, name: config.tasksStream, subjects: [subjects.recordWildcard], max_msgs_per_subject: 1, max_age: config.maxTtlMs * NANOS_PER_MS },
    messages: { ...common, name: config.messagesStream, subjects: [subjects.messageWildcard], max_msgs_per_subject: -1, max_age: 2 * config.maxTtlMs * NANOS_PER_MS },
  };
}

/**
 * Creates both streams or verifies that existing ones match. Returns how
 * expiry runs: a stream created on a server older than 2.11 has no
 * `allow_msg_ttl` and keeps the fallback until an operator enables it.
 */
export async function ensureTaskStreams(jsm: JetStreamManager, config: DurableTasksConfig): Promise<TtlPath> {
  const want = desiredTaskStreams(config);
  const [records, messages] = [await ensureStream(jsm, want.records), await ensureStream(jsm, want.messages)];
  return records.allow_msg_ttl === true && messages.allow_msg_ttl === true ? 'per-message-ttl' : 'max-age-and-read-check';
}

async function ensureStream(jsm: JetStreamManager, want: WantedStream): Promise<StreamConfig> {
  let existing: StreamConfig;
  try {
    existing = (await jsm.streams.info(want.name)).config;
  } catch (err) {
    if (!isStreamNotFound(err)) throw unavailable(err, `stream ${want.name}`);
    try {
      return (await jsm.streams.add(want)).config;
    } catch (addErr) {
      // Another instance may have created it first; fall through to verify.
      existing = (await jsm.streams.info(want.name).catch(() => { throw unavailable(addErr, `stream ${want.name}`); })).config;
    }
  }
  const diffs: string[] = [];
  const subjects = existing.subjects ?? [];
  for (const subject of want.subjects ?? []) {
    if (!subjects.includes(subject)) diffs.push(`subjects lacks ${subject} (has ${JSON.stringify(subjects)})`);
  }
  for (const key of ['retention', 'storage', 'num_replicas', 'max_msgs_per_subject', 'max_age', 'discard'] as const) {
    if (existing[key] !== want[key]) diffs.push(`${key} is ${String(existing[key])}, config wants ${String(want[key])}`);
  }
  if (diffs.length > 0) {
    throw new TaskStoreError(
      TaskErrorCode.incompatibleStreams,
      `existing stream ${want.name} does not match the configuration: ${diffs.join('; ')}. ` +
        'Change the configuration to match, or migrate the stream deliberately (it is never changed on startup).',
      { detail: { stream: want.name, diffs } },
    );
  }
  return existing;
}
