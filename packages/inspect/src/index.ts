// @tether/inspect: what an operator sees of sessions (issue 14).
// Users' symbols first: the read model, then tether-admin's actions.
export type { ChainCheck, Connection, EventMark, SessionSummary, SessionTimeline, StreamLane, WriterSpan } from './model.js';
export { openInspectAccess } from './access.js';
export type { InspectAccess, InspectAccessOptions, PartitionAccess } from './access.js';
export { findPartitionCount } from './find-partitions.js';
export { createLogReadModel } from './read-model.js';
export type { LogReadModel } from './read-model.js';
export { listSessions, summarize } from './sessions.js';
export type { SessionFilter } from './sessions.js';
export { buildTimeline, connections, readTimeline, writerSpans } from './timeline.js';
export { byStream, checkChain, checkChains } from './chains.js';
export type { RunnerState, TaskFilter, TaskList, TaskSizes, TaskStatusName, TaskSummary } from './task-model.js';
export { TASK_STATUSES } from './task-statuses.js';
export { listTasks, probeRunner, readTask, RUNNER_PROBE_TIMEOUT_MS } from './task-read.js';
export { isTaskStatusName, selectTasks, summarizeTask, taskTag } from './task-view.js';
export { resolveTag, scanSessions } from './registry.js';
export type { KnownSession } from './registry.js';
export { readSessionAudit, readSessionEvents } from './read.js';
export type { RawEvent } from './read.js';
export { ADMIN_INSTANCE, closeSessionByTag, requestDrain } from './actions.js';
export type { CloseOutcome } from './actions.js';
export { isPrincipalFilter, isSessionTag, PRINCIPAL_FILTER_ALLOWED, PRINCIPAL_FILTER_PATTERN, principalMatches, principalTagOf, sessionTag, TAG_PATTERN } from './tag.js';
export { InspectError, InspectErrorCode, isInspectError, scrub } from './errors.js';
export { natsOperator, openNatsOperator } from './operator.js';
export type { Operator } from './operator.js';
export { openGrpcOperator, parseGrpcUrl } from './grpc-operator.js';
export type { GrpcOperatorOptions } from './grpc-operator.js';
export { checkFromWire, checkToWire, summaryFromWire, summaryToWire, timelineFromWire, timelineToWire } from './operator-wire.js';
