import { setTimeout as delay } from 'node:timers/promises';
import { decodeEventId, EndReason, EventKind, STANDALONE_STREAM } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { AppendResult, LogEvent, Refusal, ResumeAccepted, SessionLog, SessionRecord } from '@tether/session-log';
import { TetherSdkError, TetherSdkErrorCode } from './errors.js';
import { idKey, isPrimingMessage, responseIdOf } from './json-rpc.js';
import type { JsonRpcId, JsonRpcMessage } from './json-rpc.js';
import { encodeOpening } from './stream-opening.js';
import { SDK_GET_STREAM } from './wire.js';
import { watchWriter } from './writer-watch.js';
import type { WriterWatchOptions } from './writer-watch.js';
import type { WriterPresence } from './writer-presence.js';

export interface TetherEventStoreOptions {
  readonly log: SessionLog;
  /** The one session this store serves (from `SessionLog.createSession` / `getSession`). Its streams never meet another session's. */
  readonly session: SessionRecord;
  /** The principal digest that classifies cursors (`principalDigest(credential)`). Default: the session's own. */
  readonly principal?: string;
  /** This process's writer identity (`createWriterPresence(log)`, one per process). */
  readonly presence: WriterPresence;
  /**
   * The JSON-RPC request ids an SDK stream carries, asked when the stream
   * opens (see `requestsOfTransport`). They are recorded in the stream's
   * opening, so that an instance finding the stream's writer dead can answer
   * each with an error, and so that a stream carrying a batch ends after its
   * last response. Without it a POST stream ends at its first response (what
   * both SDK clients send: one request per POST).
   */
  readonly requestsOf?: (sdkStreamId: string) => readonly JsonRpcId[] | undefined;
  /** How readers watch a stream written by another instance. */
  readonly writerWatch?: WriterWatchOptions;
  /**
   * How long an append (to any stream) that failed `log_unavailable` (a
   * JetStream leader change, a lost ack) is retried before the call rejects.
   * Default 15000 ms. A notification given up fails the SDK's send (the
   * handler sees the error). A response given up fails the stream: every
   * later call on it rejects with the same error, and this process stops
   * answering "writing" for it, so a reader takes it over and ends it with a
   * JSON-RPC error per owed request instead of waiting forever (the SDK
   * cannot send a response it could not store, and would never end it).
   */
  readonly appendRetryMs?: number;
}

/** A resume the log accepted, with its events watched for a lost writer. */
export interface StoreResumeAccepted {
  readonly verdict: 'resumed';
  readonly accepted: ResumeAccepted;
  /** The SDK's id for the stream (what `replayEventsAfter` returns). */
  readonly sdkStreamId: string;
  /** Every event after the cursor to the stream's end (primes included), from the log only. */
  events(signal: AbortSignal): AsyncGenerator<LogEvent, void, undefined>;
}
export type StoreResume = StoreResumeAccepted | Refusal;

/** What the store knows of one POST stream it writes. */
interface OpenStream {
  readonly tether: string;
  /** Request ids the stream still owes (keys by `idKey`); `undefined`: not told, end at the first response. */
  readonly owed: Map<string, JsonRpcId> | undefined;
  /** The opening prime's append (every later append queues behind it on the log's writer). */
  readonly opened: Promise<AppendResult>;
  ended: boolean;
  /** The last append issued on the stream, retries included, settled or not: a retry waits for it. */
  last: Promise<unknown>;
  /** Set once a response (or the end) was given up: the stream's later events are refused with it. */
  failed: unknown;
}

/** Pause between retries of an append that failed `log_unavailable` (a leader election takes a few seconds). */
const APPEND_RETRY_WAIT_MS = 250;
/** Races for a seq of the GET stream lost in a row before a store gives up (each rebuilt the writer from the log). */
const STANDALONE_CONFLICT_RETRIES = 4;

/** Bound on remembered SDK-to-Tether stream names of ended streams (a resume on this instance maps them back). */
const MAX_ENDED_NAMES = 1_024;

