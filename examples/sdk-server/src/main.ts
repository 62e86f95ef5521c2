#!/usr/bin/env node
/**
 * `tether-sdk-example --port 3000 --nats nats://127.0.0.1:4222`: the only
 * file with side effects. Prints one JSON line `{"msg":"listening","port":…}`
 * when ready; SIGTERM or SIGINT stops it. A bad flag or value: the problem
 * on stderr, exit 2.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '@tether/config';
import { createRootLogger } from '@tether/telemetry';
import { helpText, parseConfig } from './config.js';
import { startSdkExample } from './server.js';

const logger = createRootLogger('tether-sdk-example');

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    return;
  }
  const config = parseConfig(argv, process.env, (path) => readFileSync(path, 'utf8'));
  const example = await startSdkExample(config, logger);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    example.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err: (err as Error).message }, 'close failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  logger.info({ instance: example.instance, port: example.port, url: `${example.url}/mcp`, natsServer: example.natsServer, partitions: example.partitions, auth: config.auth.mode, pid: process.pid }, 'listening');
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`tether-sdk-example: ${err.message}\n`);
    process.exit(2);
  }
  logger.fatal({ err: (err as Error).message, code: (err as { code?: unknown }).code }, 'failed to start');
  process.exit(1);
});
