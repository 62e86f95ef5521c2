import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import type { SessionLogConfig } from './config.js';
import { SessionLogError, SessionLogErrorCode, JsErrCode, jsErrorCode } from './errors.js';
import { logLayout } from './layout.js';
import type { LogLayout, Partition } from './layout.js';
import { createSubjects, MAX_PARTITIONS } from './wire.js';

const NANOS_PER_MS = 1_000_000;

export interface LogHandles {
  readonly layout: LogLayout;
  /** Each partition's registry and lease buckets, by partition index. */
  readonly sessions: readonly KV[];
  readonly leases: readonly KV[];
  /** One bucket for the whole log: it is keyed by principal, whose sessions may be in any partition. */
  readonly principals: KV;
}

/** Stream metadata key holding the partition count the stream was made for. */
export const PARTITIONS_METADATA_KEY = 'tether_partitions';

/**
 * How long a principal's entry outlives its last change (a session created or
 * closed). It must outlast sessions, which live while touched; past it a
 * principal that kept old sessions alive that long may open `limit` more.
 * Without it, every rotated bearer token would leave a key forever.
 */
const PRINCIPAL_ENTRY_MIN_MS = 7 * 24 * 3_600_000;

/** The stream config partition `index` (default 0, the only one of an unpartitioned log) needs. Exported so tests and docs can show it. */
export function desiredStreamConfig(config: SessionLogConfig, index = 0): Partial<StreamConfig> & { name: string } {
  const subjects = createSubjects(config.subjectPrefix, config.partitions);
  const partition = logLayout(config).partitions[index];
  if (partition === undefined) throw new RangeError(`no partition ${index} in a log of ${config.partitions}`);
  const logWildcard = subjects.partitionLogWildcard(index);
  return {
    name: partition.streamName,
    // The audit events share the stream, so they share its retention (max_age, max_bytes).
    subjects: [logWildcard, subjects.partitionAuditWildcard(index)],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: config.replicas,
    max_age: config.maxAgeMs * NANOS_PER_MS,
    max_msgs_per_subject: config.maxMsgsPerStream,
    max_bytes: config.maxBytes,
    discard: DiscardPolicy.Old,
    duplicate_window: config.duplicateWindowMs * NANOS_PER_MS,
    // Replays read batches with direct gets (any replica answers; what is
    // absent is still asked of the leader, see classify.ts).
    allow_direct: true,
    // The server republishes every *stored* event to `<prefix>.live.…` with
    // its stream sequence. Live readers listen there, never on the log subject
    // itself: a core subscription on `<prefix>.log.…` also sees publishes that
    // JetStream rejected (a tripped writer), which were never durable.
    // Every partition republishes into the one live subject space
    // (`<prefix>.live.<session>.<stream>`, the partition token dropped), so
    // a live reader needs no partition and the subscriptions stay per stream.
    republish: { src: logWildcard, dest: subjects.liveWildcard },
    ...(config.partitions > 1 ? { metadata: { [PARTITIONS_METADATA_KEY]: String(config.partitions) } } : {}),
    ...(config.placementTags.length > 0 ? { placement: { cluster: '', tags: [...config.placementTags] } } : {}),
  };
}

/**
 * Creates the log stream and its buckets, or verifies that existing ones
 * match the configuration. A mismatch is a startup error naming every
 * differing key: changing retention or replicas under running gateways is an
 * operator's decision, never a side effect of starting one.
 */
export async function ensureLog(nc: NatsConnection, jsm: JetStreamManager, config: SessionLogConfig): Promise<LogHandles> {
  const layout = logLayout(config);
  await checkPartitionCount(jsm, config);
  const kvm = new Kvm(nc);
  const tags = config.placementTags;
  // Partitions are independent: made or checked side by side.
  const parts = await Promise.all(
    layout.partitions.map(async (partition: Partition) => {
      await ensureStream(jsm, desiredStreamConfig(config, partition.index));
      // Buckets are read through the stream leader (allow_direct: false): right
      // after an initialize on instance A, instance B must see the session.
      const sessions = await ensureBucket(jsm, kvm, partition.sessionsBucket, config.sessionIdleMs, config.replicas, tags);
      // Lease expiry lives in the value; the bucket's max age only collects
      // leases nobody released (a writer that died and was never replaced).
      const leases = await ensureBucket(jsm, kvm, partition.leasesBucket, Math.max(config.sessionIdleMs, 60_000), config.replicas, tags);
      return { sessions, leases };
    }),
  );
  const principals = await ensureBucket(jsm, kvm, config.principalsBucket, Math.max(PRINCIPAL_ENTRY_MIN_MS, 2 * config.sessionIdleMs), config.replicas, tags);
  return { layout, sessions: parts.map((p) => p.sessions), leases: parts.map((p) => p.leases), principals };
}

