import { SessionLogError, SessionLogErrorCode } from './errors.js';
import { MAX_PARTITIONS, NAMESPACE_ALLOWED, NAMESPACE_PATTERN, namespaceNames, PLACEMENT_TAG_ALLOWED, PLACEMENT_TAG_PATTERN } from './wire.js';

/** How the log is laid out on JetStream. Every field has a default. */
export interface SessionLogOptions {
  /**
   * Separates deployments sharing one NATS account: the defaults of
   * `streamName`, `subjectPrefix` and every bucket derive from it
   * (`TETHER_LOG_<ns>`, `tether_<ns>`, `tether_sessions_<ns>`, … see
   * `namespaceNames`), so two namespaces share no subject, stream or bucket,
   * and a session of one is unknown to another. An explicit name below
   * still wins over the derived one. 1 to 32 of `a-z`, `0-9`, `_`, `-`,
   * starting with a letter or digit. Default `''`: no namespace, today's
   * names exactly.
   */
  readonly namespace?: string;
  /** JetStream stream holding every session's events. Default `TETHER_LOG` (`TETHER_LOG_<namespace>`). */
  readonly streamName?: string;
  /** First subject token(s): events go to `<prefix>.log.<session>.<stream>`. Default `tether` (`tether_<namespace>`). */
  readonly subjectPrefix?: string;
  /**
   * Streams the log is spread over (`--log-partitions`). A session lives
   * wholly in one, chosen by a hash of its id (`partitionOf`): its events,
   * its audit events, its registry entry and its writer leases. Each
   * partition is a stream and two buckets, each with its own Raft leader,
   * so writes spread over a cluster and a read spans one partition's
   * messages only. 1 is the unpartitioned layout (`TETHER_LOG`); more are
   * `TETHER_LOG-<k>`, `tether_sessions-<k>`, `tether_leases-<k>`. Every
   * process of a deployment must use the same count: a different one is
   * refused at startup (see `ensureLog`). Default 1.
   */
  readonly partitions?: number;
  /**
   * Server tags every stream and bucket of the log is placed on
   * (JetStream `placement.tags`), e.g. `['region:eu']`. Default none.
   */
  readonly placementTags?: readonly string[];
  /** Replicas of the stream and buckets: 1 for dev, 3 in production. Default 1. */
  readonly replicas?: number;
  /** Retention window of events (stream `max_age`). Default 24 h. */
  readonly maxAgeMs?: number;
  /** Cap on events of one session stream (`max_msgs_per_subject`); -1 for none. Default 100 000. */
  readonly maxMsgsPerStream?: number;
  /** Cap on the whole log in bytes (`max_bytes`); -1 for none. Default -1. */
  readonly maxBytes?: number;
  /** Window in which a retried append is recognised as a duplicate. Default 2 min (or `maxAgeMs` if shorter). */
  readonly duplicateWindowMs?: number;
  /** Session registry bucket. Default `tether_sessions` (`tether_sessions_<namespace>`). */
  readonly sessionsBucket?: string;
  /** Idle timeout: a session untouched this long disappears. Default 1 h. */
  readonly sessionIdleMs?: number;
  /** Writer lease bucket. Default `tether_leases` (`tether_leases_<namespace>`). */
  readonly leasesBucket?: string;
  /** Sessions-per-principal bucket (see `maxSessionsPerPrincipal`). Default `tether_principals` (`tether_principals_<namespace>`). */
  readonly principalsBucket?: string;
  /** The gateway's durable tasks. Default `TETHER_EDGE_TASKS` (`TETHER_EDGE_TASKS_<namespace>`). */
  readonly tasksStream?: string;
  /** Largest event payload accepted, in bytes. Default 1 MiB minus header room, capped by the server's `max_payload`. */
  readonly maxPayloadBytes?: number;
  /**
   * Events in the first batch direct get of a replay pass, each later one
   * twice as many up to four times, at most 256 KiB (a resume's
   * classification reads twice as many, with the cursor). The next batch is read only when the reader has
   * taken the last one. Default 64.
   */
  readonly readBatch?: number;
  /** Live (core NATS) messages a reader holds before it falls back to the log. Default 256. */
  readonly liveBufferMax?: number;
  /** Time to wait for a JetStream acknowledgement or API answer. Default 5 s. */
  readonly requestTimeoutMs?: number;
}

export type SessionLogConfig = Required<SessionLogOptions>;

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const HOUR = 3_600_000;

