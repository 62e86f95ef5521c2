import { readFileSync } from 'node:fs';
import type { SessionLogServiceOptions } from './server.js';

interface FlagSpec {
  readonly flag: string;
  readonly env: string;
  readonly help: string;
  readonly fallback: string;
  readonly repeat?: boolean;
}

/** Every flag, its environment twin and default: the one source for parsing and `--help`. */
export const FLAGS = [
  { flag: 'host', env: 'TETHER_GRPC_HOST', help: 'address to listen on (0.0.0.0 in a container)', fallback: '127.0.0.1' },
  { flag: 'port', env: 'TETHER_GRPC_PORT', help: 'port to listen on (0 = any free port)', fallback: '50051' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server URL(s), comma separated', fallback: 'nats://127.0.0.1:4222' },
  { flag: 'token', env: 'TETHER_GRPC_TOKENS', help: 'accepted bearer token, name:secret or secret (repeat, or comma separate)', fallback: '', repeat: true },
  { flag: 'token-file', env: 'TETHER_GRPC_TOKEN_FILE', help: 'file with one token per line (keeps secrets out of ps)', fallback: '' },
  { flag: 'tls-cert', env: 'TETHER_GRPC_TLS_CERT', help: 'PEM certificate chain file: serve TLS', fallback: '' },
  { flag: 'tls-key', env: 'TETHER_GRPC_TLS_KEY', help: 'PEM private key file of --tls-cert', fallback: '' },
  { flag: 'tls-client-ca', env: 'TETHER_GRPC_TLS_CLIENT_CA', help: 'PEM CA file: require client certificates it signed (mTLS)', fallback: '' },
  { flag: 'max-payload-bytes', env: 'TETHER_MAX_PAYLOAD_BYTES', help: 'largest event payload accepted', fallback: '1044480' },
  { flag: 'max-batch-entries', env: 'TETHER_MAX_BATCH_ENTRIES', help: 'most entries in one AppendBatch', fallback: '1000' },
  { flag: 'max-message-bytes', env: 'TETHER_GRPC_MAX_MESSAGE_BYTES', help: 'largest request message (bounds a batch)', fallback: '16777216' },
  { flag: 'max-streams-per-caller', env: 'TETHER_MAX_STREAMS_PER_CALLER', help: 'Resume/Follow/WatchControl streams one caller may hold', fallback: '1000' },
  { flag: 'log-stream', env: 'TETHER_LOG_STREAM', help: 'JetStream stream name of the log', fallback: 'TETHER_LOG' },
  { flag: 'log-subject-prefix', env: 'TETHER_LOG_SUBJECT_PREFIX', help: 'first subject token(s) of the log', fallback: 'tether' },
  { flag: 'log-max-age', env: 'TETHER_LOG_MAX_AGE', help: 'retention window of events (ms, or 30s/15m/24h)', fallback: '24h' },
  { flag: 'log-max-msgs-per-stream', env: 'TETHER_LOG_MAX_MSGS_PER_STREAM', help: 'cap on events kept per session stream (-1 = none)', fallback: '100000' },
  { flag: 'log-replicas', env: 'TETHER_LOG_REPLICAS', help: 'replicas of the log stream and buckets', fallback: '1' },
  { flag: 'session-idle', env: 'TETHER_SESSION_IDLE', help: 'idle timeout of a session (ms, or 30s/15m/24h)', fallback: '1h' },
  { flag: 'log-level', env: 'TETHER_LOG_LEVEL', help: 'pino level: trace, debug, info, warn, error', fallback: 'info' },
] as const satisfies readonly FlagSpec[];

type FlagName = (typeof FLAGS)[number]['flag'];

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'invalid_config';
}

/** What `main` needs: the service options (without a logger) and the log level. */
export interface ServiceConfig {
  readonly options: Omit<SessionLogServiceOptions, 'logger'>;
  readonly logLevel: string;
}

export function helpText(): string {
  const lines = [
    'Usage: tether-session-log [flags]',
    '',
    'Serves the Tether cursor API (gRPC, proto/tether/cursor/v1/cursor.proto) over the',
    'session log on NATS JetStream, with gRPC health and server reflection.',
    'Every flag has an environment twin; flags win over the environment.',
    '',
  ];
  for (const f of FLAGS) {
    const fallback = f.fallback === '' ? '' : ` (default ${f.fallback})`;
    lines.push(`  --${f.flag.padEnd(24)} ${f.env.padEnd(31)} ${f.help}${fallback}`);
  }
  lines.push('  --help', '', 'Example: tether-session-log --port 50051 --nats nats://127.0.0.1:4222 --token-file /run/secrets/tokens', '');
  return lines.join('\n');
}