/**
 * Refuses a partition count other than the one the deployment's log was
 * made with. Sessions are placed by a hash of their id modulo the count, so
 * another count would look for most sessions in a stream that does not hold
 * them: every resume would be refused, and new sessions would land beside
 * streams nobody reads. Read from partition 0's metadata, or from which of
 * the one-partition and the many-partition streams exists.
 */
async function checkPartitionCount(jsm: JetStreamManager, config: SessionLogConfig): Promise<void> {
  const found = await findLayout(jsm, config);
  let existing: { count: number | undefined; names: string } | undefined;
  if (config.partitions === 1 && found.many !== undefined) existing = { count: found.recorded, names: `${found.firstOfManyName}, …` };
  else if (config.partitions > 1 && found.one !== undefined) existing = { count: 1, names: found.singleName };
  else if (config.partitions > 1 && found.many !== undefined && found.recorded !== config.partitions) existing = { count: found.recorded, names: `${found.firstOfManyName}, …` };
  if (existing === undefined) return;
  const count = existing.count === undefined ? 'an unknown number of' : String(existing.count);
  throw new SessionLogError(
    SessionLogErrorCode.incompatibleLog,
    `the log of this deployment has ${count} partition(s) (${existing.names}), and this process was started with --log-partitions ${config.partitions}. ` +
      'Sessions are placed by a hash of their id modulo the partition count, so another count would look for them in streams that do not hold them. ' +
      `Start every process with --log-partitions ${count}. To change the count, run the new layout under a new --namespace beside this one, ` +
      'send new sessions to it, and retire this one when its sessions have idled out (docs/design.md, "Partitions").',
    { key: 'partitions', detail: { found: existing.count ?? null, configured: config.partitions } },
  );
}

/** Which layouts of a configured log exist on the server: the one-stream log, partition 0 of a partitioned one, and the count partition 0 records. */
export interface FoundLayout {
  /** `TETHER_LOG[_<ns>]` (or the configured name). */
  readonly singleName: string;
  /** `TETHER_LOG-0[_<ns>]`: partition 0's name is the same for every count past 1. */
  readonly firstOfManyName: string;
  readonly one: StreamConfig | undefined;
  readonly many: StreamConfig | undefined;
  /** Partition 0's `tether_partitions`, when it is a count from 2 to MAX_PARTITIONS. */
  readonly recorded: number | undefined;
}

/**
 * Reads which layout of the log exists, whatever `config.partitions` says:
 * what `ensureLog` checks a process's count against, and what operators'
 * tools read the count from. `log_unavailable` when the server cannot be asked.
 */
export async function findLayout(jsm: JetStreamManager, config: SessionLogConfig): Promise<FoundLayout> {
  const singleName = logLayout({ ...config, partitions: 1 }).partitions[0]?.streamName as string;
  const firstOfManyName = logLayout({ ...config, partitions: 2 }).partitions[0]?.streamName as string;
  const info = async (name: string): Promise<StreamConfig | undefined> => {
    try {
      return (await jsm.streams.info(name)).config;
    } catch (err) {
      if (jsErrorCode(err) === JsErrCode.streamNotFound || /stream not found/i.test(String(err))) return undefined;
      throw unavailable(err);
    }
  };
  const [one, many] = await Promise.all([info(singleName), info(firstOfManyName)]);
  const text = many?.metadata?.[PARTITIONS_METADATA_KEY];
  const recorded = text !== undefined && /^[0-9]{1,3}$/.test(text) && Number(text) >= 2 && Number(text) <= MAX_PARTITIONS ? Number(text) : undefined;
  return { singleName, firstOfManyName, one, many, recorded };
}