/**
 * An `EventStore` for the official SDK's Streamable HTTP server transport
 * (v1 `@modelcontextprotocol/sdk` 1.32 and v2 `@modelcontextprotocol/server`
 * 2.4 declare the same interface), backed by the session log.
 *
 * - Bound to one session: the SDK's interface carries no session id and its
 *   GET stream id is the constant `_GET_stream`, so a store shared by
 *   sessions would mix their streams. Cursors are classified against this
 *   session (and its principal) only.
 * - `storeEvent` appends and resolves with the Tether event id once
 *   JetStream acknowledged it; the SDK writes the event to its client only
 *   after that. A POST stream opens with a `prime` (the SDK's priming event
 *   `{}` is that prime) naming the requests it owes, and ends with an `end`
 *   marker after its last response.
 * - `replayEventsAfter` classifies the cursor and throws `resume_refused`
 *   (with the verdict and reason) on any refusal; the SDK then answers 500,
 *   never an empty 200. It follows the stream in the log to its end, also
 *   when another instance still writes it, and ends it explicitly when that
 *   writer is found gone.
 */
export class TetherEventStore {
  readonly log: SessionLog;
  readonly session: SessionRecord;
  readonly #principal: string;
  readonly #presence: WriterPresence;
  readonly #requestsOf: ((sdkStreamId: string) => readonly JsonRpcId[] | undefined) | undefined;
  readonly #watch: WriterWatchOptions;
  readonly #appendRetryMs: number;
  readonly #open = new Map<string, OpenStream>();
  /** Tether stream id → SDK stream id, for streams opened here (a resume here must name the SDK's id). */
  readonly #sdkNames = new Map<string, string>();
  /** The last of this store's GET-stream appends, settled or not: the next one starts after it. */
  #standalone: Promise<unknown> = Promise.resolve();

  constructor(options: TetherEventStoreOptions) {
    this.log = options.log;
    this.session = options.session;
    this.#principal = options.principal ?? options.session.principal;
    this.#presence = options.presence;
    this.#requestsOf = options.requestsOf;
    this.#watch = options.writerWatch ?? {};
    this.#appendRetryMs = options.appendRetryMs ?? 15_000;
  }

  get sessionId(): string {
    return this.session.sessionId;
  }

  async storeEvent(streamId: string, message: JsonRpcMessage): Promise<string> {
    if (streamId === SDK_GET_STREAM) return this.#appendStandalone(message);
    const bytes = (): Uint8Array => Buffer.from(JSON.stringify(message), 'utf8');
    const existing = this.#open.get(streamId);
    const stream = existing ?? this.#openStream(streamId);
    if (stream.failed !== undefined) throw stream.failed;
    if (stream.ended) {
      throw new TetherSdkError(TetherSdkErrorCode.unknownStream, `stream ${stream.tether} has ended; the SDK stored an event after its last response`, { stream: stream.tether });
    }
    // The SDK's priming event is the stream's opening prime itself.
    if (existing === undefined && isPrimingMessage(message)) return (await stream.opened).id;
    // Appends are issued without an await in between: the log's writer
    // applies them in call order, so concurrent sends keep their order.
    const answered = responseIdOf(message);
    const appended = this.#appendPost(stream, EventKind.event, bytes(), answered !== undefined);
    if (answered === undefined || !this.#completes(stream, answered)) return (await appended).id;
    stream.ended = true;
    const end = this.#appendPost(stream, EventKind.end, new Uint8Array(), true, EndReason.complete);
    try {
      const [result] = await Promise.all([appended, end]);
      return result.id;
    } finally {
      this.#presence.finish(this.sessionId, stream.tether);
      this.#forget(streamId);
    }
  }

  /** The SDK's stream id for a cursor; `undefined` (the SDK answers 400) when the id is not a Tether event id. */
  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    const decoded = decodeEventId(eventId);
    if (!decoded.ok) return undefined;
    return this.#sdkNameOf(decoded.value.stream);
  }

