import { InterceptingCall, Metadata, status } from '@grpc/grpc-js';
import type { ClientReadableStream, Interceptor } from '@grpc/grpc-js';
import { callUnary, controlTypeFromSpelling, controlTypeSpelling, createCursorClient, readCallFailure, resumeVerdictSpelling } from '@tether/cursor-proto';
import { endReasonFromSpelling, endReasonSpelling, eventKindFromSpelling, eventKindSpelling } from '@tether/cursor-proto';
import { AdminRequestType as WireAdminType, WriterState as WireWriterState } from '@tether/cursor-proto';
import type { CursorClientTls, CursorServiceClient, Event, ResumeResponse, Session, WatchAdminResponse } from '@tether/cursor-proto';
import { decodeEventId } from '@tether/protocol';
import { SessionLogError, SessionLogErrorCode } from '@tether/session-log';
import type { Cursor, LogEvent, Refusal, SessionLogErrorFields, SessionRecord, WriterState, WritesStream } from '@tether/session-log';
import { traceparentOf } from '@tether/telemetry';
import type { Logger } from 'pino';
import { AuditBatcher } from './audit-batcher.js';
import { openTasksOver } from './grpc-tasks.js';
import type { LogPort } from './log-port.js';

export interface GrpcLogOptions {
  /** `host:port` of the session-log service (or a balancer in front of several). */
  readonly target: string;
  /** Bearer token the service accepts. Default none. */
  readonly token?: string;
  /** TLS: `true` trusts the system roots; an object adds a CA and/or a client certificate (mTLS). Default plaintext. */
  readonly tls?: boolean | CursorClientTls;
  /** Deadline of each unary call. Default 10 s. */
  readonly callTimeoutMs?: number;
  /** Attempts of an append whose reply was lost (UNAVAILABLE, DEADLINE_EXCEEDED). Default 3. */
  readonly appendAttempts?: number;
  /** How long `createGrpcLog` waits for the first connection. Default 10 s. */
  readonly connectTimeoutMs?: number;
  /** grpc-js client interceptors, run before the gateway's own (traceparent, token): instrumentation, or a test's lost replies. */
  readonly interceptors?: readonly Interceptor[];
  /** Where the log reports what the service refused (audit events, as counts) and the address operators drain this instance by. Default: nowhere. */
  readonly logger?: Pick<Logger, 'warn' | 'info'>;
}

/** Resume and Follow messages both carry the next event here. */
type Carrier = { event?: Event | undefined };

/** A resumed call whose events nobody claimed within this long is cancelled; `events()` then follows from the cursor. */
const UNCLAIMED_RESUME_MS = 10_000;
const MAX_TRACKED_STREAMS = 10_000;
/** Times a broken stream is opened again before its reader gets `log_unavailable` (backoff up to 2 s each). */
const REOPEN_ATTEMPTS = 10;
const LIBRARY_CODES: ReadonlySet<string> = new Set(Object.values(SessionLogErrorCode));

/**
 * The log over the cursor API (the session-log service): the gateway holds no
 * NATS credentials. Same semantics and error codes as the in-process log:
 * statuses are mapped back to `SessionLogError`s from their ErrorDetail, a
 * refused resume comes back as a `Refusal` with its verdict and positions.
 *
 * Appends carry `expected_seq` (this client tracks each stream's last seq,
 * asking Head once when it does not know it), so an append whose reply was
 * lost is retried without ever being stored twice, on whichever instance.
 * Tasks (`openTasks`) go through the task RPCs, with the library's task table
 * behind them on the service: see `openTasksOver`.
 */