/** Parses argv and env into a validated config; a bad value names the flag, the value and what is allowed. */
export function parseConfig(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): ServiceConfig {
  const given = new Map<FlagName, string[]>();
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (!arg.startsWith('--')) throw new ConfigError(`unexpected argument ${JSON.stringify(arg)}; flags look like --name value (see --help)`);
    const eq = arg.indexOf('=');
    const name = (eq === -1 ? arg.slice(2) : arg.slice(2, eq)) as FlagName;
    if (!FLAGS.some((f) => f.flag === name)) throw new ConfigError(`unknown flag --${name} (see --help)`);
    const value = eq === -1 ? argv[i + 1] : arg.slice(eq + 1);
    if (eq === -1) i += 1;
    if (value === undefined) throw new ConfigError(`flag --${name} needs a value`);
    given.set(name, [...(given.get(name) ?? []), value]);
  }
  const raw = (name: FlagName): string => {
    const spec = FLAGS.find((f) => f.flag === name) as FlagSpec;
    return given.get(name)?.join(',') ?? env[spec.env] ?? spec.fallback;
  };

  const tokens = list(raw('token'));
  const tokenFile = raw('token-file');
  if (tokenFile !== '') tokens.push(...readText('token-file', tokenFile).split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')));
  const cert = raw('tls-cert');
  const key = raw('tls-key');
  const clientCa = raw('tls-client-ca');
  if ((cert === '') !== (key === '')) throw new ConfigError('--tls-cert and --tls-key go together');
  if (clientCa !== '' && cert === '') throw new ConfigError('--tls-client-ca (mTLS) needs --tls-cert and --tls-key');
  const tls =
    cert === ''
      ? undefined
      : { cert: readText('tls-cert', cert), key: readText('tls-key', key), ...(clientCa === '' ? {} : { clientCa: readText('tls-client-ca', clientCa) }) };
  const logLevel = raw('log-level');
  if (!['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'].includes(logLevel)) throw new ConfigError(`invalid --log-level ${JSON.stringify(logLevel)}; allowed: trace, debug, info, warn, error`);
  return {
    logLevel,
    options: {
      host: raw('host'),
      port: int('port', raw('port'), 0, 65535),
      nats: list(raw('nats')),
      tokens,
      ...(tls === undefined ? {} : { tls }),
      maxPayloadBytes: int('max-payload-bytes', raw('max-payload-bytes'), 1, 64 * 1024 * 1024),
      maxBatchEntries: int('max-batch-entries', raw('max-batch-entries'), 1, 100_000),
      maxMessageBytes: int('max-message-bytes', raw('max-message-bytes'), 64 * 1024, 1024 * 1024 * 1024),
      maxStreamsPerCaller: int('max-streams-per-caller', raw('max-streams-per-caller'), 1, 1_000_000),
      log: {
        streamName: raw('log-stream'),
        subjectPrefix: raw('log-subject-prefix'),
        maxAgeMs: duration('log-max-age', raw('log-max-age')),
        maxMsgsPerStream: int('log-max-msgs-per-stream', raw('log-max-msgs-per-stream'), -1, Number.MAX_SAFE_INTEGER),
        replicas: int('log-replicas', raw('log-replicas'), 1, 5),
        sessionIdleMs: duration('session-idle', raw('session-idle')),
      },
    },
  };
}

function list(text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '');
}

function int(flag: string, text: string, min: number, max: number): number {
  const n = Number(text);
  if (!/^-?[0-9]+$/.test(text.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
    throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: an integer from ${min} to ${max}`);
  }
  return n;
}

const UNITS: Readonly<Record<string, number>> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };

function duration(flag: string, text: string): number {
  const match = /^([0-9]+)(ms|s|m|h)?$/.exec(text.trim());
  const n = match === null ? NaN : Number(match[1]) * (UNITS[match[2] ?? 'ms'] ?? NaN);
  if (!Number.isSafeInteger(n) || n < 1_000) throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: at least 1000 ms, as ms or 30s/15m/24h`);
  return n;
}

function readText(flag: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError(`cannot read --${flag} ${JSON.stringify(path)}: ${(err as Error).message}`);
  }
}
