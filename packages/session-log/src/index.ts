// Users' symbols first.
export { SessionLog } from './session-log.js';
export type { CreateSessionLogOptions, ResumeAccepted, ResumeResult, StreamReader } from './session-log.js';
export type { Acceptance, Classification, Refusal } from './classify.js';
export type { Cursor, LogEvent } from './event.js';
export { START_CURSOR } from './event.js';
export { createFollowStats } from './reader.js';
export type { FollowOptions, FollowStats } from './reader.js';
export { StreamWriter } from './writer.js';
export type { AppendOptions, AppendResult } from './writer.js';
export { storedHeaderValue } from './publish.js';
export { SessionRegistry } from './registry.js';
export type { SessionRecord, SessionState } from './registry.js';
export { callerWriterId, isWriterId, newWriterId, probeWriter } from './presence.js';
export type { WriterState, WritesStream } from './presence.js';
export { LeaseTable } from './leases.js';
export type { Lease } from './leases.js';
export { identityPrincipal, principalDigest, principalTag, samePrincipal } from './principal.js';
export { resolveConfig } from './config.js';
export type { SessionLogConfig, SessionLogOptions } from './config.js';
export { desiredStreamConfig, findLayout, PARTITIONS_METADATA_KEY } from './setup.js';
export type { FoundLayout } from './setup.js';
export { logLayout } from './layout.js';
export type { LogLayout, Partition } from './layout.js';
export { assertSupportedServer, isSupportedServer, MIN_SERVER_VERSION, serverFeatures } from './server-features.js';
export type { ServerFeatures, ServerReport } from './server-features.js';
export { MAX_SESSIONS_PER_PRINCIPAL } from './principals.js';
export { AuditKind, decodeAuditEvent, encodeAuditEvent } from './audit.js';
export type { AuditEvent, AuditRecord } from './audit.js';
export { JsErrCode, jsErrorCode, SessionLogError, SessionLogErrorCode, isSessionLogError } from './errors.js';
export { absenceDoubt, LEADER_ANSWERS_STALL_MS, LeaderQuorumCheck, leadersDoubt, QUORUM_HEARD_WITHIN_MS, QUORUM_VERDICT_MS, quorumDoubt } from './leader-quorum.js';
export type { LeaderGetAnswer, Recheck } from './leader-quorum.js';
export type { SessionLogErrorFields } from './errors.js';
export {
  AdminRequestType,
  parseAdminRequest,
  ControlType,
  createSubjects,
  DEFAULT_LEASES_BUCKET,
  DEFAULT_PRINCIPALS_BUCKET,
  DEFAULT_SESSIONS_BUCKET,
  DEFAULT_STREAM_NAME,
  DEFAULT_SUBJECT_PREFIX,
  NAMESPACE_ALLOWED,
  NAMESPACE_MAX_LENGTH,
  NAMESPACE_PATTERN,
  namespaceNames,
  MAX_PARTITIONS,
  PLACEMENT_TAG_ALLOWED,
  PLACEMENT_TAG_PATTERN,
  partitionName,
  partitionOf,
} from './wire.js';
export type { AdminAnswer, AdminRequest, ControlMessage, NamespaceNames, Subjects } from './wire.js';
export { TaskTable, EXPIRED_GRACE_MS } from './tasks/task-table.js';
export type { CancelAnswer, StoredTask, TaskTableOptions } from './tasks/task-table.js';
export { decodeTask, encodeTask, expiresAt, isTaskStatus, isTerminal } from './tasks/task-record.js';
export type { JsonObject, TaskRecord, TaskStatus, UpstreamTaskRoute } from './tasks/task-record.js';
export { TaskIndexHeader, taskIndexHeaders, WorkingTaskIndex } from './tasks/working-index.js';
export type { WorkingTask } from './tasks/working-index.js';
export { isTaskId, newTaskId } from './tasks/task-ids.js';
export { TaskEvents, TaskEventWriter, TASK_EVENT_KIND, TASK_EVENT_SEQ } from './tasks/task-events.js';
export type { TaskEvent, TaskEventBounds, TaskEventsOptions } from './tasks/task-events.js';
