/**
 * `tether-inspect`: the only file of the inspector with side effects. Parses
 * flags, opens the deployment's log (on NATS, or through a session-log
 * service's operator API with `--log grpc://`), serves the page and
 * stops cleanly on SIGTERM/SIGINT. Logs are JSON lines on stdout in pino's
 * shape (`level`, `time`, `msg`), without pino: the inspector needs four
 * lines, not a dependency.
 */
import { openGrpcOperator } from './grpc-operator.js';
import { openNatsOperator } from './operator.js';
import { ConfigError, inspectHelpText, parseInspectConfig } from './inspect-config.js';
import type { InspectLogger } from './inspect-server.js';
import { startInspectServer } from './inspect-server.js';

const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60, silent: Number.POSITIVE_INFINITY };

function jsonLogger(level: string): InspectLogger {
  const min = LEVELS[level] ?? 30;
  const line = (lvl: number, obj: object, msg: string): void => {
    if (lvl >= min) process.stdout.write(`${JSON.stringify({ level: lvl, time: Date.now(), name: 'tether-inspect', ...obj, msg })}\n`);
  };
  return { info: (obj, msg) => line(30, obj, msg), error: (obj, msg) => line(50, obj, msg) };
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(inspectHelpText());
    return;
  }
  const config = parseInspectConfig(argv, process.env);
  const logger = jsonLogger(config.logLevel);
  const operator =
    config.log === undefined
      ? await openNatsOperator({ servers: config.nats, ...(config.namespace === undefined ? {} : { namespace: config.namespace }), ...(config.partitions === undefined ? {} : { partitions: config.partitions }) })
      : openGrpcOperator(config.log);
  const server = await startInspectServer({ source: operator, tokens: config.tokens, host: config.host, port: config.port, logger });
  logger.info({ url: server.url, port: server.port, log: operator.describe }, 'listening');
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping');
    Promise.all([server.close(), operator.close()]).then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ error: String(err) }, 'stop failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined;
  const message = err instanceof Error ? (err instanceof ConfigError ? err.message : `${err.name}: ${err.message}`) : String(err);
  process.stderr.write(`tether-inspect: ${message}\n`);
  process.exit(err instanceof ConfigError || code === 'invalid_argument' ? 2 : 1);
});
