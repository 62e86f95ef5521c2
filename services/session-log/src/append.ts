import type { AppendBatchResult, AppendRequest, AppendResponse } from '@tether/cursor-proto';
import { isWriterId, SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { AppendOptions, LogEvent, SessionLog, StreamWriter } from '@tether/session-log';
import { countOf, endReasonOf, eventKindOf, sessionIdOf, streamIdOf, textOf } from './convert.js';
import { CursorServiceError, invalid, ServiceErrorCode, toBatchError } from './errors.js';
import type { CallerScope } from './scope.js';

export interface AppendLimits {
  /** Largest event payload accepted, in bytes. */
  readonly maxPayloadBytes: number;
  /** Most entries in one AppendBatch. */
  readonly maxBatchEntries: number;
}

/** Writers kept open; the oldest is dropped past this (it is rebuilt from the log when needed again). */
const MAX_OPEN_WRITERS = 10_000;

/**
 * Append and AppendBatch, on this instance's own stream writers (not
 * `SessionLog.append`, whose writer position is private: `expected_seq` must
 * be checked against the exact position the append will chain to). Appends
 * to one stream go through a queue here, so that check and the append it
 * guards are one step. Another instance may still append in between; then
 * the library's expected-last-subject-sequence tripwire makes it
 * `writer_conflict` and the writer is rebuilt from the log.
 */
export class Appender {
  readonly #log: SessionLog;
  readonly #scope: CallerScope;
  readonly #limits: AppendLimits;
  readonly #queues = new Map<string, Promise<unknown>>();
  readonly #writers = new Map<string, Promise<StreamWriter>>();
  readonly #onAppended: (ms: number) => void;

  /** `onAppended` gets the time from call to acknowledgement (queue wait included) of each append that succeeded. */
  constructor(log: SessionLog, scope: CallerScope, limits: AppendLimits, onAppended: (ms: number) => void = () => undefined) {
    this.#log = log;
    this.#scope = scope;
    this.#limits = limits;
    this.#onAppended = onAppended;
  }

  /** `traceparent` is stored with the event unless the request brings its own. */
  async append(caller: string, req: AppendRequest, traceparent?: string): Promise<AppendResponse> {
    const started = performance.now();
    const input = this.#validate(req, traceparent);
    await this.#scope.check(input.sessionId, caller);
    const key = `${input.sessionId}.${input.stream}`;
    const previous = this.#queues.get(key) ?? Promise.resolve();
    const run = previous.then(async () => {
      const response = await this.#appendNow(key, input);
      this.#onAppended(performance.now() - started);
      return response;
    });
    const tail = run.catch(() => undefined);
    this.#queues.set(key, tail);
    void tail.then(() => {
      if (this.#queues.get(key) === tail) this.#queues.delete(key);
    });
    return run;
  }

  /**
   * Entries of one stream in order, streams concurrently. After an entry of a
   * stream fails, its later entries are `skipped`: appending them would
   * leave a hole the writer did not mean.
   */
  async appendBatch(caller: string, entries: readonly AppendRequest[], cancelled: () => boolean, traceparent?: string): Promise<AppendBatchResult[]> {
    if (entries.length === 0) throw invalid('entries must not be empty');
    if (entries.length > this.#limits.maxBatchEntries) throw invalid(`a batch holds at most ${this.#limits.maxBatchEntries} entries, got ${entries.length}`);
    const results: AppendBatchResult[] = new Array<AppendBatchResult>(entries.length);
    const groups = new Map<string, number[]>();
    entries.forEach((entry, i) => {
      const key = `${entry.sessionId}.${entry.stream}`;
      const group = groups.get(key) ?? [];
      group.push(i);
      groups.set(key, group);
    });
    await Promise.all(
      [...groups.values()].map(async (indexes) => {
        let failed = false;
        for (const i of indexes) {
          if (failed || cancelled()) {
            results[i] = { error: toBatchError(new CursorServiceError(ServiceErrorCode.skipped, 'not attempted: an earlier entry of this stream failed or the call was cancelled')) };
            continue;
          }
          try {
            results[i] = { appended: await this.append(caller, entries[i] as AppendRequest, traceparent) };
          } catch (err) {
            failed = true;
            results[i] = { error: toBatchError(err) };
          }
        }
      }),
    );
    return results;
  }

  #validate(req: AppendRequest, traceparent: string | undefined): ValidAppend {
    const sessionId = sessionIdOf(req.sessionId);
    const stream = streamIdOf(req.stream);
    const kind = eventKindOf(req.kind);
    if (req.payload.byteLength > this.#limits.maxPayloadBytes) {
      throw new CursorServiceError(ServiceErrorCode.payloadTooLarge, `event payload is ${req.payload.byteLength} bytes; the service accepts at most ${this.#limits.maxPayloadBytes}`, {
        sessionId,
        stream,
        detail: { bytes: req.payload.byteLength, maxBytes: this.#limits.maxPayloadBytes },
      });
    }
    const options: { -readonly [K in keyof AppendOptions]: AppendOptions[K] } = {};
    if (req.upstreamId !== undefined) options.upstreamId = textOf('upstream_id', req.upstreamId, 1024);
    // An empty field is proto3's "not set" as much as an absent one.
    const tp = req.traceparent === undefined || req.traceparent === '' ? traceparent : req.traceparent;
    if (tp !== undefined && tp !== '') options.traceparent = textOf('traceparent', tp, 512);
    const endReason = endReasonOf(req.endReason);
    if (kind === 'end' && endReason !== undefined) options.endReason = endReason;
    if (req.writer !== undefined && req.writer !== '') {
      if (!isWriterId(req.writer)) throw invalid('writer is malformed (expected 8 to 64 characters of A-Z, a-z, 0-9, _ and -)');
      options.writer = req.writer;
    }
    const expectedSeq = req.expectedSeq === undefined ? undefined : countOf('expected_seq', req.expectedSeq, 1, Number.MAX_SAFE_INTEGER);
    return { sessionId, stream, kind, payload: req.payload, options, expectedSeq };
  }

  async #appendNow(key: string, input: ValidAppend): Promise<AppendResponse> {
    const { kind, payload, options, expectedSeq } = input;
    let writer = await this.#writer(key, input.sessionId, input.stream);
    if (expectedSeq !== undefined && expectedSeq > writer.last.seq + 1) {
      // This instance's writer may be behind (others appended through
      // another instance): read the stream's end again before calling it a gap.
      this.#writers.delete(key);
      writer = await this.#writer(key, input.sessionId, input.stream);
    }
    if (expectedSeq !== undefined) {
      // The writer is positioned where the log ends (or where this instance
      // last appended), so its last seq is what `expected_seq` is checked
      // against; a stale position is caught by the tripwire on append.
      const last = writer.last.seq;
      if (expectedSeq <= last) return this.#duplicateOf(input, expectedSeq, last);
      if (expectedSeq > last + 1) {
        throw new SessionLogError(SessionLogErrorCode.writerConflict, `expected_seq ${expectedSeq} would leave a gap: the stream's last seq is ${last}`, {
          sessionId: input.sessionId,
          stream: input.stream,
          seq: last,
          expectedSeq,
        });
      }
    }
    // Without expected_seq the event goes to the end, whatever the seq
    // (cursor.proto): a retry then cannot be told from a new equal event (two
    // `list_changed` notifications are the same bytes), so it may be stored
    // twice; taking an equal event for the retry would drop a real one.
    try {
      const result = await writer.append(kind, payload, options);
      if (writer.ended) this.#writers.delete(key);
      return { id: result.id, seq: result.seq, pos: result.pos, duplicate: false };
    } catch (err) {
      // A broken writer is rebuilt from the log on the next append.
      if (writer.broken || writer.ended) this.#writers.delete(key);
      throw await this.#explain(err, input.sessionId);
    }
  }

  /** Forgets the writers of a session this instance closed. */
  forgetSession(sessionId: string): void {
    for (const key of this.#writers.keys()) if (key.startsWith(`${sessionId}.`)) this.#writers.delete(key);
  }

  /**
   * A session closed on another instance had its events purged, so a cached
   * writer's next append trips the tripwire: say `session_closed`, which is
   * what happened, rather than `writer_conflict`.
   */
  async #explain(err: unknown, sessionId: string): Promise<unknown> {
    if (!(err instanceof SessionLogError) || err.code !== SessionLogErrorCode.writerConflict) return err;
    const record = await this.#log.getSession(sessionId).catch(() => undefined);
    if (record !== undefined && record.state === 'active') return err;
    this.forgetSession(sessionId);
    return new SessionLogError(SessionLogErrorCode.sessionClosed, 'the session is closed', { sessionId }, { cause: err });
  }

  /** `expected_seq` names an event the stream already holds: the same one (a retry) or a conflict. */
  async #duplicateOf(input: ValidAppend, expectedSeq: number, last: number): Promise<AppendResponse> {
    const { sessionId, stream } = input;
    let stored: LogEvent | undefined;
    if (expectedSeq === last) stored = await this.#log.head(sessionId, stream);
    else stored = (await this.#log.readPage(sessionId, stream, expectedSeq - 1, 1))[0];
    if (stored !== undefined && stored.seq === expectedSeq && sameEvent(stored, input)) {
      return { id: stored.id, seq: stored.seq, pos: stored.pos, duplicate: true };
    }
    throw new SessionLogError(SessionLogErrorCode.writerConflict, `seq ${expectedSeq} of this stream already holds another event`, {
      sessionId,
      stream,
      seq: last,
      expectedSeq,
      ...(stored === undefined ? {} : { pos: stored.pos }),
    });
  }

  /** This instance's writer of a stream, opened at the log's end on first use. */
  async #writer(key: string, sessionId: string, stream: string): Promise<StreamWriter> {
    let pending = this.#writers.get(key);
    if (pending === undefined) {
      pending = this.#log.openWriter(sessionId, stream);
      this.#writers.set(key, pending);
      if (this.#writers.size > MAX_OPEN_WRITERS) this.#writers.delete(this.#writers.keys().next().value as string);
    }
    try {
      return await pending;
    } catch (err) {
      if (this.#writers.get(key) === pending) this.#writers.delete(key);
      throw err;
    }
  }
}

interface ValidAppend {
  readonly sessionId: string;
  readonly stream: string;
  readonly kind: ReturnType<typeof eventKindOf>;
  readonly payload: Uint8Array;
  readonly options: AppendOptions;
  readonly expectedSeq: number | undefined;
}

/** A retry is the same event: kind, bytes, writer and (for `end`) reason. */
function sameEvent(stored: LogEvent, input: ValidAppend): boolean {
  if (stored.kind !== input.kind || Buffer.compare(Buffer.from(stored.payload), Buffer.from(input.payload)) !== 0) return false;
  // Two writers claiming one stream send the same empty prime at the same seq: only the writer tells them apart.
  if ((stored.writer ?? '') !== (input.options.writer ?? '')) return false;
  return input.kind !== 'end' || stored.endReason === (input.options.endReason ?? 'complete');
}
