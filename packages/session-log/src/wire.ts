/**
 * Every subject, bucket and stream name the log uses, in one place.
 * Subjects are always derived from a validated session id and stream id,
 * never from a client-supplied cursor (DESIGN section 10).
 */
export const DEFAULT_STREAM_NAME = 'TETHER_LOG';
export const DEFAULT_SUBJECT_PREFIX = 'tether';
export const DEFAULT_SESSIONS_BUCKET = 'tether_sessions';
export const DEFAULT_LEASES_BUCKET = 'tether_leases';
export const DEFAULT_PRINCIPALS_BUCKET = 'tether_principals';
export const DEFAULT_TASKS_STREAM = 'TETHER_EDGE_TASKS';

/**
 * A namespace: 1 to 32 lowercase letters, digits, `_` and `-`, starting with
 * a letter or digit. Lowercase only, so that two namespaces never differ by
 * case alone (a file store on a case-insensitive file system would put their
 * streams in one directory). 32 keeps the longest derived name,
 * `KV_tether_principals_<namespace>` (21 + 32), within the 64 characters the
 * config allows a stream or bucket name, with room for names to come.
 */
export const NAMESPACE_PATTERN = /^[a-z0-9][a-z0-9_-]{0,31}$/;
export const NAMESPACE_MAX_LENGTH = 32;
export const NAMESPACE_ALLOWED = `1 to ${NAMESPACE_MAX_LENGTH} lowercase letters, digits, _ and -, starting with a letter or digit`;

/** Every name a namespace determines. */
export interface NamespaceNames {
  readonly streamName: string;
  readonly subjectPrefix: string;
  readonly sessionsBucket: string;
  readonly leasesBucket: string;
  readonly principalsBucket: string;
  /** The gateway's durable tasks (2026-07-28 Tasks extension). */
  readonly tasksStream: string;
}

/**
 * The names of a namespace's log. No namespace (`''`) is today's layout,
 * exactly. A namespace `N` appends `_N` to the stream and every bucket and
 * makes the subject root `tether_N`: a first token of its own, so no subject
 * of one namespace (nor of the default) can match a filter or a wildcard of
 * another, whatever kinds (`log`, `live`, `ctl`, `writer`, …) are added later,
 * and a NATS permission on `tether_N.>` covers one namespace only. Names are
 * injective in `N`: the default has no suffix, and no base name is a prefix
 * of another's base plus `_`.
 */
export function namespaceNames(namespace: string): NamespaceNames {
  if (namespace === '') {
    return {
      streamName: DEFAULT_STREAM_NAME,
      subjectPrefix: DEFAULT_SUBJECT_PREFIX,
      sessionsBucket: DEFAULT_SESSIONS_BUCKET,
      leasesBucket: DEFAULT_LEASES_BUCKET,
      principalsBucket: DEFAULT_PRINCIPALS_BUCKET,
      tasksStream: DEFAULT_TASKS_STREAM,
    };
  }
  return {
    streamName: `${DEFAULT_STREAM_NAME}_${namespace}`,
    subjectPrefix: `${DEFAULT_SUBJECT_PREFIX}_${namespace}`,
    sessionsBucket: `${DEFAULT_SESSIONS_BUCKET}_${namespace}`,
    leasesBucket: `${DEFAULT_LEASES_BUCKET}_${namespace}`,
    principalsBucket: `${DEFAULT_PRINCIPALS_BUCKET}_${namespace}`,
    tasksStream: `${DEFAULT_TASKS_STREAM}_${namespace}`,
  };
}

/** A server tag for `placementTags` (`--log-placement-tags`): e.g. `region:eu`, `az=1`. */
export const PLACEMENT_TAG_PATTERN = /^[A-Za-z0-9_:./=-]{1,64}$/;
export const PLACEMENT_TAG_ALLOWED = 'server tags of 1 to 64 letters, digits and _ : . / = -, comma separated';

/** The most partitions a log may have: each is a stream and two buckets, so three Raft groups. */
export const MAX_PARTITIONS = 256;

/**
 * The partition that holds a session: FNV-1a (32 bits) of the session id,
 * modulo the partition count. The same hash as nats-server's subject-mapping
 * `partition(n, …)`, so `<prefix>.log.{{partition(n,1)}}.{{wildcard(1)}}…`
 * in a server mapping lands where the log writes. No lookup: any process
 * that knows the count finds any session.
 */
