/**
 * The zoo of broken MCP servers (DESIGN §1), a correct SDK server, a
 * round-robin balancer, a stream cutter, and the acceptance helpers the guard
 * and probe tests share. Test code only: nothing here ships.
 */
export { MiniMcpServer, Backend, COUNT_TOOL } from './mini-mcp.js';
export {
  GapAfterEvictionServer,
  LazyForkServer,
  ReplayAfterRestartServer,
  SeamGapServer,
  SilentFallbackServer,
  TetherLikeServer,
  startLazyForkPair,
} from './broken.js';
export type { TetherLikeMode } from './broken.js';
export { startSdkServer } from './sdk.js';
export type { SdkServerOptions, ZooHandle } from './sdk.js';
export { startRoundRobin } from './round-robin.js';
export type { RoundRobin } from './round-robin.js';
export { createCutter } from './cut.js';
export type { Cutter } from './cut.js';
export { acceptanceProblems, checkResumeAcrossInstances, runGuardedResume } from './acceptance.js';
export type { GuardedRun, GuardedRunOptions } from './acceptance.js';
