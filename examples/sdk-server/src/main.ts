#!/usr/bin/env node
/**
 * `tether-sdk-example --port 3000 --nats nats://127.0.0.1:4222`: the only
 * file with side effects. Prints one JSON line `{"msg":"listening","port":…}`
 * when ready; SIGTERM or SIGINT stops it. A bad flag or value: the problem
 * on stderr, exit 2.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '@tether/config';
import { helpText, parseConfig } from './config.js';

let logger: ReturnType<(typeof import('@tether/telemetry'))['createRootLogger']> | undefined;

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText());
    return;
  }
  const config = parseConfig(argv, process.env, (path) => readFileSync(path, 'utf8'));
  // Loaded once the command line is accepted: --help and a refused flag answer
  // without loading the SDK, the server and OpenTelemetry (about 0.8 s of CPU).
  const [{ createRootLogger }, { startSdkExample }] = await Promise.all([import('@tether/telemetry'), import('./server.js')]);
  const log = createRootLogger('tether-sdk-example');
  logger = log;
  const example = await startSdkExample(config, log);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    example.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err: (err as Error).message }, 'close failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  log.info({ instance: example.instance, port: example.port, url: `${example.url}/mcp`, natsServer: example.natsServer, partitions: example.partitions, auth: config.auth.mode, pid: process.pid }, 'listening');
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    process.stderr.write(`tether-sdk-example: ${err.message}\n`);
    process.exit(2);
  }
  const fields = { err: (err as Error).message, code: (err as { code?: unknown }).code };
  if (logger !== undefined) logger.fatal(fields, 'failed to start');
  else process.stderr.write(`${JSON.stringify({ level: 60, name: 'tether-sdk-example', ...fields, msg: 'failed to start' })}\n`);
  process.exit(1);
});
