import type { ServerDuplexStream } from '@grpc/grpc-js';
import { WriterState as ProtoWriterState } from '@tether/cursor-proto';
import type { HoldPresenceRequest, HoldPresenceResponse, ProbeWriterRequest, ProbeWriterResponse } from '@tether/cursor-proto';
import { callerWriterId, isWriterId } from '@tether/session-log';
import type { SessionLog, WriterState } from '@tether/session-log';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import type { Authenticator } from './auth.js';
import { countOf, sessionIdOf, streamIdOf } from './convert.js';
import { invalid, toGrpcStatus } from './errors.js';
import type { CallerScope, StreamLimiter } from './scope.js';

/** How long a question waits for the caller's answer; past it the prober hears silence. */
const ANSWER_TIMEOUT_MS = 2_000;
/** Time a prober waits for any answer, unless it says otherwise (10 to 5000 ms). */
const PROBE_TIMEOUT_MS = 500;

const STATES: Record<WriterState, ProtoWriterState> = {
  writing: ProtoWriterState.WRITING,
  not_writing: ProtoWriterState.NOT_WRITING,
  gone: ProtoWriterState.GONE,
  silent: ProtoWriterState.SILENT,
};

export interface PresenceDeps {
  readonly log: SessionLog;
  readonly auth: Authenticator;
  readonly limiter: StreamLimiter;
  readonly logger: Logger;
  readonly metrics: TetherMetrics;
}

/**
 * HoldPresence: the service holds a caller's writer presence on NATS for as
 * long as the call lasts, and relays each probe of one stream to the
 * caller as a question. A gateway in gRPC mode (no NATS credentials of its
 * own) is thereby exactly as probe-able as one on NATS: its HTTP/2
 * connection dies with it, the call ends, the subscription goes, and
 * probes get "no responders".
 *
 * Writer ids are the caller's own names, like ServeCancels' (task-cancels.ts):
 * the presence held is `callerWriterId(caller, writer)`, which ProbeWriter
 * asks for the same caller only. Another caller holding the same id holds
 * another presence, so it can neither answer "writing" for a victim's
 * writer (keeping its dead streams from being taken over) nor hear its
 * sessions' ids in the questions.
 */
export function holdPresenceHandler(deps: PresenceDeps) {
  return (call: ServerDuplexStream<HoldPresenceRequest, HoldPresenceResponse>): void => {
    let caller: string;
    let release: (() => void) | undefined;
    try {
      caller = deps.auth.requireCaller(call.metadata, call.getAuthContext());
      release = deps.limiter.acquire(caller);
    } catch (err) {
      call.emit('error', toGrpcStatus(err));
      return;
    }
    const waiting = new Map<number, (writing: boolean) => void>();
    let nextQuestion = 1;
    let held: { close(): Promise<void> } | undefined;
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      release?.();
      deps.metrics.streamsOpen.add(-1, { 'rpc.method': 'HoldPresence' });
      for (const answer of waiting.values()) answer(false);
      waiting.clear();
      void held?.close();
    };
    deps.metrics.streamsOpen.add(1, { 'rpc.method': 'HoldPresence' });
    call.on('cancelled', end);
    call.on('error', end);
    call.on('end', () => {
      end();
      call.end();
    });
    call.on('data', (message: HoldPresenceRequest) => {
      if (held === undefined) {
        if (!isWriterId(message.writer)) {
          call.emit('error', toGrpcStatus(invalid('the first HoldPresence message must name a writer (8 to 64 characters of A-Z, a-z, 0-9, _ and -)')));
          end();
          return;
        }
        held = deps.log.holdPresence(callerWriterId(caller, message.writer), (sessionId, stream) => {
          if (ended) return false;
          const question = nextQuestion++;
          return new Promise<boolean>((resolve, reject) => {
            const timer = setTimeout(() => {
              waiting.delete(question);
              reject(new Error('no answer'));
            }, ANSWER_TIMEOUT_MS);
            timer.unref();
            waiting.set(question, (writing) => {
              clearTimeout(timer);
              waiting.delete(question);
              resolve(writing);
            });
            call.write({ question, sessionId, stream });
          });
        });
        // Held once the server has the subscription: then say so.
        void deps.log.connection.flush().then(
          () => {
            if (!ended) call.write({ question: 0, sessionId: '', stream: '' });
          },
          () => undefined,
        );
        return;
      }
      waiting.get(Number(message.question))?.(message.writing);
    });
  };
}

/**
 * ProbeWriter: the caller's own writer (as HoldPresence holds it), and a
 * stream's writer asked within the caller's own session. Another caller's
 * writer of the same id is GONE to it.
 */
export async function probeWriterHandler(log: SessionLog, scope: CallerScope, req: ProbeWriterRequest, caller: string): Promise<ProbeWriterResponse> {
  if (!isWriterId(req.writer)) throw invalid('writer is malformed (expected 8 to 64 characters of A-Z, a-z, 0-9, _ and -)');
  const writer = callerWriterId(caller, req.writer);
  const hasSession = req.sessionId !== undefined && req.sessionId !== '';
  const hasStream = req.stream !== undefined && req.stream !== '';
  if (hasSession !== hasStream) throw invalid('session_id and stream go together');
  const timeoutMs = req.timeoutMs === undefined || req.timeoutMs === 0 ? PROBE_TIMEOUT_MS : countOf('timeout_ms', req.timeoutMs, 10, 5_000);
  if (!hasSession) return { state: STATES[await log.probeWriter(writer, timeoutMs)] };
  const sessionId = sessionIdOf(req.sessionId!);
  const stream = streamIdOf(req.stream!);
  await scope.check(sessionId, caller);
  return { state: STATES[await log.probeWriter(writer, timeoutMs, sessionId, stream)] };
}
