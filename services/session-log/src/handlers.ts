import { controlTypeSpelling } from '@tether/cursor-proto';
import type { CursorServiceServer } from '@tether/cursor-proto';
import type { ControlMessage, SessionLog } from '@tether/session-log';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import { answerAdmin, watchAdminHandler } from './admin.js';
import { Appender } from './append.js';
import { auditEventOf, createServiceAudit, DEFAULT_INSTANCE_ID, recordAuditBatch } from './audit.js';
import type { AppendLimits } from './append.js';
import type { Authenticator } from './auth.js';
import { countOf, fromProtoLease, sessionIdOf, streamIdOf, textOf, toProtoEvent, toProtoLease } from './convert.js';
import { invalid } from './errors.js';
import { CallerScope, StreamLimiter } from './scope.js';
import { SessionHandlers } from './sessions.js';
import { holdPresenceHandler, probeWriterHandler } from './presence.js';
import { followHandler, resumeHandler, watchControlHandler } from './streams.js';
import { requestCancel, serveCancelsHandler } from './task-cancels.js';
import { ServiceTasks, watchTaskHandler } from './tasks.js';
import { unary } from './unary.js';

export interface HandlerOptions extends AppendLimits {
  readonly maxStreamsPerCaller: number;
  /** The instance named in the service's own audit events. Default `tether-session-log`. */
  readonly instanceId?: string;
  /** Append latency, resumes by verdict, replay sizes, open streams. */
  readonly metrics: TetherMetrics;
  /** The longest TTL a task record may have (`--task-ttl`). Default 1 h. */
  readonly taskTtlMs?: number;
}

const MIN_TTL_MS = 1_000;
const MAX_TTL_MS = 600_000;
const DEFAULT_TASK_TTL_MS = 3_600_000;