export async function createGrpcLog(options: GrpcLogOptions): Promise<LogPort> {
  const tls = options.tls === true ? {} : options.tls === false ? undefined : options.tls;
  const client = createCursorClient({
    target: options.target,
    ...(options.token === undefined ? {} : { token: options.token }),
    ...(tls === undefined ? {} : { tls }),
    channelOptions: { interceptors: [...(options.interceptors ?? []), traceparentInterceptor] },
  });
  const deadlineMs = options.callTimeoutMs ?? 10_000;
  const attempts = options.appendAttempts ?? 3;
  try {
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + (options.connectTimeoutMs ?? 10_000), (err) => (err ? reject(err) : resolve())));
  } catch (err) {
    client.close();
    throw new SessionLogError(SessionLogErrorCode.logUnavailable, `cannot reach the session-log service at ${options.target}: ${String(err)}`, {}, { cause: err });
  }
  const call = <Req, Res>(method: Parameters<typeof callUnary<Req, Res>>[0], request: Req): Promise<Res> =>
    callUnary(method.bind(client), request, { deadlineMs }).catch((err: unknown) => {
      throw toLogError(err);
    });
  const head = async (sessionId: string, stream: string): Promise<LogEvent | undefined> => {
    const { event } = await call(client.head, { sessionId, stream });
    return event === undefined ? undefined : toLogEvent(sessionId, event);
  };
  // Audit events go out a few milliseconds' worth at a time (audit-batcher.ts); a service
  // without RecordAuditBatch (older than it) gets them one call each, as before.
  let batchAudit = true;
  const audits = new AuditBatcher(
    async (events) => {
      if (batchAudit) {
        try {
          // The service records the batch's valid events and names the others (`refused`).
          return await callUnary(client.recordAuditBatch.bind(client), { events }, { deadlineMs });
        } catch (err) {
          if (readCallFailure(err).code !== status.UNIMPLEMENTED) return;
          batchAudit = false;
        }
      }
      await Promise.all(events.map((e) => callUnary(client.recordAudit.bind(client), e, { deadlineMs }).catch(() => undefined)));
    },
    options.logger === undefined ? {} : { logger: options.logger },
  );
  const lastSeq = new Map<string, number>();
  /** The expected_seq of each stream's last append whose outcome stayed unknown after every attempt (see `isRefusal`). */
  const inDoubt = new Map<string, number>();
  const queues = new Map<string, Promise<unknown>>();
  /** Events after `from`; after a lost connection it follows again from the last event delivered (the service checks the chain). */
  const follower = (sessionId: string, stream: string, from: Cursor, signal?: AbortSignal, first?: ClientReadableStream<Carrier>) => {
    let after = from;
    const open = (): ClientReadableStream<Carrier> => client.follow({ sessionId, stream, afterSeq: after.seq, afterPos: after.pos });
    const pick = (m: Carrier): LogEvent | undefined => {
      if (m.event === undefined) return undefined;
      after = { seq: m.event.seq, pos: m.event.pos };
      return toLogEvent(sessionId, m.event);
    };
    return reopening(open, pick, signal, first);
  };

  const port: LogPort = {
    describe: `grpc ${options.target}`,
    partitions: undefined,
    createSession: async (principal, meta) => toRecord((await call(client.openSession, { principal, meta: { ...meta } })).session, principal),
    authorize: async (sessionId, principal) => toRecord((await call(client.getSession, { sessionId, principal })).session, principal),
    touchSession: async (sessionId) => void (await call(client.touchSession, { sessionId })),
    closeSession: async (sessionId, from) => (await call(client.closeSession, { sessionId, from })).closed,

    append(sessionId, stream, kind, payload, appendOptions = {}) {
      const key = `${sessionId}.${stream}`;
      const run = (queues.get(key) ?? Promise.resolve()).then(async () => {
        // A stream this call opens is empty: no Head round trip to learn that.
        // A claim follows exactly the head it found orphaned, never a cached position.
        if (appendOptions.claim !== undefined) lastSeq.delete(key);
        // A retry of an append whose outcome stayed unknown asks for the same seq again: the
        // service answers the stored event if it is this one (`duplicate`), a conflict if it
        // is another. Without it the retry would read the head, find its own first attempt
        // there and append it once more (found by npm run chaos -- --log grpc with a power loss).
        const doubt = appendOptions.retry === true && appendOptions.claim === undefined ? inDoubt.get(key) : undefined;
        inDoubt.delete(key);
        // `??` stops at the first known seq: a retry in doubt, a claim or a cached seq asks no Head.
        const expectedSeq =
          doubt ?? (appendOptions.claim?.afterSeq ?? lastSeq.get(key) ?? (appendOptions.opensStream !== undefined ? 0 : (await head(sessionId, stream))?.seq) ?? 0) + 1;
        const request = {
          sessionId,
          stream,
          kind: eventKindFromSpelling(kind) ?? 0,
          payload: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
          upstreamId: appendOptions.upstreamId,
          endReason: appendOptions.endReason === undefined ? 0 : (endReasonFromSpelling(appendOptions.endReason) ?? 0),
          traceparent: appendOptions.traceparent,
          expectedSeq,
          writer: appendOptions.writer,
        };
        for (let attempt = 1; ; attempt += 1) {
          try {
            const result = await callUnary(client.append.bind(client), request, { deadlineMs });
            lastSeq.delete(key);
            if (kind !== 'end') lastSeq.set(key, result.seq);
            if (lastSeq.size > MAX_TRACKED_STREAMS) lastSeq.delete(lastSeq.keys().next().value as string);
            return { id: result.id, seq: result.seq, pos: result.pos };
          } catch (err) {
            // The outcome is unknown: the same expected_seq makes the retry safe.
            const unknownOutcome = !isRefusal(err);
            if (unknownOutcome && attempt < attempts) {
              await new Promise((r) => setTimeout(r, 50 * attempt));
              continue;
            }
            lastSeq.delete(key);
            if (unknownOutcome) {
              inDoubt.set(key, expectedSeq);
              if (inDoubt.size > MAX_TRACKED_STREAMS) inDoubt.delete(inDoubt.keys().next().value as string);
            }
            throw toLogError(err);
          }
        }
      });
      const tail = run.catch(() => undefined);
      queues.set(key, tail);
      void tail.then(() => queues.get(key) === tail && queues.delete(key));
      return run;
    },
    head,
    readPage: async (sessionId, stream, afterSeq, limit, afterPos) =>
      (await call(client.read, { sessionId, stream, afterSeq, limit, afterPos })).events.map((e) => toLogEvent(sessionId, e)),

    async resume(sessionId, lastEventId, principal) {
      const stream = client.resume({ sessionId, lastEventId, principal });
      let first: ResumeResponse;
      try {
        first = await firstMessage(stream);
      } catch (err) {
        const refusal = toRefusal(sessionId, err);
        if (refusal !== undefined) return refusal;
        throw toLogError(err);
      }
      const ack = first.ack;
      if (ack === undefined) {
        stream.cancel();
        throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'the session-log service sent an event before the resume ack', { sessionId });
      }
      stream.pause();
      // Until events() reads it, an error (a cancel by the timer below) must not be unhandled.
      stream.on('error', () => undefined);
      let pending: ClientReadableStream<ResumeResponse> | undefined = stream;
      const unclaimed = setTimeout(() => {
        pending?.cancel();
        pending = undefined;
      }, UNCLAIMED_RESUME_MS);
      unclaimed.unref();
      const cursor = { seq: ack.cursorSeq, pos: ack.cursorPos };
      return {
        verdict: 'resumed',
        session: toRecord(ack.session, principal),
        stream: ack.stream,
        cursor,
        endedAtCursor: ack.endedAtCursor,
        nothingLeft: ack.nothingLeft,
        events: (eventOptions = {}) => {
          if (ack.endedAtCursor) return (async function* () {})();
          // The first reading continues this very call; later ones (or one after it expired) follow from the cursor.
          const first = pending;
          pending = undefined;
          clearTimeout(unclaimed);
          return follower(sessionId, ack.stream, cursor, eventOptions.signal, first);
        },
      };
    },
    follow(sessionId, stream, from, followOptions = {}) {
      if (followOptions.endedAtCursor === true) return (async function* () {})();
      return follower(sessionId, stream, from, followOptions.signal);
    },
    // The service's Follow already starts with the log; nothing to open ahead.
    openReader: (session, stream) => ({
      follow: (from, followOptions = {}) => follower(session.sessionId, stream, from, followOptions.signal),
      close: () => undefined,
    }),

    holdPresence: (writerId, writes) => holdPresenceOver(client, writerId, writes),
    probeWriter: async (writer, sessionId, stream, timeoutMs) => writerStateOf((await call(client.probeWriter, { writer, sessionId, stream, timeoutMs })).state),

    audit(sessionId, event) {
      const request = {
        sessionId,
        atMs: event.atMs,
        instance: event.instance,
        kind: event.kind,
        stream: event.stream,
        cursor: event.cursor,
        verdict: event.verdict,
        status: event.status,
        events: event.events,
        conn: event.conn,
        writer: event.writer,
        from: event.from,
        reason: event.reason,
      };
      // Fire and forget, like the in-process core publish: nothing in the
      // request path waits for it, and a lost or refused event is dropped.
      audits.add(request);
    },
    // tether-admin's `drain <instance>` through the service: WatchAdmin holds
    // our address (`grpc.<caller tag>.<instance>`) on NATS for us, AnswerAdmin answers.
    listenAdmin(instanceId, listener) {
      const abort = new AbortController();
      void watchAdmin(client, instanceId, listener, abort.signal, deadlineMs, options.logger);
      return () => abort.abort();
    },
    publishControl(message) {
      const request = { message: { type: controlTypeFromSpelling(message.type) ?? 0, sessionId: message.sessionId, stream: message.stream, from: message.from } };
      // Fire and forget, like a core-NATS publish: nobody waits for it.
      call(client.publishControl, request).catch(() => undefined);
    },
    listenControl(sessionId, listener) {
      const abort = new AbortController();
      void (async () => {
        for await (const message of reopening(() => client.watchControl({ sessionId }), (m) => m.message, abort.signal)) {
          const type = controlTypeSpelling(message.type);
          if (type === undefined) continue;
          listener({ type, sessionId: message.sessionId, ...(message.stream === undefined ? {} : { stream: message.stream }), ...(message.from === undefined ? {} : { from: message.from }) });
        }
      })().catch(() => undefined);
      return () => abort.abort();
    },

    ready: () =>
      new Promise<boolean>((resolve) => {
        // grpc.health.v1.Health/Check with an empty request (service ""); the answer's field 1 is the status, 1 = SERVING.
        client.makeUnaryRequest('/grpc.health.v1.Health/Check', () => Buffer.alloc(0), (b: Buffer) => b, {}, new Metadata(), { deadline: Date.now() + 2_000 }, (err, value) =>
          resolve(err === null && value !== undefined && value[0] === 0x08 && value[1] === 0x01),
        );
      }),
    openTasks: (maxTtlMs) => openTasksOver(client, options.target, deadlineMs, maxTtlMs),
    server: () => undefined,
    close: async () => {
      await audits.flush();
      client.close();
    },
  };
  return port;
}

