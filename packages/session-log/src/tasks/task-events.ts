import { DeliverPolicy, DiscardPolicy, RetentionPolicy, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient, JetStreamManager, StreamConfig } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import { jsErrorCode, JsErrCode } from '../errors.js';
import { unavailable } from '../setup.js';
import { createSubjects } from '../wire.js';
import type { Subjects } from '../wire.js';
import { EXPIRED_GRACE_MS } from './task-table.js';
import { isTaskId } from './task-ids.js';

const NANOS_PER_MS = 1_000_000;
/**
 * The header carrying an event's position in its task's stream: 1, 2, 3…
 * with no holes. Stored positions start at 1 (events recorded before
 * `tasks/stream` followed the draft read the same); the wire's `seq`
 * (SEP-2694: from 0) is the position less one, mapped in the gateway.
 */
export const TASK_EVENT_SEQ = 'Tether-Task-Seq';
/** `end` on the marker written after the task settled: a reader stops there. */
export const TASK_EVENT_KIND = 'Tether-Task-Kind';

export interface TaskEventsOptions {
  /** `TETHER_EDGE_TASK_EVENTS[_<namespace>]`. */
  readonly streamName: string;
  /** Events go to `<prefix>.edge.event.<taskId>`. */
  readonly subjectPrefix: string;
  readonly replicas: number;
  readonly maxTtlMs: number;
  /** Events kept per task; older ones are dropped (a reader behind them gets `events_gone`). */
  readonly maxEventsPerTask: number;
  readonly requestTimeoutMs: number;
}

/** One recorded event of a task: its position and the notification's bytes as the upstream sent them. */
export interface TaskEvent {
  readonly seq: number;
  readonly data: Uint8Array;
  readonly end: boolean;
}

/** What `bounds` reads: stored positions `first..last` (0 and 0 when none); `ended` when the last is the end marker. */
export interface TaskEventBounds {
  readonly first: number;
  readonly last: number;
  readonly ended: boolean;
}

interface LastEvent {
  readonly seq: number;
  readonly streamSeq: number;
  readonly end: boolean;
}

const NO_EVENT: LastEvent = { seq: 0, streamSeq: 0, end: false };

/**
 * The progress and log notifications of each task's upstream call, in
 * order, for `tasks/stream` (the draft SEP-2694). One subject per task in
 * one stream; positions are counted per task with no holes, and each
 * append expects the subject's last sequence, so a second writer (a rerun
 * racing a late runner) is refused instead of interleaved.
 */
export class TaskEvents {
  readonly #js: JetStreamClient;
  readonly #jsm: JetStreamManager;
  readonly #options: TaskEventsOptions;
  readonly #subjects: Subjects;

  private constructor(js: JetStreamClient, jsm: JetStreamManager, options: TaskEventsOptions) {
    this.#js = js;
    this.#jsm = jsm;
    this.#options = options;
    this.#subjects = createSubjects(options.subjectPrefix);
  }

  static async open(js: JetStreamClient, jsm: JetStreamManager, options: TaskEventsOptions): Promise<TaskEvents> {
    const want: Partial<StreamConfig> & { name: string } = {
      name: options.streamName,
      subjects: [createSubjects(options.subjectPrefix).taskEventWildcard],
      retention: RetentionPolicy.Limits,
      storage: StorageType.File,
      num_replicas: options.replicas,
      discard: DiscardPolicy.Old,
      max_msgs_per_subject: options.maxEventsPerTask,
      max_age: (options.maxTtlMs + EXPIRED_GRACE_MS) * NANOS_PER_MS,
      allow_direct: false,
    };
    try {
      await jsm.streams.info(want.name);
    } catch (err) {
      if (jsErrorCode(err) !== JsErrCode.streamNotFound && !/stream not found/i.test(String(err))) throw unavailable(err);
      await jsm.streams.add(want).catch(async (addErr: unknown) => {
        await jsm.streams.info(want.name).catch(() => {
          throw unavailable(addErr);
        });
      });
    }
    return new TaskEvents(js, jsm, options);
  }

