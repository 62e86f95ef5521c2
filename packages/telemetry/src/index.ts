export { createRootLogger, sessionTag } from './logger.js';
export type { RootLoggerOptions } from './logger.js';
export { startTelemetry } from './sdk.js';
export type { Telemetry } from './sdk.js';
export { createTetherMetrics, METRIC_NAMES } from './metrics.js';
export type { TetherMetrics } from './metrics.js';
export { contextFromTraceparent, traceparentOf, linkToTraceparent } from './trace-context.js';
