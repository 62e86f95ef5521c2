import { DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager, StoredMsg, StreamConfig } from '@nats-io/jetstream';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { isCasFailure, isNoResponders, jsErrorCode, JsErrCode, SessionLogError, SessionLogErrorCode } from '../errors.js';
import { LeaderQuorumCheck } from '../leader-quorum.js';
import { unavailable } from '../setup.js';
import { createSubjects } from '../wire.js';
import type { Subjects } from '../wire.js';
import { isTaskId } from './task-ids.js';
import { decodeTask, encodeTask, expiresAt } from './task-record.js';
import type { TaskRecord } from './task-record.js';
import { taskIndexHeaders, WorkingTaskIndex } from './working-index.js';

const NANOS_PER_MS = 1_000_000;
/** How long an expired task still answers "Task has expired" before it is gone. */
export const EXPIRED_GRACE_MS = 10 * 60_000;
const CAS_ATTEMPTS = 8;

export interface TaskTableOptions {
  /** `TETHER_EDGE_TASKS[_<namespace>]`. */
  readonly streamName: string;
  /** The log's subject prefix: records go to `<prefix>.edge.task.<id>`, every stored change is republished to `<prefix>.edge.live.<id>`. */
  readonly subjectPrefix: string;
  readonly replicas: number;
  /** The longest TTL a task may have; the stream's `max_age` is this plus the expired grace. */
  readonly maxTtlMs: number;
  readonly requestTimeoutMs: number;
}

/** What the instance asked to cancel a task answered. */
export type CancelAnswer = 'accepted' | 'not_running' | 'gone' | 'silent';

/** A record and the stream sequence it was read at: the revision a write compares against. */
export interface StoredTask {
  readonly record: TaskRecord;
  readonly seq: number;
}

/**
 * The durable task records of a deployment: one JetStream stream, one
 * message per task subject (`max_msgs_per_subject: 1`), each write a
 * compare-and-set on the subject's last sequence. Reads go to the stream
 * leader (no direct gets), so a task created through one instance is read
 * by the next request to another, as SEP-2663 requires of `tasks/get`
 * right after `CreateTaskResult`. The stream republishes every stored
 * record, which is how status changes reach listeners on every instance.
 */
export class TaskTable {
  readonly #nc: NatsConnection;
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #options: TaskTableOptions;
  readonly #subjects: Subjects;
  readonly #quorum: LeaderQuorumCheck;

  private constructor(nc: NatsConnection, js: JetStreamClient, jsm: JetStreamManager, options: TaskTableOptions) {
    this.#nc = nc;
    this.#js = js;
    this.#jsm = jsm;
    this.#options = options;
    this.#subjects = createSubjects(options.subjectPrefix);
    this.#quorum = new LeaderQuorumCheck(nc, jsm);
  }

  /** Creates the stream or verifies that an existing one matches. */
  static async open(nc: NatsConnection, js: JetStreamClient, jsm: JetStreamManager, options: TaskTableOptions): Promise<TaskTable> {
    await ensureTaskStream(jsm, desiredTaskStream(options));
    return new TaskTable(nc, js, jsm, options);
  }

  get streamName(): string {
    return this.#options.streamName;
  }

  /** Stores a new task; refuses (never overwrites) an id that exists. Durable (acknowledged by the stream's quorum) when it returns. */
  async create(record: TaskRecord): Promise<StoredTask> {
    const seq = await this.#publish(record, 0, `create-${record.taskId}`);
    if (seq !== undefined) return { record, seq };
    // The subject has a message. A retried create of the very same record
    // (its ack was lost) is that message: answered as created. The server
    // checks the expected last sequence before the message id and refuses
    // it, hence the read.
    const stored = await this.read(record.taskId);
    if (stored !== undefined && JSON.stringify(stored.record) === JSON.stringify(record)) return stored;
    throw new SessionLogError(SessionLogErrorCode.invalidArgument, 'a task with this id exists', {});
  }

