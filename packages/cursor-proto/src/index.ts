/**
 * @tether/cursor-proto: the gRPC cursor API for TypeScript. Generated code
 * (ts-proto, `src/gen`, never edited by hand) plus thin helpers. Explicit
 * named exports only; users' symbols first.
 */

// The client and how to connect it.
export { createCursorClient, bearerInterceptor } from './client.js';
export type { CursorClientOptions, CursorClientTls } from './client.js';
export { callUnary } from './call.js';
export type { UnaryCallOptions, UnaryMethod } from './call.js';
export { CursorServiceClient, CursorServiceService } from './gen/tether/cursor/v1/cursor.js';
export type { CursorServiceServer } from './gen/tether/cursor/v1/cursor.js';

// Messages (each is a type and its codec).
export {
  AcquireLeaseRequest,
  AcquireLeaseResponse,
  AnswerAdminRequest,
  AnswerAdminResponse,
  AppendBatchRequest,
  AppendBatchResponse,
  AppendBatchResult,
  AppendRequest,
  AppendResponse,
  AuditCursor,
  CloseSessionRequest,
  CloseSessionResponse,
  CompareAndSetTaskRequest,
  CompareAndSetTaskResponse,
  ControlMessage,
  CreateTaskRequest,
  CreateTaskResponse,
  ErrorDetail,
  Event,
  FollowRequest,
  FollowResponse,
  GetLeaseHolderRequest,
  GetLeaseHolderResponse,
  GetSessionRequest,
  GetSessionResponse,
  GetTaskRequest,
  GetTaskResponse,
  ListWorkingTasksRequest,
  ListWorkingTasksResponse,
  WorkingTask,
  HeadRequest,
  HeadResponse,
  HoldPresenceRequest,
  HoldPresenceResponse,
  Lease,
  LogPositions,
  OpenSessionRequest,
  OpenSessionResponse,
  OpenTasksRequest,
  OpenTasksResponse,
  ProbeWriterRequest,
  ProbeWriterResponse,
  PublishControlRequest,
  PublishControlResponse,
  ReadRequest,
  ReadResponse,
  RecordAuditBatchRequest,
  RecordAuditBatchResponse,
  RecordAuditRequest,
  RecordAuditResponse,
  RefusedAuditEvent,
  ReleaseLeaseRequest,
  ReleaseLeaseResponse,
  RenewLeaseRequest,
  RenewLeaseResponse,
  RequestCancelRequest,
  RequestCancelResponse,
  ResumeAck,
  ResumeRequest,
  ResumeResponse,
  ServeCancelsRequest,
  ServeCancelsResponse,
  Session,
  StoredTask,
  TouchSessionRequest,
  TouchSessionResponse,
  WatchAdminRequest,
  WatchAdminResponse,
  WatchControlRequest,
  WatchControlResponse,
  WatchTaskRequest,
  WatchTaskResponse,
} from './gen/tether/cursor/v1/cursor.js';
export { Status as RpcStatus } from './gen/google/rpc/status.js';

// Enums (`as const` objects) and their wire spellings.
export { AdminRequestType, CancelAnswer, ControlType, EndReason, EventKind, ResumeVerdict, SessionState, WriterState } from './gen/tether/cursor/v1/cursor.js';
export {
  cancelAnswerFromSpelling,
  cancelAnswerSpelling,
  controlTypeFromSpelling,
  controlTypeSpelling,
  endReasonFromSpelling,
  endReasonSpelling,
  eventKindFromSpelling,
  eventKindSpelling,
  resumeVerdictFromSpelling,
  resumeVerdictSpelling,
  sessionStateFromSpelling,
  sessionStateSpelling,
} from './spelling.js';
export type {
  CancelAnswerSpelling,
  ControlTypeSpelling,
  EndReasonSpelling,
  EventKindSpelling,
  ResumeVerdictSpelling,
  SessionStateSpelling,
} from './spelling.js';

// Error details (google.rpc.Status in `grpc-status-details-bin`).
export { encodeStatusDetails, errorDetailOf, ERROR_DETAIL_TYPE_URL, readCallFailure, STATUS_DETAILS_KEY, statusOf } from './details.js';
export type { CallFailure } from './details.js';

// For server reflection.
export { descriptorSetBase64 } from './gen/descriptor-set.js';
export { protobufPackage } from './gen/tether/cursor/v1/cursor.js';
