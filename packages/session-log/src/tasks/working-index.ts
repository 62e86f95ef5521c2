/**
 * Which tasks are `working` and who runs each, kept current without reading
 * records: every task write carries its status, runner and owner in headers
 * (`taskIndexHeaders`), and one headers-only ordered consumer per process
 * follows them. What a sweeper needs to find a task whose runner died costs
 * one small message per task write, never a scan of the table per tick.
 */
import { DeliverPolicy } from '@nats-io/jetstream';
import type { ConsumerMessages, JetStreamClient } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import type { MsgHdrs } from '@nats-io/transport-node';
import { expiresAt } from './task-record.js';
import type { TaskRecord } from './task-record.js';

/** Headers of every stored task record (values are the record's own; never a payload). */
export const TaskIndexHeader = {
  status: 'Tether-Task-Status',
  runner: 'Tether-Task-Runner',
  /** The session-log service's caller stamped into the record (`tether.caller`), for a per-caller list. */
  caller: 'Tether-Task-Caller',
  /** `1` on an upstream-owned route record: nothing of ours runs it, nothing to sweep. */
  route: 'Tether-Task-Route',
  /** `createdAtMs + ttlMs`: a task that expires leaves the stream without a message, so the index drops it itself. */
  expires: 'Tether-Task-Expires',
} as const;

/** The longest `open` waits for the records stored at the start; past it the index fills in behind. */
const LOAD_WAIT_MS = 10_000;

/** Where the session-log service keeps the caller that created a task. */
const CALLER_KEY = 'tether.caller';

export function taskIndexHeaders(record: TaskRecord): MsgHdrs {
  const h = headers();
  h.set(TaskIndexHeader.status, record.status);
  if (record.runner !== null && record.runner !== undefined) h.set(TaskIndexHeader.runner, record.runner);
  const caller = (record as unknown as Readonly<Record<string, unknown>>)[CALLER_KEY];
  if (typeof caller === 'string') h.set(TaskIndexHeader.caller, caller);
  if (record.upstream !== undefined) h.set(TaskIndexHeader.route, '1');
  h.set(TaskIndexHeader.expires, String(expiresAt(record)));
  return h;
}

/** A task whose call runs somewhere, as its last write said. */
export interface WorkingTask {
  readonly taskId: string;
  /** The writer id named as its runner. */
  readonly runner: string;
  /** The service caller that owns it, when created over the session-log service. */
  readonly caller?: string;
  /** When it expires (ms since the epoch). */
  readonly expiresAtMs: number;
}

/**
 * The `working` tasks of one task stream, with a runner, that are not
 * upstream-owned route records. Records written before these headers
 * existed are not seen (their readers still settle them). A record that
 * expires while `working` leaves the stream without a message: the index
 * drops it at its expiry.
 */
export class WorkingTaskIndex {
  readonly #working = new Map<string, WorkingTask>();
  readonly #messages: ConsumerMessages;
  readonly #prefixLength: number;
  /** Index messages seen (each is one task write, or one record at the start): the index's whole cost. */
  #seen = 0;

  private constructor(messages: ConsumerMessages, taskSubjectPrefix: string) {
    this.#messages = messages;
    this.#prefixLength = taskSubjectPrefix.length;
  }

  /**
   * Starts following `streamName`: the newest record of each task first
   * (`last_per_subject`), then every write, headers only. `taskWildcard`
   * is `<prefix>.edge.task.>`.
   */
  static async open(js: JetStreamClient, streamName: string, taskWildcard: string): Promise<WorkingTaskIndex> {
    const consumer = await js.consumers.get(streamName, { filter_subjects: taskWildcard, deliver_policy: DeliverPolicy.LastPerSubject, headers_only: true });
    const messages = await consumer.consume();
    const index = new WorkingTaskIndex(messages, taskWildcard.slice(0, -1));
    let loaded: () => void = () => undefined;
    const ready = new Promise<void>((resolve) => (loaded = resolve));
    void (async () => {
      for await (const msg of messages) {
        index.#apply(msg.subject, msg.headers);
        if (msg.info.pending === 0) loaded();
      }
    })().catch(() => undefined);
    // Resolved once the records stored at the start are in (a first list is then complete): nothing pending, or the last of them seen.
    if ((await consumer.info(true)).num_pending === 0 && index.#seen === 0) loaded();
    await Promise.race([ready, new Promise((resolve) => setTimeout(resolve, LOAD_WAIT_MS).unref())]);
    return index;
  }

  #apply(subject: string, h: MsgHdrs | undefined): void {
    this.#seen += 1;
    const taskId = subject.slice(this.#prefixLength);
    const runner = h?.get(TaskIndexHeader.runner) ?? '';
    if (h?.get(TaskIndexHeader.status) !== 'working' || runner === '' || h.get(TaskIndexHeader.route) === '1') {
      this.#working.delete(taskId);
      return;
    }
    const caller = h.get(TaskIndexHeader.caller);
    const expires = Number(h.get(TaskIndexHeader.expires));
    this.#working.set(taskId, { taskId, runner, ...(caller === '' ? {} : { caller }), expiresAtMs: Number.isSafeInteger(expires) ? expires : Number.MAX_SAFE_INTEGER });
  }

  /** The working tasks now, not expired (of one service caller, when given). */
  list(caller?: string): WorkingTask[] {
    const now = Date.now();
    const out: WorkingTask[] = [];
    for (const task of this.#working.values()) {
      if (task.expiresAtMs <= now) this.#working.delete(task.taskId);
      else if (caller === undefined || task.caller === caller) out.push(task);
    }
    return out;
  }

  /** Index messages received so far. */
  get seen(): number {
    return this.#seen;
  }

  async close(): Promise<void> {
    await this.#messages.close();
  }
}
