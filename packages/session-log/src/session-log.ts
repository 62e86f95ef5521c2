import { encodeAuditEvent } from './audit.js';
import type { AuditEvent } from './audit.js';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { KV } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { decodeEventId, isSessionId, newStreamId } from '@tether/protocol';
import type { EventKind } from '@tether/protocol';
import { classifyResume } from './classify.js';
import { ControlFanout } from './control-fanout.js';
import type { Acceptance, Classification, Refusal } from './classify.js';
import { resolveConfig } from './config.js';
import type { SessionLogConfig, SessionLogOptions } from './config.js';
import type { LogContext } from './context.js';
import { isSessionLogError, SessionLogError, SessionLogErrorCode } from './errors.js';
import { LeaderQuorumCheck } from './leader-quorum.js';
import { decodeLogEvent, START_CURSOR } from './event.js';
import { assertStreamId } from './ids.js';
import type { Cursor, LogEvent } from './event.js';
import { LeaseTable } from './leases.js';
import { readPage } from './page.js';
import { MAX_SESSIONS_PER_PRINCIPAL, PrincipalIndex } from './principals.js';
import { LiveTail } from './live-tail.js';
import { createFollowStats, follow } from './reader.js';
import type { FollowOptions } from './reader.js';
import { SessionRegistry } from './registry.js';
import type { SessionRecord } from './registry.js';
import { holdPresence, probeWriter } from './presence.js';
import type { WriterState, WritesStream } from './presence.js';
import { assertSupportedServer, createServerReporter } from './server-features.js';
import type { ServerReport } from './server-features.js';
import { ensureLog, unavailable } from './setup.js';
import type { LogLayout, Partition } from './layout.js';
import { TaskTable } from './tasks/task-table.js';
import { TaskEvents } from './tasks/task-events.js';
import type { LogHandles } from './setup.js';
import { createSubjects, ControlType, parseAdminRequest } from './wire.js';
import type { AdminAnswer, AdminRequest, ControlMessage } from './wire.js';
import { StreamWriter } from './writer.js';
import type { AppendOptions, AppendResult, InDoubtAppend } from './writer.js';

/** A reader opened ahead of the events it will read (see `SessionLog.openReader`). */
export interface StreamReader {
  /** Every event after `from`, live first; ends after the stream's `end`. Closes the reader when done. */
  follow(from: Cursor, options?: FollowOptions): AsyncGenerator<LogEvent, void, undefined>;
  /** For a reader that will never follow (the stream could not be started). */
  close(): void;
}

export interface CreateSessionLogOptions extends SessionLogOptions {
  /** An open connection to use (not closed by `close()`); otherwise one is opened to `servers`. */
  readonly nc?: NatsConnection;
  /** NATS URLs when no connection is given. Default `nats://127.0.0.1:4222`. */
  readonly servers?: string | readonly string[];
  /** Writers kept open for `append()`; the oldest is dropped past this. Default 10 000. */
  readonly maxOpenWriters?: number;
  /**
   * Open sessions one principal may have, across every instance sharing the
   * log (`createSession` refuses `too_many_sessions` past it). Anonymous
   * callers share one principal. 0: no limit. Default 0.
   */
  readonly maxSessionsPerPrincipal?: number;
}

/** A resume the log accepted: iterate `events()` for the suffix after the cursor. */
export interface ResumeAccepted extends Acceptance {
  events(options?: Omit<FollowOptions, 'endedAtCursor'>): AsyncGenerator<LogEvent, void, undefined>;
}
export type ResumeResult = ResumeAccepted | Refusal;

/**
 * The per-session event log on JetStream. One instance per process; safe for
 * concurrent use. See the package README for the data model.
 */
