/**
 * @tether/resume-guard: a fetch wrapper that makes any fetch-based MCP client
 * (the official SDK's `StreamableHTTPClientTransport` included) refuse a
 * resumed stream that replays, skips, forks or loses its ids, before the
 * first resumed event reaches the client (DESIGN §1).
 *
 * Explicit named exports only. Users' symbols first.
 */

// The guard.
export { createResumeGuard } from './guard.js';
export type { FetchLike, ReinitializeEvent, ResumeGuard, ResumeGuardOptions } from './guard.js';

// Errors.
export {
  ResumeGuardError,
  ResumeGuardErrorCode,
  ResumeViolationCode,
  ResumeViolationError,
  isResumeViolation,
} from './errors.js';
export type { ResumeViolationFields, ViolationPosition } from './errors.js';

// The structural checks, for clients that are not fetch-based and for probes.
export { StreamCheck, StreamHistory, DEFAULT_MAX_TRACKED_IDS } from './check.js';
export type { StreamCheckOptions, StreamFinding } from './check.js';
export { shapeOf, successorOf } from './ids.js';
export type { IdKind, IdShape } from './ids.js';

// Wire constants.
export { RESUME_VIOLATION_RPC_CODE } from './wire.js';
