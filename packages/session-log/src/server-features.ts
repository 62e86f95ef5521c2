import type { NatsConnection } from '@nats-io/transport-node';

/**
 * What the connected nats-server can do that the log cares about, read from
 * the version in its INFO at connect. The library picks its paths from this
 * (the fast ones on current servers, the 2.9 ones on older), and reports both
 * so startup logs and `/readyz` say what runs.
 */
export interface ServerFeatures {
  /** `2.15.1`, as the server reports it (`unknown` if it did not). */
  readonly version: string;
  /**
   * Batch direct get (`$JS.API.DIRECT.GET.<stream>` with `batch`, `next_by_subj`
   * and `max_bytes`, ending in `204 EOB`): a resume reads its backlog in one
   * request per batch, with no consumer to create and delete. 2.11+.
   */
  readonly batchDirectGet: boolean;
  /**
   * `Nats-Expected-Last-Subject-Sequence` fences two writers of one subject on
   * a replicated stream (nats-server#4320, fixed in 2.9.21). Earlier servers
   * may store both; the log's duplicate-ack check and the readers' chain check
   * still turn that into an explicit `writer_conflict` / `stream_diverged`.
   */
  readonly subjectSequenceFencing: boolean;
  /** Per-subject state kept in the file store, so filtered reads cost O(subject), not O(block) (2.10+). */
  readonly perSubjectIndex: boolean;
  /** Per-message TTL (`Nats-TTL`), 2.11+. Not used yet. */
  readonly perMessageTtl: boolean;
  /** Atomic batch publish (`Nats-Batch-*`), 2.12+. Not used: see docs/design.md. */
  readonly atomicBatchPublish: boolean;
}

/** How the log reads and writes on this server, for logs and `/readyz`. */
export interface LogPaths {
  /** `direct-batch` (batch direct get) or `consumer` (an ephemeral pull consumer per pass). */
  readonly replay: 'direct-batch' | 'consumer';
  /** `direct-batch` (cursor, successors and head in one round trip) or `msg-get` (three leader gets). */
  readonly classify: 'direct-batch' | 'msg-get';
}

/** Features of a server version; unparseable versions get the 2.9 floor's (nothing optional). */
export function serverFeatures(version: string | undefined): ServerFeatures {
  const v = parseVersion(version);
  const atLeast = (major: number, minor: number, patch = 0): boolean =>
    v !== undefined && (v[0] !== major ? v[0] > major : v[1] !== minor ? v[1] > minor : v[2] >= patch);
  return {
    version: v === undefined ? 'unknown' : (version ?? 'unknown'),
    batchDirectGet: atLeast(2, 11),
    subjectSequenceFencing: atLeast(2, 9, 21),
    perSubjectIndex: atLeast(2, 10),
    perMessageTtl: atLeast(2, 11),
    atomicBatchPublish: atLeast(2, 12),
  };
}

/** The paths a server with `features` allows, for a log stream with or without `allow_direct`. */
export function logPaths(features: ServerFeatures, allowDirect: boolean): LogPaths {
  const direct = features.batchDirectGet && allowDirect;
  return { replay: direct ? 'direct-batch' : 'consumer', classify: direct ? 'direct-batch' : 'msg-get' };
}

/** What `SessionLog.server` reports: the server, what it can do, and the paths the log takes on it. */
export interface ServerReport {
  readonly version: string;
  readonly features: ServerFeatures;
  readonly paths: LogPaths;
}

/**
 * Features and paths of a connection, recomputed only when the server it
 * talks to changes (a reconnect may land on another version mid-upgrade).
 */
export function createServerReporter(nc: NatsConnection, allowDirect: boolean): () => ServerReport {
  let cached: ServerReport | undefined;
  return () => {
    const version = nc.info?.version;
    if (cached === undefined || cached.version !== (version ?? 'unknown')) {
      const features = serverFeatures(version);
      cached = { version: features.version, features, paths: logPaths(features, allowDirect) };
    }
    return cached;
  };
}

function parseVersion(version: string | undefined): readonly [number, number, number] | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (match === null) return undefined;
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}