/** Creates the stream, or checks that the existing one is what the log needs. */
async function ensureStream(jsm: JetStreamManager, want: Partial<StreamConfig> & { name: string }): Promise<void> {
  let existing: StreamConfig;
  try {
    existing = (await jsm.streams.info(want.name)).config;
  } catch (err) {
    if (jsErrorCode(err) !== JsErrCode.streamNotFound && !/stream not found/i.test(String(err))) throw unavailable(err);
    try {
      await jsm.streams.add(want);
      return;
    } catch (addErr) {
      // Another instance may have created it first; fall through to verify.
      existing = (await jsm.streams.info(want.name).catch(() => { throw unavailable(addErr); })).config;
    }
  }
  existing = await addAuditSubject(jsm, existing, want);
  const diffs: string[] = [];
  const subjects = existing.subjects ?? [];
  for (const subject of want.subjects ?? []) {
    if (!subjects.includes(subject)) diffs.push(`subjects lacks ${subject} (has ${JSON.stringify(subjects)})`);
  }
  // allow_direct: replays read only through direct gets (a stream made by hand without it is refused, not changed).
  for (const key of ['retention', 'storage', 'num_replicas', 'max_age', 'max_msgs_per_subject', 'max_bytes', 'discard', 'duplicate_window', 'allow_direct'] as const) {
    if (existing[key] !== want[key]) diffs.push(`${key} is ${String(existing[key])}, config wants ${String(want[key])}`);
  }
  const wantCount = want.metadata?.[PARTITIONS_METADATA_KEY];
  if (wantCount !== undefined && existing.metadata?.[PARTITIONS_METADATA_KEY] !== wantCount) {
    diffs.push(`metadata ${PARTITIONS_METADATA_KEY} is ${JSON.stringify(existing.metadata?.[PARTITIONS_METADATA_KEY] ?? null)}, config wants ${wantCount}`);
  }
  const republish = existing.republish;
  if (republish?.src !== want.republish?.src || republish?.dest !== want.republish?.dest) {
    diffs.push(`republish is ${JSON.stringify(republish ?? null)}, config wants ${JSON.stringify(want.republish)}`);
  }
  if (diffs.length > 0) throw incompatible(`stream ${want.name}`, diffs);
}

/**
 * A log stream made before the audit events captures `<prefix>.log.>` only.
 * Adding `<prefix>.audit.>` is the one change made to an existing stream on
 * startup: it stores nothing new under the old subjects and changes no
 * limit, and without it every deployment would refuse to start after the
 * upgrade. Only when the stream has exactly the log subject (the shape this
 * library made), so a stream an operator shaped otherwise is reported, not
 * edited. A failed update (an overlapping stream, no permission) is left to
 * the check below, which names the missing subject.
 */
async function addAuditSubject(jsm: JetStreamManager, existing: StreamConfig, want: Partial<StreamConfig> & { name: string }): Promise<StreamConfig> {
  const [logSubject, auditSubject] = want.subjects ?? [];
  const subjects = existing.subjects ?? [];
  if (auditSubject === undefined || subjects.length !== 1 || subjects[0] !== logSubject) return existing;
  try {
    return (await jsm.streams.update(want.name, { subjects: [...subjects, auditSubject] })).config;
  } catch {
    return existing;
  }
}

async function ensureBucket(jsm: JetStreamManager, kvm: Kvm, bucket: string, ttlMs: number, replicas: number, tags: readonly string[]): Promise<KV> {
  const opts = { history: 1, ttl: ttlMs, replicas, allow_direct: false, ...(tags.length > 0 ? { placement: { cluster: '', tags: [...tags] } } : {}) } as Parameters<Kvm['create']>[1];
  let kv: KV;
  try {
    kv = await kvm.create(bucket, opts);
  } catch (err) {
    throw unavailable(err);
  }
  const cfg = (await jsm.streams.info(`KV_${bucket}`)).config;
  const diffs: string[] = [];
  if (cfg.max_age !== ttlMs * NANOS_PER_MS) diffs.push(`ttl is ${cfg.max_age / NANOS_PER_MS} ms, config wants ${ttlMs} ms`);
  if (cfg.num_replicas !== replicas) diffs.push(`replicas is ${cfg.num_replicas}, config wants ${replicas}`);
  if (cfg.max_msgs_per_subject !== 1) diffs.push(`history is ${cfg.max_msgs_per_subject}, must be 1`);
  if (diffs.length > 0) throw incompatible(`bucket ${bucket}`, diffs);
  return kv;
}

function incompatible(what: string, diffs: readonly string[]): SessionLogError {
  return new SessionLogError(
    SessionLogErrorCode.incompatibleLog,
    `existing ${what} does not match the configuration: ${diffs.join('; ')}. ` +
      'Change the configuration to match, or migrate the stream deliberately (it is never changed on startup).',
    { detail: { what, diffs } },
  );
}

export function unavailable(err: unknown): SessionLogError {
  if (err instanceof SessionLogError) return err;
  return new SessionLogError(SessionLogErrorCode.logUnavailable, `JetStream request failed: ${String(err)}`, {}, { cause: err });
}
