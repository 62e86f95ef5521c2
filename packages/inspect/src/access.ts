import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { assertSupportedServer, createSubjects, isSessionLogError, logLayout, NAMESPACE_ALLOWED, NAMESPACE_PATTERN, namespaceNames, resolveConfig } from '@tether/session-log';
import type { Partition, SessionLogConfig, Subjects } from '@tether/session-log';
import { InspectError, InspectErrorCode } from './errors.js';
import { findPartitionCount } from './find-partitions.js';

/** Where the read model finds a deployment's log. */
export interface InspectAccessOptions {
  /** NATS server URL(s). Default `nats://127.0.0.1:4222`. Ignored with `nc`. */
  readonly servers?: string | readonly string[];
  /** An open connection to use instead (not closed by `close()`). */
  readonly nc?: NatsConnection;
  /** The deployment's namespace (`--namespace` of its gateways); '' = none. Derives the names below. */
  readonly namespace?: string;
  /** Explicit names win over the namespace's (tests with isolated names). With partitions, each gets its partition's suffix (`logLayout`). */
  readonly streamName?: string;
  readonly subjectPrefix?: string;
  readonly sessionsBucket?: string;
  /** Only `tether-admin partitions` reads the lease buckets (their Raft leaders). */
  readonly leasesBucket?: string;
  /**
   * The log's partition count (`--log-partitions` of its gateways). Default:
   * read from the deployment (see `findPartitionCount`). Given, it must be
   * the deployment's: another count is refused (`invalid_argument`) naming
   * both, since it would look for most sessions where they are not.
   */
  readonly partitions?: number;
  /** The gateway's durable tasks; default the namespace's (`TETHER_EDGE_TASKS[_<namespace>]`). */
  readonly tasksStream?: string;
  /** JetStream request timeout. Default 5000 ms. */
  readonly timeoutMs?: number;
}

/** One partition of the log as the read model opens it: its names and its registry bucket. */
export interface PartitionAccess extends Partition {
  readonly sessions: KV;
}

/**
 * A read (and, for tether-admin, act) handle on one deployment's log: the
 * NATS connection with the operator's credentials, and the names. It never
 * creates or changes the streams or buckets: a name that does not exist is
 * `log_not_found`.
 */
export interface InspectAccess {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly subjectPrefix: string;
  /** The log's subjects, the partition included where the log stores one (`createSubjects(prefix, partitions)`). */
  readonly subjects: Subjects;
  /** Every partition, by index: one (`TETHER_LOG`, `tether_sessions`) for an unpartitioned log. */
  readonly partitions: readonly PartitionAccess[];
  /** The partition holding a session (`partitionOf` of its id). */
  partitionOf(sessionId: string): PartitionAccess;
  /** The log's stream(s), for messages: `TETHER_LOG`, or `TETHER_LOG-0 … TETHER_LOG-3 (4 partitions)`. */
  readonly logName: string;
  /** May not exist: the stream is made when a gateway first stores a task. */
  readonly tasksStream: string;
  readonly timeoutMs: number;
  close(): Promise<void>;
}

export async function openInspectAccess(options: InspectAccessOptions = {}): Promise<InspectAccess> {
  const namespace = options.namespace ?? '';
  if (namespace !== '' && !NAMESPACE_PATTERN.test(namespace)) {
    throw new InspectError(InspectErrorCode.invalidArgument, `invalid namespace ${JSON.stringify(namespace)}; allowed: ${NAMESPACE_ALLOWED}`);
  }
  const base = layoutConfig(options, namespace);
  const timeoutMs = options.timeoutMs ?? 5_000;
  let nc = options.nc;
  const owns = nc === undefined;
  if (nc === undefined) {
    const servers = options.servers ?? 'nats://127.0.0.1:4222';
    try {
      nc = await connect({ servers: typeof servers === 'string' ? servers.split(',') : [...servers], maxReconnectAttempts: 2, noAsyncTraces: true });
    } catch (err) {
      throw new InspectError(InspectErrorCode.unavailable, `cannot connect to NATS at ${String(servers)}: ${String(err)}`, { cause: err });
    }
  }
  const conn = nc;
  try {
    try {
      assertSupportedServer(conn.info?.version, `the NATS server at ${conn.getServer()}`);
    } catch (err) {
      throw new InspectError(InspectErrorCode.unavailable, isSessionLogError(err) ? err.message : String(err), { cause: err });
    }
    const jsm = await jetstreamManager(conn, { timeout: timeoutMs });
    const count = await findPartitionCount(jsm, base, options.partitions);
    const layout = logLayout({ ...base, partitions: count });
    const kvm = new Kvm(conn);
    const partitions = await Promise.all(layout.partitions.map(async (p): Promise<PartitionAccess> => ({ ...p, sessions: await kvm.open(p.sessionsBucket) })));
    const first = partitions[0]!;
    const last = partitions[partitions.length - 1]!;
    return {
      nc: conn,
      js: jetstream(conn, { timeout: timeoutMs }),
      jsm,
      subjectPrefix: base.subjectPrefix,
      subjects: createSubjects(base.subjectPrefix, count),
      partitions,
      partitionOf: (sessionId) => partitions[layout.of(sessionId).index]!,
      logName: count === 1 ? first.streamName : `${first.streamName} … ${last.streamName} (${count} partitions)`,
      tasksStream: options.tasksStream ?? namespaceNames(namespace).tasksStream,
      timeoutMs,
      close: async () => {
        if (owns) await conn.drain().catch(() => undefined);
      },
    };
  } catch (err) {
    if (owns) await conn.close().catch(() => undefined);
    throw err;
  }
}

/** The session log's own config for these names (its checks, its defaults), so `logLayout` names the partitions exactly as the gateways do. */
function layoutConfig(options: InspectAccessOptions, namespace: string): SessionLogConfig {
  try {
    return resolveConfig({
      namespace,
      ...(options.streamName === undefined ? {} : { streamName: options.streamName }),
      ...(options.subjectPrefix === undefined ? {} : { subjectPrefix: options.subjectPrefix }),
      ...(options.sessionsBucket === undefined ? {} : { sessionsBucket: options.sessionsBucket }),
      ...(options.leasesBucket === undefined ? {} : { leasesBucket: options.leasesBucket }),
      ...(options.partitions === undefined ? {} : { partitions: options.partitions }),
    });
  } catch (err) {
    throw new InspectError(InspectErrorCode.invalidArgument, isSessionLogError(err) ? err.message : String(err), { cause: err });
  }
}
