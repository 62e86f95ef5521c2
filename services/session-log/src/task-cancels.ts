/**
 * Cancel requests between the instances running tasks (cursor.proto,
 * ServeCancels and RequestCancel): a gateway on `--log grpc://` holds no NATS
 * connection, so the service holds its cancel subject for it and relays each
 * request as a question on the same call, like HoldPresence. The answer comes
 * back on that call, so it reaches the service instance holding the NATS
 * request without a second subject (WatchAdmin needs one because AnswerAdmin
 * is a separate call that a balancer may send elsewhere).
 *
 * RequestCancel is the library's `TaskTable.requestCancel`. Serving is not
 * `TaskTable.serveCancels`: that answers from a synchronous handler, and the
 * answer here comes over the network, so this module subscribes the subject
 * `requestCancel` addresses itself and answers in the table's spelling.
 *
 * Writer ids are scoped per caller: the subject carries a digest of the
 * caller, so a caller's RequestCancel reaches only its own ServeCancels
 * calls, and no caller hears another's task ids.
 */
import type { ServerDuplexStream } from '@grpc/grpc-js';
import { CancelAnswer as ProtoCancelAnswer, cancelAnswerFromSpelling } from '@tether/cursor-proto';
import type { RequestCancelRequest, RequestCancelResponse, ServeCancelsRequest, ServeCancelsResponse } from '@tether/cursor-proto';
import { createSubjects, isTaskId, isWriterId } from '@tether/session-log';
import type { CancelAnswer, SessionLog } from '@tether/session-log';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import type { Authenticator } from './auth.js';
import { countOf } from './convert.js';
import { invalid, toGrpcStatus } from './errors.js';
import { callerTag } from './scope.js';
import type { StreamLimiter } from './scope.js';
import { taskIdOf } from './tasks.js';
import type { ServiceTasks } from './tasks.js';

/** How long a relayed request waits for the caller's answer: RequestCancel waits at most 5 s, so nobody listens after. */
const ANSWER_TIMEOUT_MS = 5_000;
const DEFAULT_REQUEST_TIMEOUT_MS = 500;
/** What `TaskTable.serveCancels` answers, and `requestCancel` reads ('accepted', anything else is not running). */
const ACCEPTED: CancelAnswer = 'accepted';
const NOT_RUNNING: CancelAnswer = 'not_running';
const WRITER_HELP = '8 to 64 characters of A-Z, a-z, 0-9, _ and -';

type Subscription = ReturnType<SessionLog['connection']['subscribe']>;
type Msg = Parameters<NonNullable<NonNullable<Parameters<SessionLog['connection']['subscribe']>[1]>['callback']>>[1];

/**
 * A caller's writer id as the table sees it: `grpc.<digest of the caller>.<writer>`.
 * Dotted, so it never equals a writer id of a gateway on NATS (one token).
 */
export function callerWriter(caller: string, writer: string): string {
  return `grpc.${callerTag(caller)}.${writer}`;
}

export interface CancelDeps {
  readonly log: SessionLog;
  readonly auth: Authenticator;
  readonly limiter: StreamLimiter;
  readonly logger: Logger;
  readonly metrics: TetherMetrics;
}

/** ServeCancels: holds the caller's writer's cancel subject for as long as the call lasts. */
export function serveCancelsHandler(deps: CancelDeps) {
  return (call: ServerDuplexStream<ServeCancelsRequest, ServeCancelsResponse>): void => {
    let caller: string;
    let release: () => void;
    try {
      caller = deps.auth.requireCaller(call.metadata, call.getAuthContext());
      release = deps.limiter.acquire(caller);
    } catch (err) {
      call.emit('error', toGrpcStatus(err));
      return;
    }
    const nc = deps.log.connection;
    const waiting = new Map<number, { readonly msg: Msg; readonly timer: NodeJS.Timeout }>();
    let nextQuestion = 1;
    let sub: Subscription | undefined;
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      release();
      deps.metrics.streamsOpen.add(-1, { 'rpc.method': 'ServeCancels' });
      sub?.unsubscribe();
      // The writer stopped serving: nothing of its runs any more (later requests get "no responders": gone).
      for (const { msg, timer } of waiting.values()) {
        clearTimeout(timer);
        msg.respond(NOT_RUNNING);
      }
      waiting.clear();
    };
    deps.metrics.streamsOpen.add(1, { 'rpc.method': 'ServeCancels' });
    call.on('cancelled', end);
    call.on('error', end);
    call.on('end', () => {
      end();
      call.end();
    });
    call.on('data', (message: ServeCancelsRequest) => {
      if (ended) return;
      if (sub === undefined) {
        if (!isWriterId(message.writer)) {
          call.emit('error', toGrpcStatus(invalid(`the first ServeCancels message must name a writer (${WRITER_HELP})`)));
          end();
          return;
        }
        const writer = message.writer;
        sub = nc.subscribe(createSubjects(deps.log.config.subjectPrefix).taskCancel(callerWriter(caller, writer)), {
          callback: (err, msg) => {
            if (err !== null || ended) return;
            const taskId = msg.string();
            if (!isTaskId(taskId)) {
              msg.respond(NOT_RUNNING);
              return;
            }
            const question = nextQuestion++;
            const timer = setTimeout(() => waiting.delete(question), ANSWER_TIMEOUT_MS);
            timer.unref();
            waiting.set(question, { msg, timer });
            call.write({ question, taskId });
          },
        });
        // Served once the server has the subscription: then say so.
        void nc.flush().then(
          () => {
            if (!ended) call.write({ question: 0, taskId: '' });
            deps.logger.debug({ writer }, 'cancels served');
          },
          () => undefined,
        );
        return;
      }
      const question = Number(message.question);
      const pending = waiting.get(question);
      if (pending === undefined) return;
      waiting.delete(question);
      clearTimeout(pending.timer);
      pending.msg.respond(message.accepted ? ACCEPTED : NOT_RUNNING);
    });
  };
}

/** RequestCancel: the table's request, to the caller's own writer. */
export async function requestCancel(tasks: ServiceTasks, caller: string, req: RequestCancelRequest): Promise<RequestCancelResponse> {
  if (!isWriterId(req.writer)) throw invalid(`writer is malformed (expected ${WRITER_HELP})`);
  const taskId = taskIdOf('task_id', req.taskId);
  const timeoutMs = req.timeoutMs === undefined || req.timeoutMs === 0 ? DEFAULT_REQUEST_TIMEOUT_MS : countOf('timeout_ms', req.timeoutMs, 10, 5_000);
  const answer = await (await tasks.table()).requestCancel(callerWriter(caller, req.writer), taskId, timeoutMs);
  return { answer: cancelAnswerFromSpelling(answer) ?? ProtoCancelAnswer.SILENT };
}
