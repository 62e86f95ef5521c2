/**
 * @tether/session-log-service: the gRPC server of the cursor API. Explicit
 * named exports only; users' symbols first. `main.ts` (the bin) is the only
 * module with side effects.
 */
export { startSessionLogService } from './server.js';
export type { ServiceTls, SessionLogService, SessionLogServiceOptions } from './server.js';
export { FLAGS, helpText, parseConfig, printableConfig, ConfigError } from './config.js';
export type { ServiceConfig } from './config.js';
export { Authenticator, parseTokens } from './auth.js';
export type { TokenEntry } from './auth.js';
export { CursorServiceError, GRPC_STATUS_OF_CODE, GRPC_STATUS_OF_VERDICT, ServiceErrorCode, TaskErrorCode, refusalStatus, toGrpcStatus } from './errors.js';
export type { GrpcFailure } from './errors.js';
export { CALLER_META_KEY, RESERVED_META_PREFIX } from './scope.js';
