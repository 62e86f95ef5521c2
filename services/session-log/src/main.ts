#!/usr/bin/env node
/**
 * `tether-session-log`: the only file of the service with side effects.
 * Starts telemetry, parses flags, environment and the config file, starts
 * the gRPC server, and stops cleanly on SIGTERM/SIGINT (running calls get a
 * grace period, then are cancelled; spans and metrics are flushed).
 */
import { createRootLogger, createTetherMetrics, startTelemetry } from '@tether/telemetry';
import { ConfigError, helpText, parseConfig, printableConfig } from './config.js';
import { startSessionLogService } from './server.js';

// Telemetry first: instruments and spans created after this export.
const telemetry = await startTelemetry('tether-session-log');

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    await telemetry.shutdown();
    return;
  }
  const config = parseConfig(argv, process.env);
  if (argv.includes('--print-config')) {
    process.stdout.write(printableConfig(config));
    await telemetry.shutdown();
    return;
  }
  const logger = createRootLogger('tether-session-log', { level: config.logLevel });
  const service = await startSessionLogService({ ...config.options, logger, metrics: createTetherMetrics() });
  if (config.options.tokens.length === 0 && config.options.tls?.clientCa === undefined) {
    logger.warn('no tokens and no client certificates configured: every caller is anonymous and shares one scope');
  }
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    service.close().then(
      async () => {
        await telemetry.shutdown();
        process.exit(0);
      },
      (err: unknown) => {
        logger.error({ err }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  const message = err instanceof ConfigError ? err.message : err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  process.stderr.write(`tether-session-log: ${message}\n`);
  process.exit(err instanceof ConfigError ? 2 : 1);
});
