export { createGateway } from './gateway.js';
export type { Gateway } from './gateway.js';
export { parseConfig, helpText, printableConfig, ConfigError, FLAGS } from './config.js';
export type { GatewayConfig, Route } from './config.js';
export { createLocalLog } from './log/local-log.js';
export { openLog } from './log/open-log.js';
export type { LogPort } from './log/log-port.js';
