import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { assertSupportedServer, LeaderQuorumCheck, serverFeatures } from '@tether/session-log';
import { resolveTasksConfig } from './config.js';
import type { DurableTasksOptions } from './config.js';
import type { TaskFaults, TasksContext } from './context.js';
import { TaskErrorCode, TaskStoreError, unavailable } from './errors.js';
import { principalKey } from './ids.js';
import { JetStreamTaskMessageQueue } from './message-queue.js';
import { ensureTaskStreams } from './setup.js';
import type { TtlPath } from './setup.js';
import { JetStreamTaskStore } from './task-store.js';
import { createTaskSubjects } from './wire.js';

/** Room a record needs beside its result (the task, digests, JSON framing), and a queued message beside its body (headers). */
const RECORD_OVERHEAD_BYTES = 8 * 1024;
const HEADER_ROOM_BYTES = 1024;
/** nats-server's default `max_payload`, for a connection whose INFO did not say. */
const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

export interface CreateDurableTasksOptions extends DurableTasksOptions {
  /** A connected NATS client. The caller owns it: `createDurableTasks` never closes it. */
  readonly nc: NatsConnection;
  /** @internal Test seams (lose an ack on purpose). Not part of the API. */
  readonly faults?: TaskFaults;
}

/** The `TaskStore` and `TaskMessageQueue` of one principal, to pass to an SDK server's options. */
export interface PrincipalTasks {
  readonly taskStore: JetStreamTaskStore;
  readonly taskMessageQueue: JetStreamTaskMessageQueue;
}

export interface DurableTasks {
  /**
   * The store and queue that see only `principal`'s tasks: give them to the
   * SDK server (or per-request server) that serves this principal.
   * `principal` is any stable string naming the caller (a session record's
   * principal digest, an OAuth subject); only a digest of it is stored.
   * Another principal's tasks are not found.
   */
  forPrincipal(principal: string): PrincipalTasks;
  /** The server version and how expiry runs on it (`per-message-ttl` on 2.11+, else `max-age-and-read-check`). */
  readonly server: { readonly version: string; readonly ttlPath: TtlPath };
  readonly maxResultBytes: number;
}

/**
 * Durable tasks for the official SDK v1 (`@modelcontextprotocol/sdk`
 * experimental tasks) on JetStream: creates or verifies the two streams and
 * returns per-principal stores. Cheap to call `forPrincipal` per request.
 *
 * Errors: `invalid_config`, `incompatible_streams`, `tasks_unavailable`.
 */
export async function createDurableTasks(options: CreateDurableTasksOptions): Promise<DurableTasks> {
  const config = resolveTasksConfig(options);
  const { nc } = options;
  let jsm;
  try {
    jsm = await jetstreamManager(nc, { timeout: config.requestTimeoutMs });
  } catch (err) {
    throw unavailable(err, 'JetStream');
  }
  const js = jetstream(nc, { timeout: config.requestTimeoutMs });
  assertSupportedServer(nc.info?.version, `the NATS server at ${nc.getServer()}`);
  const ttlPath = await ensureTaskStreams(jsm, config);
  const maxPayload = nc.info?.max_payload ?? DEFAULT_MAX_PAYLOAD;
  const maxResultBytes = Math.min(config.maxResultBytes, maxPayload - RECORD_OVERHEAD_BYTES);
  if (maxResultBytes < 1) {
    throw new TaskStoreError(TaskErrorCode.invalidConfig, `the server's max_payload (${maxPayload} bytes) leaves no room for a result`);
  }
  const ctx: TasksContext = {
    js,
    jsm,
    config,
    subjects: createTaskSubjects(config.subjectPrefix),
    ttlPath,
    maxResultBytes,
    maxQueuedMessageBytes: Math.min(config.maxQueuedMessageBytes ?? Number.MAX_SAFE_INTEGER, maxPayload - HEADER_ROOM_BYTES),
    faults: options.faults ?? {},
    quorum: new LeaderQuorumCheck(nc, jsm),
  };
  return {
    forPrincipal(principal) {
      if (typeof principal !== 'string') throw new TaskStoreError(TaskErrorCode.invalidArgument, `principal must be a string, not ${typeof principal}`);
      const key = principalKey(principal);
      return { taskStore: new JetStreamTaskStore(ctx, key), taskMessageQueue: new JetStreamTaskMessageQueue(ctx, key) };
    },
    server: { version: serverFeatures(nc.info?.version).version, ttlPath },
    maxResultBytes,
  };
}