/** Fills defaults and validates; a bad value is refused with its key, value and what is allowed. */
export function resolveConfig(options: SessionLogOptions = {}): SessionLogConfig {
  const maxAgeMs = options.maxAgeMs ?? 24 * HOUR;
  const namespace = options.namespace ?? '';
  // Checked before anything is derived from it: a bad namespace is named as such, not as the stream it would make.
  if (namespace !== '') matches('namespace', namespace, NAMESPACE_PATTERN, NAMESPACE_ALLOWED);
  const names = namespaceNames(namespace);
  const config: SessionLogConfig = {
    namespace,
    streamName: options.streamName ?? names.streamName,
    subjectPrefix: options.subjectPrefix ?? names.subjectPrefix,
    partitions: options.partitions ?? 1,
    placementTags: [...(options.placementTags ?? [])],
    replicas: options.replicas ?? 1,
    maxAgeMs,
    maxMsgsPerStream: options.maxMsgsPerStream ?? 100_000,
    maxBytes: options.maxBytes ?? -1,
    // The server requires the duplicate window to fit in the retention window.
    duplicateWindowMs: options.duplicateWindowMs ?? Math.min(120_000, maxAgeMs),
    sessionsBucket: options.sessionsBucket ?? names.sessionsBucket,
    sessionIdleMs: options.sessionIdleMs ?? HOUR,
    leasesBucket: options.leasesBucket ?? names.leasesBucket,
    principalsBucket: options.principalsBucket ?? names.principalsBucket,
    tasksStream: options.tasksStream ?? names.tasksStream,
    maxPayloadBytes: options.maxPayloadBytes ?? 1024 * 1024 - 4096,
    readBatch: options.readBatch ?? 64,
    liveBufferMax: options.liveBufferMax ?? 256,
    requestTimeoutMs: options.requestTimeoutMs ?? 5_000,
  };
  matches('streamName', config.streamName, NAME, 'letters, digits, _ and -, up to 64 characters');
  matches('subjectPrefix', config.subjectPrefix, PREFIX, 'dot-separated tokens of letters, digits, _ and -');
  matches('sessionsBucket', config.sessionsBucket, NAME, 'letters, digits, _ and -, up to 64 characters');
  matches('leasesBucket', config.leasesBucket, NAME, 'letters, digits, _ and -, up to 64 characters');
  matches('principalsBucket', config.principalsBucket, NAME, 'letters, digits, _ and -, up to 64 characters');
  matches('tasksStream', config.tasksStream, NAME, 'letters, digits, _ and -, up to 64 characters');
  integer('partitions', config.partitions, 1, MAX_PARTITIONS);
  if (!Array.isArray(config.placementTags) || config.placementTags.some((tag) => typeof tag !== 'string' || !PLACEMENT_TAG_PATTERN.test(tag))) {
    refuse('placementTags', config.placementTags, PLACEMENT_TAG_ALLOWED);
  }
  integer('replicas', config.replicas, 1, 5);
  integer('maxAgeMs', config.maxAgeMs, 1_000, Number.MAX_SAFE_INTEGER);
  limit('maxMsgsPerStream', config.maxMsgsPerStream);
  limit('maxBytes', config.maxBytes);
  integer('duplicateWindowMs', config.duplicateWindowMs, 1_000, config.maxAgeMs);
  integer('sessionIdleMs', config.sessionIdleMs, 1_000, Number.MAX_SAFE_INTEGER);
  integer('maxPayloadBytes', config.maxPayloadBytes, 1, 64 * 1024 * 1024);
  integer('readBatch', config.readBatch, 1, 10_000);
  integer('liveBufferMax', config.liveBufferMax, 1, 100_000);
  integer('requestTimeoutMs', config.requestTimeoutMs, 100, 600_000);
  return config;
}

function refuse(key: string, value: unknown, allowed: string): never {
  throw new SessionLogError(
    SessionLogErrorCode.invalidConfig,
    `invalid session log config: ${key}=${JSON.stringify(value)}; allowed: ${allowed}`,
    { key, detail: { value, allowed } },
  );
}

function matches(key: string, value: string, re: RegExp, allowed: string): void {
  if (typeof value !== 'string' || !re.test(value)) refuse(key, value, allowed);
}

function integer(key: string, value: number, min: number, max: number): void {
  if (!Number.isSafeInteger(value) || value < min || value > max) refuse(key, value, `an integer from ${min} to ${max}`);
}

function limit(key: string, value: number): void {
  if (!Number.isSafeInteger(value) || value === 0 || value < -1) refuse(key, value, 'a positive integer, or -1 for no limit');
}