export class SessionLog {
  readonly config: SessionLogConfig;
  readonly sessions: SessionRegistry;
  readonly leases: LeaseTable;
  /** Which partition holds each session (one stream and two buckets each). */
  readonly layout: LogLayout;
  /** What the log's parts share (connection, subjects, control), with the stream of partition 0. */
  readonly #ctx: LogContext;
  /** The context of each partition: `#ctx` with that partition's stream name. */
  readonly #partitionCtx: readonly LogContext[];
  readonly #ownsConnection: boolean;
  readonly #writers = new Map<string, Promise<StreamWriter>>();
  /** Appends whose outcome is unknown, per stream, settled by the next writer. */
  readonly #inDoubt = new Map<string, InDoubtAppend>();
  readonly #maxOpenWriters: number;
  readonly #principals: PrincipalIndex;
  readonly #maxSessionsPerPrincipal: number;
  readonly #server: () => ServerReport;

  private constructor(ctx: LogContext, handles: LogHandles, server: () => ServerReport, options: CreateSessionLogOptions) {
    this.#ctx = ctx;
    this.#server = server;
    this.config = ctx.config;
    this.layout = handles.layout;
    this.#partitionCtx = handles.layout.partitions.map((p) => (p.index === 0 && p.streamName === ctx.config.streamName ? ctx : { ...ctx, config: { ...ctx.config, streamName: p.streamName } }));
    const { sessions, leases } = handles;
    const quorum = new LeaderQuorumCheck(ctx.nc, ctx.jsm);
    this.sessions = new SessionRegistry(
      (sessionId) => sessions[this.layout.of(sessionId).index] as KV,
      async (sessionId, reread) => {
        if (ctx.config.replicas <= 1) return undefined;
        const bucket = this.layout.of(sessionId).sessionsBucket;
        const checked = await quorum.recheck(`KV_${bucket}`, reread, `$KV.${bucket}.${sessionId}`);
        if (checked.doubt !== undefined) throw new SessionLogError(SessionLogErrorCode.logUnavailable, `session not found by a registry leader that may not be the only one: ${checked.doubt}`, { sessionId });
        return checked.value;
      },
    );
    this.leases = new LeaseTable((sessionId) => leases[this.layout.of(sessionId).index] as KV);
    this.#ownsConnection = options.nc === undefined;
    this.#maxOpenWriters = options.maxOpenWriters ?? 10_000;
    this.#maxSessionsPerPrincipal = options.maxSessionsPerPrincipal ?? 0;
    this.#principals = new PrincipalIndex(handles.principals, async (id) => (await this.sessions.get(id))?.state === 'active');
  }

  /** Connects (unless given a connection), then creates or verifies the stream and buckets. */
  static async create(options: CreateSessionLogOptions = {}): Promise<SessionLog> {
    const config = resolveConfig(options);
    const limit = options.maxSessionsPerPrincipal ?? 0;
    if (!Number.isSafeInteger(limit) || limit < 0 || limit > MAX_SESSIONS_PER_PRINCIPAL) {
      throw new SessionLogError(SessionLogErrorCode.invalidConfig, `invalid session log config: maxSessionsPerPrincipal=${JSON.stringify(limit)}; allowed: an integer from 0 (no limit) to ${MAX_SESSIONS_PER_PRINCIPAL}`, { key: 'maxSessionsPerPrincipal' });
    }
    let nc = options.nc;
    if (nc === undefined) {
      const servers = options.servers ?? 'nats://127.0.0.1:4222';
      try {
        // noAsyncTraces: nats.js otherwise builds Error objects on every
        // request for async stack traces, a large share of the gateway's CPU
        // per event in profiles (docs/benchmarks.md); our errors carry their own context.
        nc = await connect({ servers: typeof servers === 'string' ? servers : [...servers], maxReconnectAttempts: -1, noAsyncTraces: true });
      } catch (err) {
        throw new SessionLogError(SessionLogErrorCode.logUnavailable, `cannot connect to NATS at ${String(servers)}: ${String(err)}`, {}, { cause: err });
      }
    }
    try {
      assertSupportedServer(nc.info?.version, `the NATS server at ${nc.getServer()}`);
      const jsm = await jetstreamManager(nc, { timeout: config.requestTimeoutMs });
      const js = jetstream(nc, { timeout: config.requestTimeoutMs });
      const subjects = createSubjects(config.subjectPrefix, config.partitions);
      const capped = capPayload(config, nc);
      const handles = await ensureLog(nc, jsm, capped);
      const server = createServerReporter(() => nc.info?.version);
      const ctx: LogContext = {
        nc,
        js,
        jsm,
        config: capped,
        subjects,
        control: new ControlFanout(nc, subjects),
      };
      return new SessionLog(ctx, handles, server, options);
    } catch (err) {
      if (options.nc === undefined) await nc.close().catch(() => undefined);
      throw err instanceof SessionLogError ? err : unavailable(err);
    }
  }

