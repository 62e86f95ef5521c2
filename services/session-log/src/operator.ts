/**
 * The operator API (proto/tether/operator/v1/operator.proto): the read
 * model and the operator's actions of @tether/inspect, served over gRPC for
 * operators without NATS credentials. The service runs the same
 * `natsOperator` tether-inspect and tether-admin run against NATS, on the
 * service's own connection and names, so both ways give the same answers.
 * Authentication is the interceptor's (auth.ts): only operator tokens reach
 * these handlers. A session row's `principal_tag` is `principalTag` of its
 * registry record (summaryToWire of the read model's row): never the digest.
 */
import { Metadata, status } from '@grpc/grpc-js';
import type { handleUnaryCall, sendUnaryData, ServerUnaryCall } from '@grpc/grpc-js';
import { encodeStatusDetails, ErrorDetail } from '@tether/cursor-proto';
import type { OperatorServiceServer } from '@tether/cursor-proto/operator';
import {
  checkToWire,
  InspectError,
  InspectErrorCode,
  isInspectError,
  isPrincipalFilter,
  isTaskStatusName,
  natsOperator,
  openInspectAccess,
  PRINCIPAL_FILTER_ALLOWED,
  scrub,
  summaryToWire,
  TASK_STATUSES,
  taskListToWire,
  taskToWire,
  timelineToWire,
} from '@tether/inspect';
import type { Operator } from '@tether/inspect';
import type { SessionLog } from '@tether/session-log';
import type { Logger } from 'pino';
import { UndecodableRequest } from './decode.js';

/** Every operator error code's gRPC status (the ERRORS table of operator.proto). */
const STATUS_OF: Readonly<Record<string, status>> = {
  invalid_argument: status.INVALID_ARGUMENT,
  session_not_found: status.NOT_FOUND,
  instance_not_found: status.NOT_FOUND,
  task_not_found: status.NOT_FOUND,
  log_not_found: status.FAILED_PRECONDITION,
  unavailable: status.UNAVAILABLE,
  unauthenticated: status.UNAUTHENTICATED,
  operator_api_off: status.PERMISSION_DENIED,
};

const MAX_LIMIT = 10_000;
const MAX_DRAIN_TIMEOUT_MS = 60_000;
const TEXT = /^[A-Za-z0-9_/.:-]{1,128}$/;

/**
 * The operator over the service's log: its connection (not closed by the
 * operator), its names and its partition count. The namespace goes too:
 * with more than one partition the read model names them as the library
 * does, and a name equal to the namespace's own is numbered before the
 * namespace (`TETHER_LOG-3_staging`). The count is the one this service
 * writes with (checked against the log at startup), so the read model never
 * has to infer it.
 */
export async function serviceOperator(log: SessionLog): Promise<Operator> {
  const { namespace, streamName, subjectPrefix, sessionsBucket, partitions, requestTimeoutMs } = log.config;
  return natsOperator(await openInspectAccess({ nc: log.connection, namespace, streamName, subjectPrefix, sessionsBucket, partitions, timeoutMs: requestTimeoutMs }));
}