  /**
   * The SDK's resume path: classify, then send every event after the cursor
   * to the stream's end. Throws `resume_refused` on a refusal. The SDK
   * returns its response only once this resolves, so the client sees the
   * continuation when the stream has ended; `createSessionRouter` serves
   * resumes itself, streaming, from `resume()`. A cursor on the GET stream
   * (which never ends) is refused `unsupported` here: the router serves it.
   */
  async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JsonRpcMessage) => Promise<void> }): Promise<string> {
    const result = await this.resume(lastEventId);
    if (result.verdict !== 'resumed') {
      throw new TetherSdkError(TetherSdkErrorCode.resumeRefused, `resume refused (${result.verdict}): ${result.reason}`, { verdict: result.verdict });
    }
    if (result.accepted.stream === STANDALONE_STREAM) {
      // The GET stream never ends: followed here, the SDK would never answer;
      // stopped at the head, events stored meanwhile would be skipped. An
      // error status (500) instead of a hang: the router serves GETs.
      throw new TetherSdkError(TetherSdkErrorCode.unsupported, 'a GET stream resume cannot be served through the SDK\'s own replay path (it answers only once the replay ends, and this stream never does); serve GETs with createSessionRouter', { stream: STANDALONE_STREAM });
    }
    const abort = new AbortController();
    try {
      for await (const event of result.events(abort.signal)) {
        if (event.kind !== EventKind.event) continue;
        await send(event.id, JSON.parse(Buffer.from(event.payload).toString('utf8')) as JsonRpcMessage);
      }
    } finally {
      abort.abort();
    }
    return result.sdkStreamId;
  }

  /**
   * Classifies a cursor against this session and, when accepted, gives the
   * events after it, watched for a lost writer. Never throws for a bad
   * cursor (a refusal says why); throws `log_unavailable` when JetStream
   * cannot be asked.
   */
  async resume(lastEventId: string): Promise<StoreResume> {
    const result = await this.log.resume(this.sessionId, lastEventId, this.#principal);
    if (result.verdict !== 'resumed') return result;
    const { log } = this;
    const presence = this.#presence;
    const watch = this.#watch;
    return {
      verdict: 'resumed',
      accepted: result,
      sdkStreamId: this.#sdkNameOf(result.stream),
      events: (signal) => watchWriter(log, presence, result.session.sessionId, result.stream, result.events({ signal }), watch),
    };
  }

  #openStream(sdkStreamId: string): OpenStream {
    const tether = this.log.newStreamId();
    const requests = this.#requestsOf?.(sdkStreamId);
    const owed = requests === undefined ? undefined : new Map(requests.map((id) => [idKey(id), id] as const));
    this.#presence.begin(this.sessionId, tether);
    const opened = this.log.append(this.sessionId, tether, EventKind.prime, encodeOpening(requests), {
      opensStream: { epoch: this.session.epoch },
      writer: this.#presence.writerId,
    });
    const stream: OpenStream = { tether, owed, opened, ended: false, last: opened.catch(() => undefined), failed: undefined };
    this.#open.set(sdkStreamId, stream);
    this.#sdkNames.set(tether, sdkStreamId);
    // A failed opening is reported by whoever awaits it; this keeps it from being unhandled meanwhile.
    opened.catch(() => undefined);
    return stream;
  }

  /** Whether the response to `id` is the stream's last one. */
  #completes(stream: OpenStream, id: JsonRpcId): boolean {
    if (stream.owed === undefined) return true;
    stream.owed.delete(idKey(id));
    return stream.owed.size === 0;
  }

  /**
   * Appends to a POST stream this store writes. The first attempt is issued
   * at once (the log's writer keeps call order). One that fails
   * `log_unavailable` is retried (`retry: true`: an attempt that landed
   * with its ack lost is not stored twice) once every earlier append of the
   * stream has settled, so retries keep call order too, until
   * `appendRetryMs` has passed. A `final` append (a response, the end)
   * given up fails the stream (see `appendRetryMs`). Without the retries, a
   * leader election failed a response's append, and the SDK, which cannot
   * send what it could not store, left the client's response open forever
   * while this process still answered "writing" (the chaos run's hang).
   */
  #appendPost(stream: OpenStream, kind: EventKind, payload: Uint8Array, final: boolean, endReason?: EndReason): Promise<AppendResult> {
    const options = { writer: this.#presence.writerId, existing: true, ...(endReason === undefined ? {} : { endReason }) };
    const before = stream.last;
    const startedMs = Date.now();
    const run = this.log.append(this.sessionId, stream.tether, kind, payload, options).catch(async (err: unknown) => {
      // Only an unknown outcome is retried; a refusal (payload_too_large, writer_conflict…) is the caller's.
      if (!isSessionLogError(err, 'log_unavailable')) throw err;
      await before;
      try {
        return await this.#retryUnavailable(err, startedMs, () => this.log.append(this.sessionId, stream.tether, kind, payload, { ...options, retry: true }), () => stream.failed !== undefined);
      } catch (last) {
        if (!final) throw last;
        if (stream.failed === undefined) {
          stream.failed = last;
          // Probes now answer "not writing": a reader takes the stream over and ends it explicitly.
          this.#presence.finish(this.sessionId, stream.tether);
        }
        throw stream.failed;
      }
    });
    stream.last = run.catch(() => undefined);
    return run;
  }

  /**
   * The GET stream `0` is written by every instance serving the session
   * (each one's server sends its own notifications). Two appending at once
   * race for a seq; the loser's writer is rebuilt from the log and tries again.
   *
   * This store's own appends go one after another (the log's writer takes
   * one at a time anyway): were they all in flight when the other instance
   * won a seq, each would fail and retry on a writer of its own, and land in
   * the order those writers opened, not in the order the SDK stored them.
   */
  #appendStandalone(message: JsonRpcMessage): Promise<string> {
    // The GET stream has no opening prime to stand for the SDK's priming event; none is sent for it today.
    const kind = isPrimingMessage(message) ? EventKind.prime : EventKind.event;
    const payload = kind === EventKind.prime ? new Uint8Array() : Buffer.from(JSON.stringify(message), 'utf8');
    const run = this.#standalone.then(() => this.#appendStandaloneNow(kind, payload));
    this.#standalone = run.catch(() => undefined);
    return run;
  }

  /**
   * A race lost to another instance (`writer_conflict`: its writer was
   * rebuilt from the log) is tried again at once, a few times. An unknown
   * outcome (`log_unavailable`: a leader election, a frozen connection) is
   * retried like a POST stream's appends, with `retry: true` so an attempt
   * that landed is not stored twice, until `appendRetryMs` has passed. The
   * SDK cannot send a notification it could not store: without the retries
   * a leader change dropped it.
   */
  async #appendStandaloneNow(kind: EventKind, payload: Uint8Array): Promise<string> {
    const startedMs = Date.now();
    // Any instance with a notification appends to the standalone stream: it has several writers by design.
    const options = { writer: this.#presence.writerId, shared: true };
    /** Lost races, counted across the retries of this one store. */
    let conflicts = 0;
    const append = async (retry: boolean): Promise<string> => {
      for (;;) {
        try {
          return (await this.log.append(this.sessionId, STANDALONE_STREAM, kind, payload, retry ? { ...options, retry } : options)).id;
        } catch (err) {
          if (!isSessionLogError(err, 'writer_conflict') || conflicts >= STANDALONE_CONFLICT_RETRIES) throw err;
          conflicts += 1;
        }
      }
    };
    try {
      return await append(false);
    } catch (err) {
      if (!isSessionLogError(err, 'log_unavailable')) throw err;
      return await this.#retryUnavailable(err, startedMs, () => append(true));
    }
  }

  /**
   * The retry loop of both streams' appends: after `first` (a failure),
   * calls `again` (the append with `retry: true`) every APPEND_RETRY_WAIT_MS
   * while the last failure is `log_unavailable`, until `appendRetryMs`
   * after `startedMs` or `stop()`. Rejects with the last failure.
   */
  async #retryUnavailable<T>(first: unknown, startedMs: number, again: () => Promise<T>, stop: () => boolean = () => false): Promise<T> {
    let last = first;
    while (!stop() && isSessionLogError(last, 'log_unavailable') && Date.now() - startedMs < this.#appendRetryMs) {
      await delay(APPEND_RETRY_WAIT_MS);
      try {
        return await again();
      } catch (err) {
        last = err;
      }
    }
    throw last;
  }

  #sdkNameOf(stream: string): string {
    if (stream === STANDALONE_STREAM) return SDK_GET_STREAM;
    return this.#sdkNames.get(stream) ?? stream;
  }

  #forget(sdkStreamId: string): void {
    this.#open.delete(sdkStreamId);
    while (this.#sdkNames.size > MAX_ENDED_NAMES + this.#open.size) {
      const oldest = this.#sdkNames.keys().next().value as string;
      this.#sdkNames.delete(oldest);
    }
  }
}