  /** The nats-server this log talks to now (its version from INFO) and what it can do. For startup logs and `/readyz`. */
  get server(): ServerReport {
    return this.#server();
  }

  /** The NATS connection (shared with callers that publish control messages). */
  get connection(): NatsConnection {
    return this.#ctx.nc;
  }

  /**
   * The deployment's durable task records (the gateway's 2026-07-28 tasks),
   * creating or verifying their stream. `maxTtlMs`: the longest TTL a task
   * may have.
   */
  openTasks(maxTtlMs: number): Promise<TaskTable> {
    const ctx = this.#ctx;
    return TaskTable.open(ctx.nc, ctx.js, ctx.jsm, {
      streamName: ctx.config.tasksStream,
      subjectPrefix: ctx.config.subjectPrefix,
      replicas: ctx.config.replicas,
      maxTtlMs,
      requestTimeoutMs: ctx.config.requestTimeoutMs,
    });
  }

  /**
   * The recorded events of the gateway's tasks (`tasks/stream`, the draft
   * SEP-2694), creating their stream if needed.
   */
  openTaskEvents(maxTtlMs: number, maxEventsPerTask: number): Promise<TaskEvents> {
    const ctx = this.#ctx;
    return TaskEvents.open(ctx.js, ctx.jsm, {
      streamName: `${ctx.config.tasksStream}_EVENTS`,
      subjectPrefix: ctx.config.subjectPrefix,
      replicas: ctx.config.replicas,
      maxTtlMs,
      maxEventsPerTask,
      requestTimeoutMs: ctx.config.requestTimeoutMs,
    });
  }

  /** A fresh random id for a POST response stream. */
  newStreamId(): string {
    return newStreamId();
  }

  /**
   * Registers a new session of `principal` (a digest, see `principalDigest`).
   * With `maxSessionsPerPrincipal`, the registered session then takes one of
   * the principal's places; when none is free it is removed again and the
   * call fails `too_many_sessions` (its id was never handed out).
   */
  async createSession(principal: string, meta?: Readonly<Record<string, string>>): Promise<SessionRecord> {
    const record = await this.sessions.create(principal, meta);
    const limit = this.#maxSessionsPerPrincipal;
    if (limit === 0) return record;
    try {
      await this.#principals.reserve(principal, record.sessionId, limit);
    } catch (err) {
      await this.sessions.remove(record.sessionId).catch(() => undefined);
      throw err;
    }
    return record;
  }

  getSession(sessionId: string): Promise<SessionRecord | undefined> {
    return this.sessions.get(sessionId);
  }

