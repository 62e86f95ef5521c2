export { findNatsServerBinary } from './find-binary.js';
export { startNatsServer, type NatsServer, type NatsServerOptions } from './nats-server.js';
export { MIN_NATS_SERVER_VERSION, natsServerVersion, natsVersionAtLeast } from './version.js';
export { startNatsCluster, type NatsCluster, type NatsNodes, type NatsClusterOptions } from './nats-cluster.js';
export { startRouteProxy, type RouteProxy } from './route-proxy.js';
export { everyLeaderAnswer, moveStreamLeader, readWhileCutOffLeaderLeads, streamLeader } from './stream-leader.js';
export { getFreePort, getFreePorts } from './ports.js';
export {
  startRoundRobinProxy,
  type RoundRobinProxy,
  type RoundRobinProxyOptions,
  type RoutedRequest,
} from './round-robin-proxy.js';
export {
  startServiceProcess,
  type ExitStatus,
  type ReadyLineMatcher,
  type ServiceProcess,
  type ServiceProcessOptions,
} from './service-process.js';
export {
  connectSdkClient,
  startMcpUpstream,
  UpstreamTools,
  type McpUpstream,
  type McpUpstreamOptions,
  type SdkClient,
  type SdkClientOptions,
  type UpstreamRequest,
} from './mcp-upstream.js';
export {
  OAuthRequestError,
  startAuthorizationServer,
  TEST_REDIRECT_URI,
  type AuthorizationServer,
  type AuthorizationServerOptions,
  type ClientAuthMethod,
  type TokenResponse,
} from './authorization-server.js';
export { ModernTools, startModernUpstream, type ModernUpstream, type ModernUpstreamOptions } from './modern-upstream.js';
export { startTaskUpstream, TaskTools, type TaskUpstream, type TaskUpstreamOptions } from './task-upstream.js';
export { OwnedTaskTools, startOwnedTasksUpstream, type OwnedTasksUpstream, type OwnedTasksUpstreamOptions } from './owned-tasks-upstream.js';
export {
  isNatsServerNotFound,
  isNatsServerTooOld,
  isTestingError,
  NatsServerNotFoundError,
  NatsServerStartError,
  NatsServerTooOldError,
  ServiceProcessStartError,
  TestingError,
  TestingErrorCodes,
  type TestingErrorCode,
} from './errors.js';
