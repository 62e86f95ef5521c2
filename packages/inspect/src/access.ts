import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { assertSupportedServer, createSubjects, isSessionLogError, NAMESPACE_ALLOWED, NAMESPACE_PATTERN, namespaceNames } from '@tether/session-log';
import type { Subjects } from '@tether/session-log';
import { InspectError, InspectErrorCode } from './errors.js';

/** Where the read model finds a deployment's log. */
export interface InspectAccessOptions {
  /** NATS server URL(s). Default `nats://127.0.0.1:4222`. Ignored with `nc`. */
  readonly servers?: string | readonly string[];
  /** An open connection to use instead (not closed by `close()`). */
  readonly nc?: NatsConnection;
  /** The deployment's namespace (`--namespace` of its gateways); '' = none. Derives the names below. */
  readonly namespace?: string;
  /** Explicit names win over the namespace's (tests with isolated names). */
  readonly streamName?: string;
  readonly subjectPrefix?: string;
  readonly sessionsBucket?: string;
  /** The gateway's durable tasks; default the namespace's (`TETHER_EDGE_TASKS[_<namespace>]`). */
  readonly tasksStream?: string;
  /** JetStream request timeout. Default 5000 ms. */
  readonly timeoutMs?: number;
}

/**
 * A read (and, for tether-admin, act) handle on one deployment's log: the
 * NATS connection with the operator's credentials, and the names. It never
 * creates or changes the stream or buckets: a name that does not exist is
 * `log_not_found`.
 */
export interface InspectAccess {
  readonly nc: NatsConnection;
  readonly js: JetStreamClient;
  readonly jsm: JetStreamManager;
  readonly streamName: string;
  readonly subjectPrefix: string;
  readonly subjects: Subjects;
  readonly sessions: KV;
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
  const names = namespaceNames(namespace);
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
    const streamName = options.streamName ?? names.streamName;
    const sessionsBucket = options.sessionsBucket ?? names.sessionsBucket;
    try {
      await jsm.streams.info(streamName);
    } catch (err) {
      throw new InspectError(InspectErrorCode.logNotFound, `no log stream ${streamName} on this NATS account${namespace === '' ? '' : ` (namespace ${namespace})`}: check --namespace and --nats (${String(err)})`, { cause: err });
    }
    const sessions = await new Kvm(conn).open(sessionsBucket);
    const subjectPrefix = options.subjectPrefix ?? names.subjectPrefix;
    return {
      nc: conn,
      js: jetstream(conn, { timeout: timeoutMs }),
      jsm,
      streamName,
      subjectPrefix,
      subjects: createSubjects(subjectPrefix),
      sessions,
      tasksStream: options.tasksStream ?? names.tasksStream,
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