/**
 * Sends the active context's `traceparent` in every call's metadata, so the
 * service's server spans join the gateway's trace (and an append without
 * its own `traceparent` is stored with this one's), and `tether-audit:
 * self`, so the service does not draw this gateway's sessions twice. grpc-js calls the
 * interceptor synchronously when the call is made, so `context.active()`
 * is the caller's, not that of whatever later starts the call.
 */
const traceparentInterceptor: Interceptor = (callOptions, nextCall) => {
  const traceparent = traceparentOf();
  return new InterceptingCall(nextCall(callOptions), {
    start(metadata, listener, next) {
      if (traceparent !== undefined) metadata.set('traceparent', traceparent);
      // This gateway records its own audit events (RecordAudit): the service records none for its calls.
      metadata.set('tether-audit', 'self');
      next(metadata, listener);
    },
  });
};

/**
 * The items of a server stream as an async generator, cancelled when the
 * consumer stops or `signal` aborts. A lost connection (UNAVAILABLE: the
 * service restarted, a balancer moved) opens the stream again, with backoff,
 * so a rolling restart of the service is invisible to readers; any other
 * failure is the library's error.
 */
export async function* reopening<M, T>(open: () => ClientReadableStream<M>, pick: (m: M) => T | undefined, signal?: AbortSignal, first?: ClientReadableStream<M>): AsyncGenerator<T, void, undefined> {
  let call = first ?? open();
  const aborted = (): boolean => signal?.aborted === true;
  const cancel = (): void => call.cancel();
  signal?.addEventListener('abort', cancel, { once: true });
  try {
    for (let failures = 0; !aborted(); call = open()) {
      try {
        call.resume();
        for await (const message of call as AsyncIterable<M>) {
          const item = pick(message);
          failures = 0;
          if (item !== undefined) yield item;
        }
        return;
      } catch (err) {
        if (aborted()) return;
        if (readCallFailure(err).code !== status.UNAVAILABLE || ++failures > REOPEN_ATTEMPTS) throw toLogError(err);
        await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** failures, 2_000)));
      }
    }
  } finally {
    signal?.removeEventListener('abort', cancel);
    call.cancel();
  }
}

