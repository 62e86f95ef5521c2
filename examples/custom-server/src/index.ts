/** An example MCP server on Tether's gRPC cursor API. Explicit exports; `main.ts` is the bin. */
export { startCustomServer } from './server.js';
export type { CustomServer, CustomServerOptions } from './server.js';
export { EventLog } from './log.js';
export type { ResumeCall } from './log.js';
export { COUNTDOWN_TOOL } from './tool.js';
