import { ConfigError, helpLines, int, readSettings } from '@tether/config';
import type { FlagSpec } from '@tether/config';

/** Every flag of `tether-sdk-example`; `--help` is built from this table, so it lists exactly what the parser accepts. */
export const FLAGS = [
  { flag: 'port', env: 'PORT', help: 'port to serve MCP on (/mcp) and /healthz; 0 picks a free one', fallback: '3000' },
  { flag: 'host', env: 'TETHER_SDK_HOST', help: 'address to listen on', fallback: '127.0.0.1' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server with JetStream (the session log, registry and tasks live there)', fallback: 'nats://127.0.0.1:4222' },
  { flag: 'instance', env: 'TETHER_SDK_INSTANCE', help: 'name of this instance in log lines', fallback: '' },
  { flag: 'retry-ms', env: 'TETHER_SDK_RETRY_MS', help: 'SSE retry: hint (ms) on priming events and resume acknowledgments: how soon clients reconnect', fallback: '1000' },
  { flag: 'writer-check-ms', env: 'TETHER_SDK_WRITER_CHECK_MS', help: 'a resumed reader asks whether the stream\'s writer lives after this much silence (ms)', fallback: '500' },
  { flag: 'writer-silence-ms', env: 'TETHER_SDK_WRITER_SILENCE_MS', help: 'a writer that answers no probe this long (ms) is taken for gone', fallback: '3000' },
  { flag: 'config', env: 'TETHER_SDK_CONFIG', help: 'JSON file of settings keyed by flag name', fallback: '' },
] as const satisfies readonly FlagSpec[];

export interface ExampleConfig {
  readonly port: number;
  readonly host: string;
  readonly nats: string;
  /** '' when not given: then `<hostname>-<pid>`. */
  readonly instance: string;
  readonly retryMs: number;
  readonly writerCheckMs: number;
  readonly writerSilenceMs: number;
}

/**
 * Flags > environment > `--config` file > defaults (`@tether/config`).
 *
 * @throws ConfigError `invalid_config` naming the flag, the value and what is allowed
 */
export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, readFile: (path: string) => string): ExampleConfig {
  const settings = readSettings(argv, env, readFile, FLAGS);
  const raw = settings.raw;
  const nats = raw('nats');
  for (const url of nats.split(',')) {
    let parsed: URL | undefined;
    try {
      parsed = new URL(url.trim());
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || !['nats:', 'tls:', 'ws:', 'wss:'].includes(parsed.protocol) || parsed.hostname === '') {
      throw new ConfigError(`invalid --nats ${JSON.stringify(url)}; allowed: nats://host:port (or tls://, ws://, wss://), comma-separated`);
    }
  }
  const writerCheckMs = int('writer-check-ms', raw('writer-check-ms'), 10, 600_000);
  const writerSilenceMs = int('writer-silence-ms', raw('writer-silence-ms'), 10, 3_600_000);
  if (writerSilenceMs < writerCheckMs) throw new ConfigError(`invalid --writer-silence-ms ${writerSilenceMs}; allowed: at least --writer-check-ms (${writerCheckMs})`);
  const host = raw('host');
  if (host.trim() === '') throw new ConfigError('invalid --host ""; allowed: an address to listen on, e.g. 127.0.0.1 or 0.0.0.0');
  return {
    port: int('port', raw('port'), 0, 65_535),
    host,
    nats,
    instance: raw('instance'),
    retryMs: int('retry-ms', raw('retry-ms'), 1, 600_000),
    writerCheckMs,
    writerSilenceMs,
  };
}

export function helpText(): string {
  return [
    'Usage: tether-sdk-example [flags]',
    '',
    'An official-SDK MCP server (tools stream, ping, slow_task) that any instance of a fleet can serve:',
    'sessions and events in the Tether session log on NATS JetStream, durable tasks on JetStream.',
    'MCP at /mcp, liveness at GET /healthz. Flags, then environment, then --config, then defaults.',
    '',
    ...helpLines(FLAGS, { flagWidth: 18, envWidth: 29 }),
    `  --${'help'.padEnd(18)} ${''.padEnd(29)} this text`,
    '',
  ].join('\n');
}
