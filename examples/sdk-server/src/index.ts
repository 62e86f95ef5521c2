// @tether/example-sdk-server: an official-SDK MCP server that any instance of a fleet serves, on @tether/sdk.
export { buildServer, DEFAULT_TASK_TTL_MS, TASK_POLL_INTERVAL_MS } from './tools.js';
export { startSdkExample } from './server.js';
export type { SdkExample } from './server.js';
export { FLAGS, helpText, parseConfig } from './config.js';
export type { ExampleAuth, ExampleConfig } from './config.js';
export { createBearerGate, createJwtVerifier, createResourceMetadata, JwksUnavailableError } from './auth.js';
export type { BearerGateOptions, JwtVerifierOptions, ResourceMetadata } from './auth.js';