  /**
   * The task's newest record, or undefined (never created, gone, or
   * unreadable). Expiry is the caller's to judge (`expiresAt`). Throws
   * `log_unavailable` when the store cannot answer, including a "no
   * message" from a stream leader that may be cut off from its peers
   * (`LeaderQuorumCheck`): never a false "not found".
   */
  async read(taskId: string): Promise<StoredTask | undefined> {
    if (!isTaskId(taskId)) return undefined;
    const msg = (await this.#newest(taskId)) ?? (await this.#absentOrFound(taskId));
    if (msg === undefined) return undefined;
    const record = decodeTask(msg.data, taskId);
    return record === undefined ? undefined : { record, seq: msg.seq };
  }

  /** The task subject's newest message, or undefined when the leader that answered holds none. */
  async #newest(taskId: string): Promise<StoredMsg | undefined> {
    try {
      return (await this.#jsm.streams.getMessage(this.#options.streamName, { last_by_subj: this.#subject(taskId) })) ?? undefined;
    } catch (err) {
      if (jsErrorCode(err) === JsErrCode.noMessageFound || /no message found/i.test(String(err))) return undefined;
      throw unavailable(err);
    }
  }

  /**
   * A leader's "no message", believed only if one leader with a quorum
   * answers the check and the read asked again after it still finds nothing
   * (`LeaderQuorumCheck`; R1: the one server is the store).
   */
  async #absentOrFound(taskId: string): Promise<StoredMsg | undefined> {
    if (this.#options.replicas <= 1) return undefined;
    const checked = await this.#quorum.recheck(this.#options.streamName, () => this.#newest(taskId), this.#subject(taskId));
    if (checked.doubt !== undefined) throw new SessionLogError(SessionLogErrorCode.logUnavailable, `task ${taskId} not found by a leader that may not be the only one: ${checked.doubt}`, {});
    return checked.value;
  }

  /**
   * Compare-and-set loop: `change` gets the newest record and returns the
   * next one, or undefined to write nothing. Returns what is stored after
   * (the written record, or the one `change` declined to change), or
   * undefined when the task does not exist.
   */
  async update(taskId: string, change: (current: TaskRecord) => TaskRecord | undefined): Promise<StoredTask | undefined> {
    for (let attempt = 0; attempt < CAS_ATTEMPTS; attempt += 1) {
      const stored = await this.read(taskId);
      if (stored === undefined) return undefined;
      const next = change(stored.record);
      if (next === undefined) return stored;
      const seq = await this.#publish(next, stored.seq);
      if (seq !== undefined) return { record: next, seq };
      // Another instance wrote between our read and write: read again and decide again.
    }
    throw new SessionLogError(SessionLogErrorCode.logUnavailable, `task ${taskId} kept changing under concurrent updates`, {});
  }

  /**
   * Writes `record` only if the task's stored record is still the one at
   * `expectedSeq`: the new sequence, or undefined when another write came
   * first (for callers that decided elsewhere, e.g. over gRPC).
   */
  compareAndSet(record: TaskRecord, expectedSeq: number): Promise<number | undefined> {
    return this.#publish(record, expectedSeq);
  }

  /**
   * Calls `listener` with every record of the task stored from now on, on
   * any instance, until the returned function is called. Core NATS: a
   * listener that needs the state as of now reads it after subscribing, and
   * keeps the highest `seq` it saw (a read and the feed may cross).
   */
  watch(taskId: string, listener: (stored: StoredTask) => void): () => void {
    if (!isTaskId(taskId)) return () => undefined;
    const sub: Subscription = this.#nc.subscribe(this.#subjects.taskLive(taskId), {
      callback: (err, msg) => {
        if (err !== null) return;
        const record = decodeTask(msg.data, taskId);
        // The stream republishes with the stored sequence in `Nats-Sequence`.
        const seq = Number(msg.headers?.get('Nats-Sequence') ?? Number.NaN);
        if (record !== undefined && Number.isSafeInteger(seq)) listener({ record, seq });
      },
    });
    return () => sub.unsubscribe();
  }

  /**
   * Answers cancel requests addressed to this instance (`writerId`) until the
   * returned function is called: `handler` says whether it was running the
   * task (and has now aborted it).
   */
  serveCancels(writerId: string, handler: (taskId: string) => boolean): () => void {
    const sub = this.#nc.subscribe(this.#cancelSubject(writerId), {
      callback: (err, msg) => {
        if (err !== null) return;
        const taskId = msg.string();
        msg.respond(isTaskId(taskId) && handler(taskId) ? 'accepted' : 'not_running');
      },
    });
    return () => sub.unsubscribe();
  }

  /**
   * Asks the instance running a task to cancel it. `gone`: no process holds
   * that instance's subject (it died or left); `silent`: no answer in time.
   */
  async requestCancel(writerId: string, taskId: string, timeoutMs: number): Promise<CancelAnswer> {
    try {
      const answer = (await this.#nc.request(this.#cancelSubject(writerId), taskId, { timeout: timeoutMs })).string();
      return answer === 'accepted' ? 'accepted' : 'not_running';
    } catch (err) {
      if (isNoResponders(err)) return 'gone';
      return 'silent';
    }
  }

  /** Follows which tasks are `working` and who runs them (`WorkingTaskIndex`); the caller closes it. */
  openWorking(): Promise<WorkingTaskIndex> {
    return WorkingTaskIndex.open(this.#js, this.#options.streamName, this.#subjects.taskWildcard);
  }

  #cancelSubject(writerId: string): string {
    return this.#subjects.taskCancel(writerId);
  }

  /** Publishes with the subject's last sequence expected; undefined when another write won. */
  async #publish(record: TaskRecord, expectSeq: number, msgID?: string): Promise<number | undefined> {
    const data = encodeTask(record);
    const now = Date.now();
    // Each record carries its own expiry (per-message TTL), so an expired task leaves the stream without a sweeper.
    const ttl = `${Math.max(1, Math.ceil((expiresAt(record) + EXPIRED_GRACE_MS - now) / 1000))}s`;
    try {
      const ack = await this.#js.publish(this.#subject(record.taskId), data, {
        // Status, runner and owner in headers: what `WorkingTaskIndex` follows without reading records.
        headers: taskIndexHeaders(record),
        expect: { lastSubjectSequence: expectSeq },
        ...(msgID === undefined ? {} : { msgID }),
        ttl,
        timeout: this.#options.requestTimeoutMs,
      });
      return ack.seq;
    } catch (err) {
      if (isWrongLast(err)) return undefined;
      if (isMaxPayload(err)) {
        throw new SessionLogError(SessionLogErrorCode.payloadTooLarge, `the task record is ${data.length} bytes, more than the server accepts in one message`, {});
      }
      throw unavailable(err);
    }
  }

  #subject(taskId: string): string {
    return this.#subjects.task(taskId);
  }
}