/** Reopens WatchAdmin after every failure, for as long as the gateway runs, except where the service cannot serve it. */
const ADMIN_GIVE_UP: ReadonlySet<number> = new Set([status.UNIMPLEMENTED, status.INVALID_ARGUMENT, status.UNAUTHENTICATED, status.PERMISSION_DENIED]);
const ADMIN_RETRY_MS = 2_000;

/**
 * Operator requests addressed to this instance, over WatchAdmin; each is
 * answered with AnswerAdmin (not awaited: the service replies on NATS, or
 * tells the operator the answer timed out). Unlike control watchers, which
 * belong to one delivery, this lives as long as the gateway: a broken
 * stream is reopened (`reopening`'s backoff, then every 2 s) until the
 * listener is stopped, and gives up only on a service that cannot serve it
 * (older than WatchAdmin, or refusing the instance id or the token).
 */
async function watchAdmin(
  client: CursorServiceClient,
  instance: string,
  listener: Parameters<LogPort['listenAdmin']>[1],
  signal: AbortSignal,
  deadlineMs: number,
  logger: Pick<Logger, 'info'> | undefined,
): Promise<void> {
  const answer = (requestId: string, value: { ok: boolean; detail?: string }): void =>
    void callUnary(client.answerAdmin.bind(client), { instance, requestId, ok: value.ok, detail: value.detail ?? '' }, { deadlineMs }).catch(() => undefined);
  // The first response names the address operators reach us by: logged
  // once (and again only if it changes), since an operator drains us by it
  // when another caller of the service names an instance alike.
  let address: string | undefined;
  const pick = (m: WatchAdminResponse): WatchAdminResponse | undefined => {
    if (m.requestId !== '') return m;
    if (m.address !== undefined && m.address !== address) {
      address = m.address;
      logger?.info({ instance, address }, 'admin requests reach this instance at its address');
    }
    return undefined;
  };
  while (!signal.aborted) {
    try {
      for await (const request of reopening(() => client.watchAdmin({ instance }), pick, signal)) {
        if (request.type !== WireAdminType.DRAIN) {
          answer(request.requestId, { ok: false, detail: 'not an admin request' });
          continue;
        }
        listener({ type: 'drain', ...(request.from === undefined ? {} : { from: request.from }) }, (a) => answer(request.requestId, a));
      }
    } catch (err) {
      const code = readCallFailure((err as { cause?: unknown }).cause ?? err).code;
      if (ADMIN_GIVE_UP.has(code)) return;
    }
    if (signal.aborted) return;
    await new Promise((r) => setTimeout(r, ADMIN_RETRY_MS).unref());
  }
}