export function partitionOf(sessionId: string, partitions: number): number {
  if (partitions <= 1) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i += 1) {
    // Session ids are ASCII (ids.ts), so a char code is its UTF-8 byte.
    hash ^= sessionId.charCodeAt(i) & 0xff;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % partitions;
}

/**
 * The name of partition `index` of a stream or bucket. One partition is
 * today's layout, exactly (`TETHER_LOG`). With more, the index goes between
 * the base and the namespace, `TETHER_LOG-3` and `TETHER_LOG-3_staging`, so
 * no partitioned name equals any namespace's unpartitioned one (a namespace
 * is appended after `_` and may itself contain `-3`). A name the caller set
 * explicitly (not derived from the namespace) gets `-<index>` appended.
 */
export function partitionName(name: string, derived: { readonly base: string; readonly namespace: string } | undefined, index: number, partitions: number): string {
  if (partitions <= 1) return name;
  if (derived === undefined) return `${name}-${index}`;
  return derived.namespace === '' ? `${derived.base}-${index}` : `${derived.base}-${index}_${derived.namespace}`;
}

export interface Subjects {
  /** `<prefix>.log.>`: what the log streams capture, every partition's. */
  readonly logWildcard: string;
  /**
   * `<prefix>.log.<session>.<stream>`: one stream of one session; with more
   * than one partition `<prefix>.log.<partition>.<session>.<stream>`.
   */
  log(sessionId: string, stream: string): string;
  /** `<prefix>.log[.<partition>].<session>.>`: every stream of a session (purge filter). */
  sessionLogs(sessionId: string): string;
  /** What partition `index`'s stream captures: `<prefix>.log.<index>.>` (`<prefix>.log.>` with one partition). */
  partitionLogWildcard(index: number): string;
  /** `<prefix>.audit[.<index>].>`: the audit events partition `index`'s stream captures. */
  partitionAuditWildcard(index: number): string;
  /** `<prefix>.live.>`: where the stream republishes every stored event. */
  readonly liveWildcard: string;
  /** `<prefix>.live.<session>.<stream>`: stored events of one stream, as the server republishes them. */
  live(sessionId: string, stream: string): string;
  /** `<prefix>.ctl.<session>`: core-NATS control messages for a session. */
  control(sessionId: string): string;
  /** `<prefix>.writer.<writer>`: a writer process's presence; "no responders" there means it is gone. */
  writer(writerId: string): string;
  /**
   * `<prefix>.audit.>`: what the log streams also capture, for the audit
   * events (metadata of each request, `audit.ts`). Outside `log.>`, so a
   * session's close does not purge them and they are not republished.
   */
  readonly auditWildcard: string;
  /** `<prefix>.audit[.<partition>].<session>`: the audit events of one session, in its partition. */
  audit(sessionId: string): string;
  /** `<prefix>.admin.<instance>`: operator requests to one gateway instance (`drain`), from tether-admin. */
  admin(instanceId: string): string;
  /**
   * `<prefix>.admin_where.<instance>`: asked by tether-admin before a drain;
   * a session-log service answers with the address (`admin` subject's
   * instance part) of each gateway on `--log grpc://` it holds by that name,
   * one per caller (its WatchAdmin calls), so a name never reaches another
   * caller's gateway unseen.
   */
  adminWhere(instanceId: string): string;
  /** `<prefix>.edge.task.>`: what the task stream captures (the gateway's tasks, 2026-07-28). */
  readonly taskWildcard: string;
  /** `<prefix>.edge.task.<task>`: one task's record (one message per subject). */
  task(taskId: string): string;
  /** `<prefix>.edge.live.>`: where the task stream republishes every stored record. */
  readonly taskLiveWildcard: string;
  /** `<prefix>.edge.live.<task>`: one task's stored records, as the server republishes them. */
  taskLive(taskId: string): string;
  /** `<prefix>.edge.cancel.<writer>`: cancel requests to the instance running a task. */
  taskCancel(writerId: string): string;
  /** `<prefix>.edge.event.>`: what the task events stream captures. */
  readonly taskEventWildcard: string;
  /** `<prefix>.edge.event.<task>`: one task's recorded notifications. */
  taskEvent(taskId: string): string;
}

