/**
 * tether-gateway: the only file with side effects. Parses flags and env,
 * connects the log, serves, and drains on SIGTERM/SIGINT.
 */
import { createRootLogger, createTetherMetrics, startTelemetry } from '@tether/telemetry';
import { ConfigError, helpText, ignoredWithGrpcLog, parseConfig, printableConfig } from './config.js';
import { createGateway } from './gateway.js';
import { openLog } from './log/open-log.js';

// Telemetry first: instruments and spans created after this export.
const telemetry = await startTelemetry('tether-gateway');
const logger = createRootLogger('tether-gateway');

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    return;
  }
  const config = parseConfig(argv, process.env);
  if (argv.includes('--print-config')) {
    process.stdout.write(printableConfig(config));
    return;
  }
  const ignored = ignoredWithGrpcLog(config);
  if (ignored.length > 0) logger.warn({ flags: ignored }, "log layout flags ignored with --log grpc://: the session-log service's own settings lay out the log");
  const log = await openLog(config, logger.child({ instance: config.instanceId, component: 'log' }));
  const gateway = createGateway(config, log, logger.child({ instance: config.instanceId }), createTetherMetrics());
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    gateway.drain().then(
      async () => {
        await telemetry.shutdown();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err: (err as Error).message }, 'drain failed');
        process.exit(1);
      },
    );
  };
  // A drain asked by tether-admin (`drain <instance>`) ends the process as SIGTERM's does.
  void gateway.drained.then(async () => {
    if (stopping) return;
    await telemetry.shutdown();
    process.exit(0);
  });
  // Handlers first: a SIGTERM right after the ready line must drain, not kill.
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  const port = await gateway.listen();
  const server = log.server();
  const nats = server === undefined ? {} : { natsServer: server.version };
  const partitions = log.partitions === undefined ? {} : { partitions: log.partitions };
  logger.info({ instance: config.instanceId, host: config.host, port, log: log.describe, ...partitions, ...nats, routes: config.routes.map((r) => r.path) }, 'listening');
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`tether-gateway: ${err.message}\n`);
    process.exit(2);
  }
  logger.fatal({ err: (err as Error).message, code: (err as { code?: string }).code }, 'failed to start');
  process.exit(1);
});
