import type { SessionLogConfig } from './config.js';
import { SessionLogError, SessionLogErrorCode } from './errors.js';
import { DEFAULT_LEASES_BUCKET, DEFAULT_SESSIONS_BUCKET, DEFAULT_STREAM_NAME, namespaceNames, partitionName, partitionOf } from './wire.js';

/** One partition of the log: the stream and buckets of the sessions that hash to it. */
export interface Partition {
  readonly index: number;
  /** `TETHER_LOG` (one partition), `TETHER_LOG-<index>[_<namespace>]`. */
  readonly streamName: string;
  readonly sessionsBucket: string;
  readonly leasesBucket: string;
}

/** Where every session of a log lives. */
export interface LogLayout {
  readonly partitions: readonly Partition[];
  /** The partition holding `sessionId`. */
  of(sessionId: string): Partition;
}

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The partitions of a configured log. Names derived from the namespace put
 * the index before it (`TETHER_LOG-3_staging`); names set explicitly get
 * `-<index>` appended. One partition keeps every name as configured.
 */
export function logLayout(config: SessionLogConfig): LogLayout {
  const count = config.partitions;
  const derived = namespaceNames(config.namespace);
  const nameOf = (configured: string, derivedName: string, base: string, index: number): string =>
    partitionName(configured, configured === derivedName ? { base, namespace: config.namespace } : undefined, index, count);
  const partitions: Partition[] = [];
  for (let index = 0; index < count; index += 1) {
    const partition = {
      index,
      streamName: nameOf(config.streamName, derived.streamName, DEFAULT_STREAM_NAME, index),
      sessionsBucket: nameOf(config.sessionsBucket, derived.sessionsBucket, DEFAULT_SESSIONS_BUCKET, index),
      leasesBucket: nameOf(config.leasesBucket, derived.leasesBucket, DEFAULT_LEASES_BUCKET, index),
    };
    for (const [key, name] of Object.entries(partition)) {
      if (typeof name === 'string' && !NAME.test(name)) {
        throw new SessionLogError(SessionLogErrorCode.invalidConfig, `invalid session log config: ${key} of partition ${index} would be ${JSON.stringify(name)}, over 64 characters; shorten the name or the namespace`, { key });
      }
    }
    partitions.push(partition);
  }
  return { partitions, of: (sessionId) => partitions[partitionOf(sessionId, count)] as Partition };
}