/**
 * The subjects of a log with `partitions` partitions (default 1: today's
 * subjects, exactly). Only what the log streams store carries the
 * partition (events and audit events); everything core-NATS (live, control,
 * presence, admin) is one subject space, so a connection's shared
 * subscriptions stay one each, whatever the partition count.
 */
export function createSubjects(prefix: string, partitions = 1): Subjects {
  const within = (sessionId: string): string => (partitions <= 1 ? sessionId : `${partitionOf(sessionId, partitions)}.${sessionId}`);
  return {
    logWildcard: `${prefix}.log.>`,
    log: (sessionId, stream) => `${prefix}.log.${within(sessionId)}.${stream}`,
    sessionLogs: (sessionId) => `${prefix}.log.${within(sessionId)}.>`,
    partitionLogWildcard: (index) => (partitions <= 1 ? `${prefix}.log.>` : `${prefix}.log.${index}.>`),
    partitionAuditWildcard: (index) => (partitions <= 1 ? `${prefix}.audit.>` : `${prefix}.audit.${index}.>`),
    liveWildcard: `${prefix}.live.>`,
    live: (sessionId, stream) => `${prefix}.live.${sessionId}.${stream}`,
    control: (sessionId) => `${prefix}.ctl.${sessionId}`,
    writer: (writerId) => `${prefix}.writer.${writerId}`,
    auditWildcard: `${prefix}.audit.>`,
    audit: (sessionId) => `${prefix}.audit.${within(sessionId)}`,
    admin: (instanceId) => `${prefix}.admin.${instanceId}`,
    adminWhere: (instanceId) => `${prefix}.admin_where.${instanceId}`,
    taskWildcard: `${prefix}.edge.task.>`,
    task: (taskId) => `${prefix}.edge.task.${taskId}`,
    taskLiveWildcard: `${prefix}.edge.live.>`,
    taskLive: (taskId) => `${prefix}.edge.live.${taskId}`,
    taskCancel: (writerId) => `${prefix}.edge.cancel.${writerId}`,
    taskEventWildcard: `${prefix}.edge.event.>`,
    taskEvent: (taskId) => `${prefix}.edge.event.${taskId}`,
  };
}

/** `Nats-Msg-Id` of an event: a retried append of the same seq is a duplicate. */
export function msgIdOf(sessionId: string, stream: string, seq: number): string {
  return `${sessionId}.${stream}.${seq}`;
}

/** Lease key of a stream writer. */
export function leaseKeyOf(sessionId: string, stream: string): string {
  return `${sessionId}.${stream}`;
}

/** Control message kinds on `<prefix>.ctl.<session>`. */
export const ControlType = {
  closed: 'closed',
  superseded: 'superseded',
  drain: 'drain',
  /**
   * A writer stopped writing `stream` without its end marker (it drained,
   * or the log failed it): whoever serves the stream takes it over now
   * instead of at its next liveness check.
   */
  released: 'released',
} as const;
export type ControlType = (typeof ControlType)[keyof typeof ControlType];

export interface ControlMessage {
  readonly type: ControlType;
  readonly sessionId: string;
  /** For `superseded`: the stream whose older readers must end; for `released`: the stream let go. */
  readonly stream?: string;
  /** Who sent it (an instance id), for logs. */
  readonly from?: string;
}

/** Operator requests on `<prefix>.admin.<instance>` (tether-admin), answered by the instance. */
export const AdminRequestType = {
  /** Drain as on SIGTERM: refuse new work, hand client streams to other instances, stop. */
  drain: 'drain',
} as const;
export type AdminRequestType = (typeof AdminRequestType)[keyof typeof AdminRequestType];

export interface AdminRequest {
  readonly type: AdminRequestType;
  /** Who asks (for the instance's log line). */
  readonly from?: string;
}

export interface AdminAnswer {
  readonly ok: boolean;
  /** The instance that answered (`--instance-id`). */
  readonly instance: string;
  readonly detail?: string;
}

/** Parses an admin request; undefined for anything else. */
export function parseAdminRequest(data: Uint8Array): AdminRequest | undefined {
  try {
    const value = JSON.parse(Buffer.from(data).toString('utf8')) as Partial<AdminRequest> | null;
    if (typeof value !== 'object' || value === null || value.type !== AdminRequestType.drain) return undefined;
    return { type: value.type, ...(typeof value.from === 'string' ? { from: value.from.slice(0, 64) } : {}) };
  } catch {
    return undefined;
  }
}
