/**
 * The gateways' task records as the store holds them (`TETHER_EDGE_TASKS_<ns>`,
 * one message per task subject), read straight from JetStream by the
 * harness: which instance runs a task (the record's `runnerInstance` is not
 * on the wire), and, after the run, each task's stored outcome and reruns
 * to cross-check what its client was told.
 */
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { namespaceNames } from '@tether/session-log';
import { sleep } from './util.js';

/** The facts of a stored record the harness uses. */
export interface StoredTaskFacts {
  readonly status: string;
  readonly tool: string;
  /** The writer id running it now (null: nothing runs it). */
  readonly runner: string | null;
  /** `--instance-id` of the instance that ran its call last (`gw2.0`). */
  readonly runnerInstance: string | undefined;
  readonly attempts: number;
  readonly reruns: number;
  readonly idempotent: boolean;
}

export interface TaskRecords {
  /** The record now; undefined when the store has none; throws when the store does not answer. */
  read(taskId: string): Promise<StoredTaskFacts | undefined>;
  /** Tries `read` until it answers or `budgetMs` passed. */
  readWithin(taskId: string, budgetMs: number): Promise<StoredTaskFacts | undefined | 'unreadable'>;
  /** How many tasks the store holds (one message per task). */
  count(): Promise<number | undefined>;
  close(): Promise<void>;
}

export async function openTaskRecords(servers: readonly string[], namespace: string): Promise<TaskRecords> {
  const { tasksStream, subjectPrefix } = namespaceNames(namespace);
  const nc: NatsConnection = await connect({ servers: [...servers], maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const jsm: JetStreamManager = await jetstreamManager(nc, { timeout: 3_000 });
  const read = async (taskId: string): Promise<StoredTaskFacts | undefined> => {
    let msg;
    try {
      msg = await jsm.streams.getMessage(tasksStream, { last_by_subj: `${subjectPrefix}.edge.task.${taskId}` });
    } catch (err) {
      if (/no message found|not found/i.test(String((err as Error).message))) return undefined;
      throw err;
    }
    if (msg === null) return undefined;
    const r = JSON.parse(new TextDecoder().decode(msg.data)) as Record<string, unknown>;
    return {
      status: String(r['status']),
      tool: String(r['tool']),
      runner: typeof r['runner'] === 'string' ? r['runner'] : null,
      runnerInstance: typeof r['runnerInstance'] === 'string' ? r['runnerInstance'] : undefined,
      attempts: Number(r['attempts'] ?? 0),
      reruns: Number(r['reruns'] ?? 0),
      idempotent: r['idempotent'] === true,
    };
  };
  return {
    read,
    async readWithin(taskId, budgetMs) {
      const until = Date.now() + budgetMs;
      for (;;) {
        try {
          return await read(taskId);
        } catch {
          if (Date.now() >= until) return 'unreadable';
          await sleep(200);
        }
      }
    },
    async count() {
      try {
        return (await jsm.streams.info(tasksStream)).state.messages;
      } catch {
        return undefined;
      }
    },
    async close() {
      await nc.close().catch(() => undefined);
    },
  };
}
