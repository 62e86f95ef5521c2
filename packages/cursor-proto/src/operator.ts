/**
 * @tether/cursor-proto/operator: the operator API
 * (proto/tether/operator/v1/operator.proto), what tether-inspect and
 * tether-admin call on a session-log service when they hold no NATS
 * credentials. Its own entry because its messages share names with the
 * cursor API's (`CloseSessionRequest`): each package keeps its own.
 */
import { clientArguments } from './client.js';
import type { CursorClientOptions } from './client.js';
import { OperatorServiceClient } from './gen/tether/operator/v1/operator.js';

export { OperatorServiceClient, OperatorServiceService } from './gen/tether/operator/v1/operator.js';
export type { OperatorServiceServer } from './gen/tether/operator/v1/operator.js';
export {
  ChainCheck,
  ChainProblem,
  CloseSessionRequest,
  CloseSessionResponse,
  Connection,
  ConnectionCursor,
  DrainInstanceRequest,
  DrainInstanceResponse,
  EventMark,
  ListSessionsRequest,
  ListSessionsResponse,
  ListTasksRequest,
  ListTasksResponse,
  SessionSummary,
  SessionTimeline,
  ShowSessionRequest,
  ShowSessionResponse,
  ShowTaskRequest,
  ShowTaskResponse,
  StreamLane,
  TaskSizes,
  TaskSummary,
  VerifySessionRequest,
  VerifySessionResponse,
  WriterSpan,
} from './gen/tether/operator/v1/operator.js';
export { protobufPackage } from './gen/tether/operator/v1/operator.js';

/**
 * The operator client, connected and authenticating with an operator token
 * (`token`: the service's `--operator-token`), on the same channel
 * defaults as `createCursorClient`.
 */
export function createOperatorClient(options: CursorClientOptions): OperatorServiceClient {
  return new OperatorServiceClient(...clientArguments(options));
}
