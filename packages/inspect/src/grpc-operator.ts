/**
 * The operator over a session-log service's operator API
 * (proto/tether/operator/v1/operator.proto): for deployments whose
 * gateways run with `--log grpc://` and whose operators hold an operator
 * token, not NATS credentials. Failures come back as the same
 * `InspectError`s the NATS operator throws, from the call's ErrorDetail.
 */
import { Metadata, status } from '@grpc/grpc-js';
import type { CallOptions, ClientUnaryCall, ServiceError } from '@grpc/grpc-js';
import { readCallFailure } from '@tether/cursor-proto';
import { createOperatorClient } from '@tether/cursor-proto/operator';
import type { OperatorServiceClient } from '@tether/cursor-proto/operator';
import { InspectError, InspectErrorCode } from './errors.js';
import type { Operator } from './operator.js';
import { checkFromWire, summaryFromWire, taskFromWire, taskListFromWire, timelineFromWire } from './operator-wire.js';
import { principalMatches } from './tag.js';

export interface GrpcOperatorOptions {
  /** `grpc://host:port` or `grpcs://host:port` (TLS with the system roots, or `ca`). */
  readonly url: string;
  /** An operator token of the service (`--operator-token`). */
  readonly token: string;
  /** PEM CA of the service's certificate, for `grpcs://` with a private CA. */
  readonly ca?: string | Uint8Array;
  /** Deadline of each call. Default 10000 ms. */
  readonly timeoutMs?: number;
}

const URL_PATTERN = /^(grpcs?):\/\/([A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\]):([0-9]{1,5})\/?$/;

/** The `host:port` and TLS choice of a `grpc://` URL; `invalid_argument` naming what is wrong. */
export function parseGrpcUrl(url: string): { target: string; tls: boolean } {
  const m = URL_PATTERN.exec(url);
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || !(port >= 1 && port <= 65535)) {
    throw new InspectError(InspectErrorCode.invalidArgument, `invalid --log ${JSON.stringify(url.slice(0, 80))}; allowed: grpc://host:port or grpcs://host:port of a tether-session-log started with --operator-token`);
  }
  return { target: `${m[2]}:${port}`, tls: m[1] === 'grpcs' };
}