function firstMessage<M>(call: ClientReadableStream<M>): Promise<M> {
  return new Promise<M>((resolve, reject) => {
    const settle = (done: () => void): void => {
      call.removeAllListeners('data').removeAllListeners('end').removeListener('error', onError);
      done();
    };
    const onError = (err: unknown): void => settle(() => reject(err));
    call.once('data', (m: M) => settle(() => resolve(m)));
    call.once('error', onError);
    call.once('end', () => settle(() => reject(new SessionLogError(SessionLogErrorCode.logUnavailable, 'the resume call ended without an ack'))));
  });
}

/** A status with code `resume_refused` is a Refusal (the verdict and positions kept); anything else is not. */
function toRefusal(sessionId: string, err: unknown): Refusal | undefined {
  const { message, detail } = readCallFailure(err);
  const verdict = detail?.code === 'resume_refused' ? resumeVerdictSpelling(detail.verdict) : undefined;
  if (detail === undefined || verdict === undefined || verdict === 'resumed') return undefined;
  const cursor = detail.cursor === undefined ? undefined : decodeEventId(detail.cursor);
  const log = Object.fromEntries(Object.entries(detail.log ?? {}).filter(([, v]) => v !== undefined)) as NonNullable<Refusal['log']>;
  const reason = detail.facts['reason'] ?? message;
  return { verdict, reason, sessionId, ...(cursor?.ok === true ? { cursor: cursor.value } : {}), ...(Object.keys(log).length > 0 ? { log } : {}) };
}

/**
 * Whether a failed call is the service's definite refusal (an ErrorDetail
 * code other than `log_unavailable` and `internal`: conflict, bad argument,
 * closed session, refused token), after which nothing was stored. Anything
 * else leaves an append's outcome unknown: a transport failure (UNAVAILABLE,
 * DEADLINE_EXCEEDED), a CANCELLED or reset stream, or a failure inside the
 * service after its write may have landed. Counting only the transport's
 * statuses as unknown let a retry after any other failure read the head,
 * find its own first attempt there and store it once more (finding 11).
 */
function isRefusal(err: unknown): boolean {
  const { code, detail } = readCallFailure(err);
  if (code === status.UNAVAILABLE || code === status.DEADLINE_EXCEEDED || detail === undefined) return false;
  return detail.code !== SessionLogErrorCode.logUnavailable && detail.code !== 'internal';
}