  /**
   * Closes a session everywhere: marks it closed, purges its events, drops
   * local writers, and tells every instance on `<prefix>.ctl.<session>`.
   * Returns false when the session was unknown.
   */
  async closeSession(sessionId: string, from?: string): Promise<boolean> {
    const record = await this.sessions.markClosed(sessionId);
    if (record === undefined) return false;
    if (this.#maxSessionsPerPrincipal > 0) await this.#principals.release(record.principal, sessionId).catch(() => undefined);
    for (const key of this.#writers.keys()) if (key.startsWith(`${sessionId}.`)) this.#writers.delete(key);
    for (const key of this.#inDoubt.keys()) if (key.startsWith(`${sessionId}.`)) this.#inDoubt.delete(key);
    try {
      await this.#ctx.jsm.streams.purge(this.#ctxOf(sessionId).config.streamName, { filter: this.#ctx.subjects.sessionLogs(sessionId) });
    } catch (err) {
      throw unavailable(err);
    }
    this.publishControl({ type: ControlType.closed, sessionId, ...(from === undefined ? {} : { from }) });
    return true;
  }

  /**
   * Records an audit event of the session (metadata only, see `audit.ts`):
   * a core publish to `<prefix>.audit.<session>`, which the log stream
   * captures. Fire and forget: no ack is awaited, so it costs the caller a
   * JSON encode and a buffered write; one JetStream did not store is lost.
   */
  recordAudit(sessionId: string, event: AuditEvent): void {
    this.#ctx.nc.publish(this.#ctx.subjects.audit(sessionId), encodeAuditEvent(event));
  }

  /**
   * Answers operator requests addressed to one instance (`<prefix>.admin.<instance>`,
   * tether-admin's `drain`) until the returned function is called. Malformed
   * requests are answered `ok: false` and not passed on.
   */
  listenAdmin(instanceId: string, listener: (request: AdminRequest, reply: (answer: AdminAnswer) => void) => void): () => void {
    const sub = this.#ctx.nc.subscribe(this.#ctx.subjects.admin(instanceId), {
      callback: (err, msg) => {
        if (err !== null) return;
        const reply = (answer: AdminAnswer): void => void msg.respond(JSON.stringify(answer));
        const request = parseAdminRequest(msg.data);
        if (request === undefined) return reply({ ok: false, instance: instanceId, detail: 'not an admin request' });
        listener(request, reply);
      },
    });
    return () => sub.unsubscribe();
  }

  /** Publishes a control message to every instance following the session. */
  publishControl(message: ControlMessage): void {
    this.#ctx.nc.publish(this.#ctx.subjects.control(message.sessionId), JSON.stringify(message));
  }

  /**
   * Calls `listener` with each control message of one session (closed,
   * superseded, released) until the returned function is called: from the
   * connection's one control subscription (see `ControlFanout`), in its
   * callback. Malformed messages are skipped.
   */
  listenControl(sessionId: string, listener: (message: ControlMessage) => void): () => void {
    return this.#ctx.control.listen(sessionId, listener);
  }

  /** Like `listenControl`, for every session's messages (the session as the subject names it). */
  listenAllControl(listener: (sessionId: string, message: ControlMessage) => void): () => void {
    return this.#ctx.control.listenAll(listener);
  }

  /**
   * Control messages of one session (closed, superseded, drain) until
   * `signal` aborts, as an iterator over `listenControl`. Malformed messages
   * are skipped.
   */
  async *watchControl(sessionId: string, signal: AbortSignal): AsyncGenerator<ControlMessage, void, undefined> {
    const queue: ControlMessage[] = [];
    let wake: (() => void) | undefined;
    const notify = (): void => {
      const w = wake;
      wake = undefined;
      w?.();
    };
    const unlisten = this.#ctx.control.listen(sessionId, (message) => {
      queue.push(message);
      notify();
    });
    signal.addEventListener('abort', notify, { once: true });
    try {
      for (;;) {
        if (signal.aborted) return;
        const next = queue.shift();
        if (next !== undefined) {
          yield next;
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
      }
    } finally {
      signal.removeEventListener('abort', notify);
      unlisten();
    }
  }

