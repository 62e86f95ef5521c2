import { SessionLogError, SessionLogErrorCode } from './errors.js';

/** The oldest nats-server the log runs on. */
export const MIN_SERVER_VERSION = '2.11.0';

/**
 * What the log needs of its server, named in the refusal of an older one:
 * each came in 2.11 or earlier, and each has no safe substitute on 2.9/2.10
 * (a 2.9.10 cluster lost acknowledged events under power loss: finding 5,
 * docs/reliability.md).
 */
export const REQUIRED_FEATURES = [
  'batch direct get (a resume reads its backlog in one request per batch, from any replica)',
  'per-message TTL (task records expire on their own)',
  'the writer fencing fix of nats-server#4320 (2.9.21) and stream metadata (2.10: the partition layout)',
] as const;

/**
 * What the connected nats-server is, read from the version in its INFO at
 * connect, for startup logs and `/readyz`. Everything the log uses is in
 * every server it accepts (`assertSupportedServer`); what a newer server adds
 * is reported, not used.
 */
export interface ServerFeatures {
  /** `2.15.1`, as the server reports it (`unknown` if it did not). */
  readonly version: string;
  /** Atomic batch publish (`Nats-Batch-*`), 2.12+. Not used: see docs/design.md. */
  readonly atomicBatchPublish: boolean;
}

/** What `SessionLog.server` reports. */
export interface ServerReport {
  readonly version: string;
  readonly features: ServerFeatures;
}

export function serverFeatures(version: string | undefined): ServerFeatures {
  const v = parseVersion(version);
  return {
    version: v === undefined ? 'unknown' : (version ?? 'unknown'),
    atomicBatchPublish: v !== undefined && atLeast(v, [2, 12, 0]),
  };
}

/** Whether a server version is one the log runs on (2.11+). An unparseable version is not. */
export function isSupportedServer(version: string | undefined): boolean {
  const v = parseVersion(version);
  return v !== undefined && atLeast(v, parseVersion(MIN_SERVER_VERSION) as Version);
}

/**
 * Refuses a server older than 2.11 with the version found, what the log
 * needs, and the way to a current server. Called at connect by every
 * process that opens the log (gateway, session-log service, SDK stores,
 * tether-admin, tether-inspect).
 */
export function assertSupportedServer(version: string | undefined, where = 'the NATS server'): void {
  if (isSupportedServer(version)) return;
  throw new SessionLogError(
    SessionLogErrorCode.unsupportedServer,
    `${where} is nats-server ${version ?? 'of unknown version'}; Tether needs ${MIN_SERVER_VERSION} or newer for ${REQUIRED_FEATURES.join('; ')}. ` +
      'Run a current nats-server: `bash scripts/nats-server.sh current` prints the path of one (it fetches a current release when the machine has none).',
    { detail: { version: version ?? null, minimum: MIN_SERVER_VERSION } },
  );
}

/** The report of a connection, recomputed only when the server it talks to changes (a reconnect may land on another version mid-upgrade). */
export function createServerReporter(version: () => string | undefined): () => ServerReport {
  let cached: ServerReport | undefined;
  return () => {
    const now = version();
    if (cached === undefined || cached.version !== (now ?? 'unknown')) {
      const features = serverFeatures(now);
      cached = { version: features.version, features };
    }
    return cached;
  };
}

type Version = readonly [number, number, number];

function atLeast(v: Version, min: Version): boolean {
  return v[0] !== min[0] ? v[0] > min[0] : v[1] !== min[1] ? v[1] > min[1] : v[2] >= min[2];
}

function parseVersion(version: string | undefined): Version | undefined {
  const match = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (match === null) return undefined;
  return [Number(match[1]), Number(match[2]), Number(match[3])];
}