export function openGrpcOperator(options: GrpcOperatorOptions): Operator {
  const { target, tls } = parseGrpcUrl(options.url);
  const client = createOperatorClient({ target, token: options.token, ...(tls ? { tls: options.ca === undefined ? {} : { ca: options.ca } } : {}) });
  const timeoutMs = options.timeoutMs ?? 10_000;
  const call = <Req, Res>(method: UnaryMethod<Req, Res>, request: Req, deadlineMs = timeoutMs): Promise<Res> =>
    new Promise<Res>((resolve, reject) => {
      method.call(client, request, new Metadata(), { deadline: Date.now() + deadlineMs }, (err, response) => {
        if (err === null) resolve(response);
        else reject(toInspectError(err, target));
      });
    });
  return {
    listSessions: async (filter) => {
      const res = await call(client.listSessions, { verdict: filter.verdict, state: filter.state, route: filter.route, principal: filter.principal, limit: filter.limit ?? 0 });
      // A service older than the `principal` filter skips the field it does
      // not know and answers every principal's sessions: checked here too, so
      // another principal's session is never listed as this one's.
      const { principal } = filter;
      return res.sessions.map(summaryFromWire).filter((row) => principal === undefined || principalMatches(row.principal, principal));
    },
    readTimeline: async (tag) => {
      try {
        const res = await call(client.showSession, { tag });
        if (res.timeline === undefined) throw new InspectError(InspectErrorCode.unavailable, 'ShowSession answered without a timeline');
        return timelineFromWire(res.timeline);
      } catch (err) {
        if (err instanceof InspectError && err.code === InspectErrorCode.sessionNotFound) return undefined;
        throw err;
      }
    },
    checkChains: async (tag) => (await call(client.verifySession, { tag })).checks.map(checkFromWire),
    closeSession: async (tag) => {
      const res = await call(client.closeSession, { tag });
      return { tag: res.tag, closed: res.closed };
    },
    drainInstance: async (instance, drainTimeoutMs = 3_000) => {
      const res = await call(client.drainInstance, { instance, timeoutMs: drainTimeoutMs }, timeoutMs + drainTimeoutMs);
      return { ok: res.ok, instance: res.instance, ...(res.detail === '' ? {} : { detail: res.detail }) };
    },
    listTasks: async (filter) => {
      const res = await call(client.listTasks, { status: filter.status, principal: filter.principal, limit: filter.limit ?? 0 }).catch((err: unknown) => {
        throw tasksUnsupported(target, err);
      });
      const list = taskListFromWire(res);
      // As for sessions: a service that skipped a filter it did not know never lists another principal's tasks as these.
      const { principal, status } = filter;
      return { ...list, tasks: list.tasks.filter((t) => (principal === undefined || principalMatches(t.principal, principal)) && (status === undefined || t.status === status)) };
    },
    readTask: async (taskId) => {
      const res = await call(client.showTask, { taskId }).catch((err: unknown) => {
        throw tasksUnsupported(target, err);
      });
      if (res.task === undefined) throw new InspectError(InspectErrorCode.unavailable, 'ShowTask answered without a task');
      return taskFromWire(res.task);
    },
    // Nor partition calls: where the leaders are is a NATS operator's question.
    listPartitions: () => Promise.reject(partitionsUnsupported(target)),
    rebalancePartitions: () => Promise.reject(partitionsUnsupported(target)),
    describe: `operator API at ${target}`,
    close: async () => client.close(),
  };
}

/** A service older than the task RPCs answers UNIMPLEMENTED: said plainly (read over NATS instead); other failures pass unchanged. */
function tasksUnsupported(target: string, err: unknown): unknown {
  const unimplemented = err instanceof InspectError && (err.cause as ServiceError | undefined)?.code === status.UNIMPLEMENTED;
  if (!unimplemented) return err;
  return new InspectError(InspectErrorCode.unsupported, `the operator API at ${target} does not serve tasks (a tether-session-log older than ListTasks): upgrade it, or read them with --nats and the deployment's NATS credentials`, { cause: err });
}

function partitionsUnsupported(target: string): InspectError {
  return new InspectError(InspectErrorCode.unsupported, `the operator API at ${target} does not serve partitions (no partition RPCs in tether.operator.v1): read and rebalance them with --nats and the deployment's NATS credentials`);
}

type UnaryMethod<Req, Res> = (
  this: OperatorServiceClient,
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

const CODES = new Set<string>(Object.values(InspectErrorCode));

/** The call's ErrorDetail code when it is one of ours; otherwise by gRPC status. */
function toInspectError(err: ServiceError, target: string): InspectError {
  const failure = readCallFailure(err);
  const detailCode = failure.detail?.code;
  if (detailCode !== undefined && CODES.has(detailCode)) return new InspectError(detailCode as InspectErrorCode, failure.message, { cause: err });
  if (failure.code === status.UNAUTHENTICATED) return new InspectError(InspectErrorCode.unauthenticated, `the operator API at ${target} refused the token: ${failure.message}`, { cause: err });
  if (failure.code === status.PERMISSION_DENIED) return new InspectError(InspectErrorCode.unauthenticated, `the operator API at ${target} is off or refused: ${failure.message}`, { cause: err });
  if (failure.code === status.UNIMPLEMENTED) return new InspectError(InspectErrorCode.unavailable, `${target} has no operator API (a tether-session-log older than the operator API?): ${failure.message}`, { cause: err });
  return new InspectError(InspectErrorCode.unavailable, `operator call to ${target} failed: ${failure.message}`, { cause: err });
}