/** The CursorService implementation over one SessionLog. */
export function createHandlers(log: SessionLog, auth: Authenticator, logger: Logger, options: HandlerOptions): { implementation: CursorServiceServer; limiter: StreamLimiter } {
  const scope = new CallerScope(log);
  const limiter = new StreamLimiter(options.maxStreamsPerCaller);
  const appender = new Appender(log, scope, options, (ms) => options.metrics.appendDuration.record(ms));
  const audit = createServiceAudit(log, options.instanceId ?? DEFAULT_INSTANCE_ID);
  const sessions = new SessionHandlers(log, scope, appender, options.metrics, audit);
  const deps = { log, auth, scope, limiter, logger, metrics: options.metrics, audit };
  const tasks = new ServiceTasks(log, { maxTtlMs: options.taskTtlMs ?? DEFAULT_TASK_TTL_MS, maxRecordBytes: options.maxPayloadBytes });
  const ttlOf = (ttlMs: number): number => countOf('ttl_ms', ttlMs, MIN_TTL_MS, MAX_TTL_MS);
  const ownerOf = (owner: string): string => {
    if (owner === '') throw invalid('owner must not be empty');
    return textOf('owner', owner, 128);
  };
  /** Checks the ids and that the session is the caller's; returns them validated. */
  const scoped = async (caller: string, sessionId: string, stream: string): Promise<[string, string]> => {
    const ids: [string, string] = [sessionIdOf(sessionId), streamIdOf(stream)];
    await scope.check(ids[0], caller);
    return ids;
  };

  const implementation: CursorServiceServer = {
    openSession: unary(auth, logger, 'OpenSession', (req, ctx) => sessions.open(req, ctx)),
    getSession: unary(auth, logger, 'GetSession', (req, ctx) => sessions.get(req, ctx)),
    touchSession: unary(auth, logger, 'TouchSession', (req, ctx) => sessions.touch(req, ctx)),
    closeSession: unary(auth, logger, 'CloseSession', (req, ctx) => sessions.close(req, ctx)),

    append: unary(auth, logger, 'Append', (req, ctx) => appender.append(ctx.caller, req, ctx.traceparent)),
    appendBatch: unary(auth, logger, 'AppendBatch', async (req, ctx) => ({
      results: await appender.appendBatch(ctx.caller, req.entries, ctx.cancelled, ctx.traceparent),
    })),
    head: unary(auth, logger, 'Head', async (req, ctx) => {
      const [sessionId, stream] = await scoped(ctx.caller, req.sessionId, req.stream);
      const event = await log.head(sessionId, stream);
      return { event: event === undefined ? undefined : toProtoEvent(event) };
    }),
    read: unary(auth, logger, 'Read', async (req, ctx) => {
      const [sessionId, stream] = await scoped(ctx.caller, req.sessionId, req.stream);
      const afterSeq = countOf('after_seq', req.afterSeq, 0, Number.MAX_SAFE_INTEGER);
      const limit = countOf('limit', req.limit, 1, 10_000);
      const afterPos = req.afterPos === undefined ? undefined : countOf('after_pos', req.afterPos, 0, Number.MAX_SAFE_INTEGER);
      const events = await log.readPage(sessionId, stream, afterSeq, limit, afterPos);
      return { events: events.map(toProtoEvent) };
    }),

    resume: resumeHandler(deps),
    follow: followHandler(deps),

    acquireLease: unary(auth, logger, 'AcquireLease', async (req, ctx) => {
      const [sessionId, stream] = await scoped(ctx.caller, req.sessionId, req.stream);
      return { lease: toProtoLease(await log.leases.acquire(sessionId, stream, ownerOf(req.owner), ttlOf(req.ttlMs))) };
    }),
    renewLease: unary(auth, logger, 'RenewLease', async (req, ctx) => {
      const lease = fromProtoLease(req.lease);
      await scope.check(lease.sessionId, ctx.caller);
      return { lease: toProtoLease(await log.leases.renew(lease, ttlOf(req.ttlMs))) };
    }),
    releaseLease: unary(auth, logger, 'ReleaseLease', async (req, ctx) => {
      const lease = fromProtoLease(req.lease);
      await scope.check(lease.sessionId, ctx.caller);
      await log.leases.release(lease);
      return {};
    }),
    getLeaseHolder: unary(auth, logger, 'GetLeaseHolder', async (req, ctx) => {
      const [sessionId, stream] = await scoped(ctx.caller, req.sessionId, req.stream);
      const holder = await log.leases.holder(sessionId, stream);
      return { lease: holder === undefined ? undefined : toProtoLease(holder) };
    }),

    holdPresence: holdPresenceHandler({ log, auth, limiter, logger, metrics: options.metrics }),
    probeWriter: unary(auth, logger, 'ProbeWriter', (req, ctx) => probeWriterHandler(log, scope, req, ctx.caller)),

    publishControl: unary(auth, logger, 'PublishControl', async (req, ctx) => {
      const message = req.message;
      if (message === undefined) throw invalid('message is required');
      const type = controlTypeSpelling(message.type);
      if (type === undefined) throw invalid(`message.type must be CLOSED, SUPERSEDED, DRAIN or RELEASED, got ${message.type}`);
      const sessionId = sessionIdOf(message.sessionId);
      await scope.check(sessionId, ctx.caller);
      const control: ControlMessage = {
        type,
        sessionId,
        ...(message.stream === undefined ? {} : { stream: streamIdOf(message.stream) }),
        ...(message.from === undefined ? {} : { from: textOf('from', message.from, 256) }),
      };
      log.publishControl(control);
      return {};
    }),
    watchControl: watchControlHandler(deps),
    watchAdmin: watchAdminHandler(deps),
    answerAdmin: unary(auth, logger, 'AnswerAdmin', async (req, ctx) => answerAdmin(log, ctx.caller, req)),

    recordAudit: unary(auth, logger, 'RecordAudit', async (req, ctx) => {
      const sessionId = sessionIdOf(req.sessionId);
      const event = auditEventOf(req, Date.now());
      await scope.check(sessionId, ctx.caller);
      // Fire and forget, like a gateway's own: a core publish the log stream captures.
      log.recordAudit(sessionId, event);
      return {};
    }),

    recordAuditBatch: unary(auth, logger, 'RecordAuditBatch', async (req, ctx) => {
      if (req.events.length > options.maxBatchEntries) throw invalid(`a batch holds at most ${options.maxBatchEntries} events, got ${req.events.length}`);
      return recordAuditBatch(log, scope, ctx.caller, req.events, Date.now());
    }),

    // Tasks (tasks.ts, task-cancels.ts): the library's TaskTable, scoped per caller.
    openTasks: unary(auth, logger, 'OpenTasks', (req) => tasks.open(req)),
    createTask: unary(auth, logger, 'CreateTask', (req, ctx) => tasks.create(ctx.caller, req)),
    getTask: unary(auth, logger, 'GetTask', (req, ctx) => tasks.get(ctx.caller, req)),
    listWorkingTasks: unary(auth, logger, 'ListWorkingTasks', (_req, ctx) => tasks.listWorking(ctx.caller)),
    compareAndSetTask: unary(auth, logger, 'CompareAndSetTask', (req, ctx) => tasks.compareAndSet(ctx.caller, req)),
    watchTask: watchTaskHandler(deps, tasks),
    serveCancels: serveCancelsHandler(deps),
    requestCancel: unary(auth, logger, 'RequestCancel', (req, ctx) => requestCancel(tasks, ctx.caller, req)),
  };
  return { implementation, limiter };
}
