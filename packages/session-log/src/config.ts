import { SessionLogError, SessionLogErrorCode } from './errors.js';
import { DEFAULT_LEASES_BUCKET, DEFAULT_PRINCIPALS_BUCKET, DEFAULT_SESSIONS_BUCKET, DEFAULT_STREAM_NAME, DEFAULT_SUBJECT_PREFIX } from './wire.js';

/** How the log is laid out on JetStream. Every field has a default. */
export interface SessionLogOptions {
  /** JetStream stream holding every session's events. Default `TETHER_LOG`. */
  readonly streamName?: string;
  /** First subject token(s): events go to `<prefix>.log.<session>.<stream>`. Default `tether`. */
  readonly subjectPrefix?: string;
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
  /** Session registry bucket. Default `tether_sessions`. */
  readonly sessionsBucket?: string;
  /** Idle timeout: a session untouched this long disappears. Default 1 h. */
  readonly sessionIdleMs?: number;
  /** Writer lease bucket. Default `tether_leases`. */
  readonly leasesBucket?: string;
  /** Sessions-per-principal bucket (see `maxSessionsPerPrincipal`). Default `tether_principals`. */
  readonly principalsBucket?: string;
  /** Largest event payload accepted, in bytes. Default 1 MiB minus header room, capped by the server's `max_payload`. */
  readonly maxPayloadBytes?: number;
  /**
   * Events fetched from the log per consumer fetch when replaying (2.9/2.10),
   * and in the first batch direct get of a pass (2.11+; a resume reads it
   * with its classification), each later one twice as many up to four
   * times, at most 256 KiB. Either way the next batch is read only when the
   * reader has taken the last one. Default 64.
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
  const config: SessionLogConfig = {
    streamName: options.streamName ?? DEFAULT_STREAM_NAME,
    subjectPrefix: options.subjectPrefix ?? DEFAULT_SUBJECT_PREFIX,
    replicas: options.replicas ?? 1,
    maxAgeMs,
    maxMsgsPerStream: options.maxMsgsPerStream ?? 100_000,
    maxBytes: options.maxBytes ?? -1,
    // The server requires the duplicate window to fit in the retention window.
    duplicateWindowMs: options.duplicateWindowMs ?? Math.min(120_000, maxAgeMs),
    sessionsBucket: options.sessionsBucket ?? DEFAULT_SESSIONS_BUCKET,
    sessionIdleMs: options.sessionIdleMs ?? HOUR,
    leasesBucket: options.leasesBucket ?? DEFAULT_LEASES_BUCKET,
    principalsBucket: options.principalsBucket ?? DEFAULT_PRINCIPALS_BUCKET,
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