  /** A writer that appends after the task's last recorded event (serialized: one append at a time). */
  writer(taskId: string): TaskEventWriter {
    return new TaskEventWriter(this.#js, this.#subject(taskId), () => this.#last(taskId), this.#options.requestTimeoutMs);
  }

  /**
   * The first and last positions stored for the task (0 and 0 when none),
   * and whether the last is the end marker (the task settled and nothing
   * will follow).
   */
  async bounds(taskId: string): Promise<TaskEventBounds> {
    const last = await this.#last(taskId);
    if (last.seq === 0) return { first: 0, last: 0, ended: false };
    let first;
    try {
      first = await this.#jsm.streams.getMessage(this.#options.streamName, { seq: 1, next_by_subj: this.#subject(taskId) } as unknown as { seq: number });
    } catch (err) {
      if (isNoMessage(err)) return { first: 0, last: 0, ended: false };
      throw unavailable(err);
    }
    return { first: seqOf(first?.header.get(TASK_EVENT_SEQ)), last: last.seq, ended: last.end };
  }

  /**
   * Events after position `after`, stored then live, until the end marker
   * (included) or `signal` aborts. The caller checks `bounds` first.
   */
  async *follow(taskId: string, after: number, signal: AbortSignal): AsyncGenerator<TaskEvent, void, undefined> {
    const consumer = await this.#js.consumers.get(this.#options.streamName, { filter_subjects: this.#subject(taskId), deliver_policy: DeliverPolicy.All });
    const messages = await consumer.consume({ max_messages: 256 });
    const stop = (): void => void messages.stop();
    signal.addEventListener('abort', stop, { once: true });
    try {
      for await (const m of messages) {
        const seq = seqOf(m.headers?.get(TASK_EVENT_SEQ));
        const end = m.headers?.get(TASK_EVENT_KIND) === 'end';
        if (seq > after) yield { seq, data: m.data, end };
        if (end) return;
      }
    } finally {
      signal.removeEventListener('abort', stop);
      messages.stop();
    }
  }

  async #last(taskId: string): Promise<LastEvent> {
    if (!isTaskId(taskId)) return NO_EVENT;
    try {
      const msg = await this.#jsm.streams.getMessage(this.#options.streamName, { last_by_subj: this.#subject(taskId) });
      if (msg === null) return NO_EVENT;
      return { seq: seqOf(msg.header.get(TASK_EVENT_SEQ)), streamSeq: msg.seq, end: msg.header.get(TASK_EVENT_KIND) === 'end' };
    } catch (err) {
      if (isNoMessage(err)) return NO_EVENT;
      throw unavailable(err);
    }
  }

  #subject(taskId: string): string {
    return this.#subjects.taskEvent(taskId);
  }
}

/** Appends one task's events in order; a lost compare-and-set means another writer took the task: it stops. */
export class TaskEventWriter {
  #tail: Promise<unknown> = Promise.resolve();
  #position: Promise<{ seq: number; streamSeq: number }> | undefined;
  #stopped = false;

  constructor(
    private readonly js: JetStreamClient,
    private readonly subject: string,
    private readonly last: () => Promise<{ seq: number; streamSeq: number }>,
    private readonly timeoutMs: number,
  ) {}

  /** Queues an event; resolves with its position, or undefined when the writer stopped (another wrote, or the store failed). */
  append(data: Uint8Array, end = false): Promise<number | undefined> {
    const next = this.#tail.then(async () => {
      if (this.#stopped) return undefined;
      this.#position ??= this.last();
      const at = await this.#position;
      const h = headers();
      h.set(TASK_EVENT_SEQ, String(at.seq + 1));
      if (end) h.set(TASK_EVENT_KIND, 'end');
      try {
        const ack = await this.js.publish(this.subject, data, { headers: h, expect: { lastSubjectSequence: at.streamSeq }, timeout: this.timeoutMs });
        this.#position = Promise.resolve({ seq: at.seq + 1, streamSeq: ack.seq });
        return at.seq + 1;
      } catch {
        this.#stopped = true;
        return undefined;
      }
    });
    this.#tail = next.catch(() => undefined);
    return next;
  }
}

function seqOf(value: string | undefined): number {
  const n = Number(value ?? Number.NaN);
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

function isNoMessage(err: unknown): boolean {
  return jsErrorCode(err) === JsErrCode.noMessageFound || /no message found/i.test(String(err));
}