function isWrongLast(err: unknown): boolean {
  const code = jsErrorCode(err);
  return code === JsErrCode.streamWrongLastSequence || code === JsErrCode.streamSubjectInProcess || isCasFailure(err) || /wrong last sequence/i.test(String(err));
}

function isMaxPayload(err: unknown): boolean {
  // nats.js: "'payload' max_payload size exceeded".
  return /max(imum)?[_ ]payload/i.test(String(err));
}

type WantedStream = Partial<StreamConfig> & { name: string };

export function desiredTaskStream(options: TaskTableOptions): WantedStream {
  const subjects = createSubjects(options.subjectPrefix);
  return {
    name: options.streamName,
    subjects: [subjects.taskWildcard],
    retention: RetentionPolicy.Limits,
    storage: StorageType.File,
    num_replicas: options.replicas,
    discard: DiscardPolicy.Old,
    max_msgs_per_subject: 1,
    max_age: (options.maxTtlMs + EXPIRED_GRACE_MS) * NANOS_PER_MS,
    duplicate_window: 120_000 * NANOS_PER_MS,
    // Reads right after a write on another instance: the leader answers.
    allow_direct: false,
    republish: { src: subjects.taskWildcard, dest: subjects.taskLiveWildcard },
    allow_msg_ttl: true,
  };
}

async function ensureTaskStream(jsm: JetStreamManager, want: WantedStream): Promise<void> {
  let existing: StreamConfig;
  try {
    existing = (await jsm.streams.info(want.name)).config;
  } catch (err) {
    if (jsErrorCode(err) !== JsErrCode.streamNotFound && !/stream not found/i.test(String(err))) throw unavailable(err);
    try {
      await jsm.streams.add(want);
      return;
    } catch (addErr) {
      existing = (await jsm.streams.info(want.name).catch(() => { throw unavailable(addErr); })).config;
    }
  }
  const diffs: string[] = [];
  for (const key of ['retention', 'storage', 'num_replicas', 'max_msgs_per_subject', 'discard'] as const) {
    if (existing[key] !== want[key]) diffs.push(`${key} is ${String(existing[key])}, config wants ${String(want[key])}`);
  }
  if ((existing.max_age ?? 0) < (want.max_age ?? 0)) diffs.push(`max_age is ${existing.max_age} ns, shorter than the longest task TTL plus grace (${want.max_age} ns)`);
  if (existing.allow_msg_ttl !== true) diffs.push('allow_msg_ttl is off; records carry Nats-TTL (recreate the stream, or update it with allow_msg_ttl: true)');
  if (existing.republish?.dest !== want.republish?.dest) diffs.push(`republish is ${JSON.stringify(existing.republish ?? null)}, config wants ${JSON.stringify(want.republish)}`);
  if (diffs.length > 0) {
    throw new SessionLogError(SessionLogErrorCode.incompatibleLog, `stream ${want.name} does not match the configuration: ${diffs.join('; ')}`, {});
  }
}