  /**
   * Holds a writer's presence on `<prefix>.writer.<writerId>` until
   * `close()`: while held, a probe of this writer gets an answer (from
   * `writes`, per stream); once closed, or once this connection is gone,
   * probes get "no responders" and readers elsewhere take its streams over.
   * One subscription per process, whatever the number of streams.
   */
  holdPresence(writerId: string, writes: WritesStream): { close(): Promise<void> } {
    return holdPresence(this.#ctx.nc, this.#ctx.subjects, writerId, writes);
  }

  /**
   * Whether `writerId` still writes `stream` of `sessionId` (without them:
   * whether the writer lives). `gone` at once when no process holds its
   * presence; `silent` after `timeoutMs` without an answer.
   */
  probeWriter(writerId: string, timeoutMs: number, sessionId?: string, stream?: string): Promise<WriterState> {
    return probeWriter(this.#ctx.nc, this.#ctx.subjects, writerId, timeoutMs, sessionId, stream);
  }

  /**
   * Appends one event to a session stream and returns its event id once
   * JetStream acknowledged it. The first append to a stream on this instance
   * opens a writer positioned at the stream's current end.
   *
   * A `log_unavailable` failure means the outcome is unknown. Retrying the
   * same call (same kind and bytes) with `retry: true` is safe: if the first
   * attempt landed, the retry returns its id instead of appending a
   * duplicate. Without `retry` the event is appended after whatever landed.
   */
  async append(sessionId: string, stream: string, kind: EventKind, payload: Uint8Array, options?: AppendOptions): Promise<AppendResult> {
    const key = `${sessionId}.${stream}`;
    // A claim is judged against the stream's end as the log has it now, never a cached position.
    if (options?.claim !== undefined) this.#writers.delete(key);
    let pending = this.#writers.get(key);
    if (pending === undefined) {
      const opens = options?.opensStream;
      pending = opens === undefined ? this.openWriter(sessionId, stream, options?.existing === true) : this.#createWriter(sessionId, stream, opens.epoch);
      this.#writers.set(key, pending);
      if (this.#writers.size > this.#maxOpenWriters) this.#writers.delete(this.#writers.keys().next().value as string);
    }
    // Concurrent appends share `pending`; one that fails forgets only that writer, never a
    // fresh one a concurrent retry opened meanwhile (found by the SDK store fuzz: a forgotten
    // fresh writer let a third open its own, and events of one instance landed out of order).
    const opened = pending;
    const forget = (): void => {
      if (this.#writers.get(key) === opened) this.#writers.delete(key);
    };
    let writer: StreamWriter;
    try {
      writer = await pending;
    } catch (err) {
      forget();
      throw err;
    }
    if (options?.claim !== undefined && writer.last.seq !== options.claim.afterSeq) {
      forget();
      throw new SessionLogError(SessionLogErrorCode.writerConflict, `stream ${stream} moved on past seq ${options.claim.afterSeq} (now ${writer.last.seq}): another writer holds it`, {
        sessionId,
        stream,
        seq: writer.last.seq,
        expectedSeq: options.claim.afterSeq + 1,
      });
    }
    const doubt = this.#inDoubt.get(key);
    this.#inDoubt.delete(key);
    if (doubt !== undefined && doubt.writer !== '' && options?.claim === undefined && options?.shared !== true && writer.headWriter !== doubt.writer) {
      // While this writer's last append was in doubt (NATS cut off, a stalled link) another
      // writer took the stream over and appended: rebuilt from the log's end, this writer would
      // continue the other's chain, and the stream would have two writers (chaos finding 15).
      // It stops, as a writer that meets a rival's append does, and stays stopped (the doubt is
      // kept) until it claims the stream again.
      forget();
      this.#inDoubt.set(key, doubt);
      throw new SessionLogError(SessionLogErrorCode.writerConflict, `another writer appended to stream ${stream} while this writer's last append was in doubt; this writer stops`, {
        sessionId,
        stream,
        seq: writer.last.seq,
      });
    }
    if (doubt !== undefined && options?.retry === true) {
      // The caller is retrying after an unknown outcome. If that append did
      // land, appending again would duplicate it under a new seq. (Not
      // without the flag: an equal event may be a new one, and taking it
      // for the retry would silently drop it.)
      let landed: AppendResult | undefined;
      try {
        landed = await writer.settle(doubt);
      } catch (err) {
        // Still unknown: the next retry must settle it again, not append a second copy.
        this.#inDoubt.set(key, doubt);
        throw isSessionLogError(err) ? err : unavailable(err);
      }
      if (landed !== undefined && doubt.kind === kind && doubt.writer === (options?.writer ?? '') && Buffer.compare(Buffer.from(doubt.payload), Buffer.from(payload)) === 0) {
        return landed;
      }
    }
    try {
      const result = await writer.append(kind, payload, options);
      if (writer.ended) forget();
      return result;
    } catch (err) {
      // A writer whose last outcome is unknown is rebuilt from the log next time.
      if (writer.broken || writer.ended) forget();
      if (writer.inDoubt !== undefined) this.#inDoubt.set(key, writer.inDoubt);
      throw err;
    }
  }

  async #createWriter(sessionId: string, stream: string, epoch: string): Promise<StreamWriter> {
    assertStreamId(stream);
    return StreamWriter.create(this.#ctxOf(sessionId), sessionId, stream, epoch);
  }

  /** A writer for one stream, positioned at its current end. Hold a lease while using it. */
  async openWriter(sessionId: string, stream: string, existing = false): Promise<StreamWriter> {
    assertStreamId(stream);
    const session = await this.sessions.get(sessionId);
    if (session === undefined) throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
    if (session.state !== 'active') throw new SessionLogError(SessionLogErrorCode.sessionClosed, 'the session is closed', { sessionId });
    return StreamWriter.open(this.#ctxOf(sessionId), sessionId, stream, session.epoch, existing);
  }

  /**
   * Classifies a resume (DESIGN section 7). On `resumed`, `events()` yields the
   * exact suffix after the cursor: replay, then live, ending after a POST
   * stream's `end` event. Any other verdict comes with a reason and the
   * positions involved. Never throws for bad input; throws `log_unavailable`
   * when JetStream cannot be asked.
   */
  async resume(sessionId: string, lastEventId: string, principal: string): Promise<ResumeResult> {
    const ctx = this.#ctxOf(sessionId);
    // The live tail opens before the classification reads the log, so that
    // read's "nothing more" is the log's end: every event stored after it
    // reaches the tail. (Opened after, a read after it would have to confirm
    // that, one more round trip per resume.) It only buffers: nothing it
    // holds is used before the session and principal are checked, and it
    // opens only on ids that are valid subject tokens.
    const cursorStream = streamOfCursor(lastEventId);
    let tail = cursorStream !== undefined && isSessionId(sessionId) ? new LiveTail(ctx, sessionId, cursorStream, undefined, createFollowStats()) : undefined;
    let result: Classification;
    try {
      result = await classifyResume(ctx, this.sessions, sessionId, lastEventId, principal);
    } catch (err) {
      tail?.close();
      throw err;
    }
    if (result.verdict !== 'resumed' || result.endedAtCursor || tail === undefined || result.stream !== cursorStream) {
      tail?.close();
      tail = undefined;
    }
    if (result.verdict !== 'resumed') return result;
    const accepted = result;
    // A caller that never reads the events (an edge answering 204 for
    // `nothingLeft`, a client gone) must not keep the tail's subscription.
    const unclaimed = tail === undefined ? undefined : setTimeout(() => {
      tail?.close();
      tail = undefined;
    }, UNCLAIMED_TAIL_MS);
    unclaimed?.unref();
    return {
      ...accepted,
      events: (options = {}) => {
        clearTimeout(unclaimed);
        const opened = tail;
        tail = undefined;
        const replay = accepted.replay === undefined ? undefined : opened === undefined ? accepted.replay : { ...accepted.replay, firstIsFresh: true };
        return follow(ctx, sessionId, accepted.stream, accepted.session.epoch, accepted.cursor, { ...options, endedAtCursor: accepted.endedAtCursor }, {
          ...(replay === undefined ? {} : { replay }),
          ...(opened === undefined || replay === undefined ? {} : { tail: opened }),
        });
      },
    };
  }

  /**
   * Follows one stream from a cursor (default: its beginning), with the same
   * guarantees as a resume. Used for a fresh POST response or GET stream.
   */
  async *follow(sessionId: string, stream: string, from: Cursor = START_CURSOR, options: FollowOptions = {}): AsyncGenerator<LogEvent, void, undefined> {
    assertStreamId(stream);
    const session = await this.sessions.get(sessionId);
    if (session === undefined || session.state !== 'active') {
      throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
    }
    await this.#assertCursor(sessionId, stream, session.epoch, from);
    yield* follow(this.#ctxOf(sessionId), sessionId, stream, session.epoch, from, options);
  }

  /**
   * Opens a reader on a stream *now*: every event stored from this moment on
   * reaches it live. Open it before appending a new stream's first event, or
   * before reading the head a fresh GET starts after; `follow(from)` then
   * starts live, without asking the log for what it already knows is not
   * there (a replay consumer costs three round trips and server work). It
   * keeps the seam rule: an event out of line, or silence right after it
   * starts, sends it to the log. Call `follow` once, or `close`.
   *
   * Takes the session as the caller just authorized it (its epoch); a close
   * after that reaches the reader on the control subject.
   */
  openReader(session: SessionRecord, stream: string): StreamReader {
    assertStreamId(stream);
    const ctx = this.#ctxOf(session.sessionId);
    const tail = new LiveTail(ctx, session.sessionId, stream, undefined, createFollowStats());
    return {
      follow: (from, options = {}) => follow(ctx, session.sessionId, stream, session.epoch, from, options, { tail }),
      close: () => tail.close(),
    };
  }

  /**
   * A cursor given by a caller (not produced by a resume) must name an event
   * of this stream: otherwise reading after it would report a broken chain or
   * an eviction that never happened. When its event was evicted the reader's
   * own chain check still decides (`stream_truncated`).
   */
  async #assertCursor(sessionId: string, stream: string, epoch: string, from: Cursor): Promise<void> {
    if (from.seq === 0 && from.pos === 0) return;
    const bad = (why: string): SessionLogError =>
      new SessionLogError(SessionLogErrorCode.invalidArgument, `the cursor (seq ${from.seq}, pos ${from.pos}) does not name an event of this stream: ${why}`, { sessionId, stream, seq: from.seq, pos: from.pos });
    if (!Number.isSafeInteger(from.seq) || !Number.isSafeInteger(from.pos) || from.seq < 1 || from.pos < 1) throw bad('seq and pos must both be 0, or both be positive integers');
    let at;
    try {
      at = await this.#ctx.jsm.streams.getMessage(this.#ctxOf(sessionId).config.streamName, { seq: from.pos });
    } catch (err) {
      throw unavailable(err);
    }
    if (at === null) {
      // Nothing at that position any more (deleted, or another session's
      // message since purged): the cursor holds only if the stream's next
      // event after it is the one after its seq, chained to that position.
      // Otherwise the first event read would break the chain, and the
      // client's cursor, not the log, would be blamed as data loss.
      let next: LogEvent | undefined;
      try {
        next = (await readPage(this.#ctxOf(sessionId), sessionId, stream, epoch, { afterSeq: from.seq, limit: 1, afterPos: from.pos }))[0];
      } catch (err) {
        if (err instanceof SessionLogError && err.code === SessionLogErrorCode.streamDiverged) throw bad('no event of this stream is at that position');
        throw err;
      }
      if (next !== undefined && (next.seq !== from.seq + 1 || next.prev !== from.pos)) throw bad('no event of this stream is at that position');
      return;
    }
    const decoded = at.subject === this.#ctx.subjects.log(sessionId, stream) ? decodeLogEvent(sessionId, stream, at.seq, at.header, at.data) : undefined;
    if (decoded === undefined || !decoded.ok || decoded.event.seq !== from.seq || decoded.event.epoch !== epoch) throw bad('the log holds a different event at that position');
  }

  /**
   * The last event of a stream (`undefined` when it holds none), read from
   * the leader: where a fresh GET starts following, and what a writer taking
   * over needs (its seq, kind and last upstream id).
   */
  async head(sessionId: string, stream: string): Promise<LogEvent | undefined> {
    assertStreamId(stream);
    const session = await this.sessions.get(sessionId);
    if (session === undefined || session.state !== 'active') {
      throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
    }
    let last;
    try {
      last = await this.#ctx.jsm.streams.getMessage(this.#ctxOf(sessionId).config.streamName, { last_by_subj: this.#ctx.subjects.log(sessionId, stream) });
    } catch (err) {
      throw unavailable(err);
    }
    if (last === null) return undefined;
    const decoded = decodeLogEvent(sessionId, stream, last.seq, last.header, last.data);
    if (!decoded.ok || decoded.event.epoch !== session.epoch) {
      throw new SessionLogError(SessionLogErrorCode.streamDiverged, 'the last event of the stream does not belong to this session epoch', { sessionId, stream, pos: last.seq });
    }
    return decoded.event;
  }

  /** Up to `limit` events of a stream after `afterSeq` (from the log only; for polling). */
  async readPage(sessionId: string, stream: string, afterSeq: number, limit: number, afterPos?: number): Promise<LogEvent[]> {
    assertStreamId(stream);
    const session = await this.sessions.get(sessionId);
    if (session === undefined || session.state !== 'active') {
      throw new SessionLogError(SessionLogErrorCode.sessionNotFound, 'session not found', { sessionId });
    }
    if (afterPos !== undefined) await this.#assertCursor(sessionId, stream, session.epoch, { seq: afterSeq, pos: afterPos });
    return readPage(this.#ctxOf(sessionId), sessionId, stream, session.epoch, { afterSeq, limit, ...(afterPos === undefined ? {} : { afterPos }) });
  }

  /** The context of the partition holding `sessionId`. */
  #ctxOf(sessionId: string): LogContext {
    return this.#partitionCtx[this.layout.of(sessionId).index] as LogContext;
  }

  /** The partition holding `sessionId`: its index, stream and buckets (for operators' tools and tests). */
  partitionOf(sessionId: string): Partition {
    return this.layout.of(sessionId);
  }

  /** Closes the connection if this log opened it. */
  async close(): Promise<void> {
    this.#writers.clear();
    this.#inDoubt.clear();
    if (this.#ownsConnection) await this.#ctx.nc.drain().catch(() => undefined);
  }
}

/** How long an accepted resume keeps its pre-opened live tail for `events()`; after that `events()` opens one itself. */
const UNCLAIMED_TAIL_MS = 10_000;

/** The stream id a Last-Event-ID names, if it decodes (an id that does not is refused by the classification). */
function streamOfCursor(lastEventId: string): string | undefined {
  const decoded = decodeEventId(lastEventId);
  return decoded.ok ? decoded.value.stream : undefined;
}

/** The server's `max_payload` bounds what a single append may carry (minus room for headers). */
function capPayload(config: SessionLogConfig, nc: NatsConnection): SessionLogConfig {
  const serverMax = nc.info?.max_payload;
  if (serverMax === undefined || config.maxPayloadBytes <= serverMax - 4096) return config;
  return { ...config, maxPayloadBytes: serverMax - 4096 };
}