export function createOperatorHandlers(operator: Operator, logger: Logger): OperatorServiceServer {
  return {
    listSessions: unary(logger, 'ListSessions', async (req) => {
      const limit = req.limit === 0 ? undefined : req.limit;
      if (limit !== undefined && limit > MAX_LIMIT) throw invalid(`limit ${limit} is over ${MAX_LIMIT}`);
      for (const [name, value] of [['verdict', req.verdict], ['state', req.state], ['route', req.route]] as const) {
        if (value !== undefined && !TEXT.test(value)) throw invalid(`invalid ${name} filter; allowed: 1 to 128 of A-Z a-z 0-9 _ / . : -`);
      }
      // Not echoed, nor logged: a token sent here by mistake goes no further.
      if (req.principal !== undefined && !isPrincipalFilter(req.principal)) throw invalid(`invalid principal filter; allowed: ${PRINCIPAL_FILTER_ALLOWED}`);
      const sessions = await operator.listSessions({
        ...(req.verdict === undefined ? {} : { verdict: req.verdict }),
        ...(req.state === undefined ? {} : { state: req.state }),
        ...(req.route === undefined ? {} : { route: req.route }),
        ...(req.principal === undefined ? {} : { principal: req.principal }),
        ...(limit === undefined ? {} : { limit }),
      });
      return { sessions: sessions.map(summaryToWire) };
    }),
    showSession: unary(logger, 'ShowSession', async (req) => {
      const timeline = await operator.readTimeline(req.tag);
      if (timeline === undefined) throw new InspectError(InspectErrorCode.sessionNotFound, 'no session of this deployment has that tag');
      return { timeline: timelineToWire(timeline) };
    }),
    verifySession: unary(logger, 'VerifySession', async (req) => ({ checks: (await operator.checkChains(req.tag)).map(checkToWire) })),
    closeSession: unary(logger, 'CloseSession', async (req) => operator.closeSession(req.tag)),
    drainInstance: unary(logger, 'DrainInstance', async (req) => {
      if (req.timeoutMs > MAX_DRAIN_TIMEOUT_MS) throw invalid(`timeout_ms ${req.timeoutMs} is over ${MAX_DRAIN_TIMEOUT_MS}`);
      const answer = await operator.drainInstance(req.instance, req.timeoutMs === 0 ? undefined : req.timeoutMs);
      return { ok: answer.ok, instance: answer.instance, detail: answer.detail ?? '' };
    }),
    // The read model's task views (task-view.ts of @tether/inspect): the rows tether-admin shows over NATS, payloads never read out.
    listTasks: unary(logger, 'ListTasks', async (req) => {
      const limit = req.limit === 0 ? undefined : req.limit;
      if (limit !== undefined && limit > MAX_LIMIT) throw invalid(`limit ${limit} is over ${MAX_LIMIT}`);
      if (req.status !== undefined && !isTaskStatusName(req.status)) throw invalid(`invalid status filter; allowed: ${TASK_STATUSES.join(', ')}`);
      if (req.principal !== undefined && !isPrincipalFilter(req.principal)) throw invalid(`invalid principal filter; allowed: ${PRINCIPAL_FILTER_ALLOWED}`);
      const list = await operator.listTasks({
        ...(req.status === undefined ? {} : { status: req.status }),
        ...(req.principal === undefined ? {} : { principal: req.principal }),
        ...(limit === undefined ? {} : { limit }),
      });
      return taskListToWire(list);
    }),
    // The id is a bearer handle: never logged or echoed (readTask's messages name none).
    showTask: unary(logger, 'ShowTask', async (req) => ({ task: taskToWire(await operator.readTask(req.taskId)) })),
  };
}

function invalid(message: string): InspectError {
  return new InspectError(InspectErrorCode.invalidArgument, message);
}

/**
 * A handler body to grpc-js: an InspectError becomes its status with an
 * ErrorDetail `code` (the message scrubbed of session ids: it can name a
 * subject); anything else is logged and answered `internal`.
 */
function unary<Req, Res>(logger: Logger, rpc: string, body: (req: Req) => Promise<Res>): handleUnaryCall<Req, Res> {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
    const request: unknown = call.request;
    const run = request instanceof UndecodableRequest ? Promise.reject(invalid(`${rpc} request does not decode as its protobuf message: ${request.reason.slice(0, 200)}`)) : body(call.request);
    run.then(
      (response) => callback(null, response),
      (err: unknown) => {
        const known = isInspectError(err);
        if (!known) logger.error({ rpc, error: scrub(String((err as Error)?.message ?? err)) }, 'operator call failed');
        else if (err.code === InspectErrorCode.unavailable) logger.warn({ rpc, code: err.code, error: scrub(err.message) }, 'operator call: log unavailable');
        const code = known ? (STATUS_OF[err.code] ?? status.INTERNAL) : status.INTERNAL;
        const message = known ? scrub(err.message) : 'internal error';
        const metadata = new Metadata();
        metadata.set('grpc-status-details-bin', encodeStatusDetails(code, message, ErrorDetail.fromPartial({ code: known ? err.code : 'internal' })));
        callback({ code, details: message, metadata });
      },
    );
  };
}
