export { findNatsServerBinary } from './find-binary.js';
export { startNatsServer, type NatsServer, type NatsServerOptions } from './nats-server.js';
export { startNatsCluster, type NatsCluster, type NatsClusterOptions } from './nats-cluster.js';
export { getFreePort, getFreePorts } from './ports.js';
export {
  isNatsServerNotFound,
  isTestingError,
  NatsServerNotFoundError,
  NatsServerStartError,
  TestingError,
  TestingErrorCodes,
  type TestingErrorCode,
} from './errors.js';