/** A failed call as the library's error: same code and fields; transport failures and service-only codes are `log_unavailable`. */
export function toLogError(err: unknown): SessionLogError {
  if (err instanceof SessionLogError) return err;
  const { code, message, detail } = readCallFailure(err);
  const libraryCode = detail !== undefined && LIBRARY_CODES.has(detail.code) ? (detail.code as SessionLogErrorCode) : SessionLogErrorCode.logUnavailable;
  const facts: Record<string, unknown> = { ...detail?.facts, grpcStatus: code, ...(detail === undefined || libraryCode === detail.code ? {} : { serviceCode: detail.code }) };
  if (detail?.holderExpiresAtMs !== undefined) facts['expiresAtMs'] = detail.holderExpiresAtMs;
  const fields: Record<string, unknown> = { detail: facts };
  for (const key of ['sessionId', 'stream', 'seq', 'pos', 'expectedSeq', 'expectedPrev', 'holder'] as const) if (detail?.[key] !== undefined) fields[key] = detail[key];
  const text = libraryCode === SessionLogErrorCode.logUnavailable && detail?.code !== 'log_unavailable' ? `session-log service: ${message}` : message;
  return new SessionLogError(libraryCode, text, fields as SessionLogErrorFields, { cause: err });
}

function toRecord(session: Session | undefined, principal: string): SessionRecord {
  if (session === undefined) throw new SessionLogError(SessionLogErrorCode.logUnavailable, 'the session-log service answered without a session');
  const { sessionId, epoch, createdAtMs, touchedAtMs, meta } = session;
  // The service keeps only a digest of the principal and never sends it; the caller's own value stands in.
  return { sessionId, epoch, principal, state: session.state === 2 ? 'closed' : 'active', createdAtMs, touchedAtMs, meta: { ...meta } };
}

function toLogEvent(sessionId: string, event: Event): LogEvent {
  const id = decodeEventId(event.id);
  const kind = eventKindSpelling(event.kind);
  if (!id.ok || kind === undefined) throw new SessionLogError(SessionLogErrorCode.streamDiverged, 'the session-log service sent a malformed event', { sessionId, pos: event.pos });
  const { id: text, stream, seq, pos, prev, payload, upstreamId, traceparent, writer } = event;
  const bytes = new Uint8Array(payload.buffer, payload.byteOffset, payload.byteLength);
  return { id: text, sessionId, stream, epoch: id.value.epoch, seq, pos, prev, kind, payload: bytes, upstreamId, endReason: endReasonSpelling(event.endReason), traceparent, writer };
}

const WRITER_STATES: ReadonlyMap<number, WriterState> = new Map([
  [WireWriterState.WRITING, 'writing'],
  [WireWriterState.NOT_WRITING, 'not_writing'],
  [WireWriterState.GONE, 'gone'],
  [WireWriterState.SILENT, 'silent'],
]);

/** An unknown state is silence: never a reason to take a stream over at once. */
function writerStateOf(state: number): WriterState {
  return WRITER_STATES.get(state) ?? 'silent';
}

/**
 * Holds the writer's presence through the service: one HoldPresence call,
 * answering each question from `writes`. A broken call (the service
 * restarted) is opened again with backoff; meanwhile probes of this
 * writer get GONE and other instances may take its streams over, which
 * the log's fencing turns into a `writer_conflict` here, never two writers.
 */
function holdPresenceOver(client: CursorServiceClient, writerId: string, writes: WritesStream): { close(): Promise<void> } {
  let closed = false;
  let current: ReturnType<CursorServiceClient['holdPresence']> | undefined;
  const run = async (): Promise<void> => {
    for (let failures = 0; !closed; ) {
      const call = client.holdPresence();
      current = call;
      const ended = new Promise<void>((resolve) => {
        call.on('data', (question: { question: number; sessionId: string; stream: string }) => {
          failures = 0;
          if (question.question === 0) return;
          void Promise.resolve()
            .then(() => writes(question.sessionId, question.stream))
            .then(
              (writing) => call.write({ question: question.question, writing }),
              () => undefined,
            );
        });
        call.on('error', () => resolve());
        call.on('end', () => resolve());
      });
      call.write({ writer: writerId, question: 0, writing: false });
      await ended;
      if (closed) return;
      failures += 1;
      await new Promise((r) => setTimeout(r, Math.min(50 * 2 ** failures, 2_000)).unref());
    }
  };
  void run();
  return {
    async close() {
      closed = true;
      current?.cancel();
    },
  };
}
