import { readFileSync } from 'node:fs';
import { ConfigError, duration, helpLines, int, list, matching, readSettings } from '@tether/config';
import type { FlagOptions, FlagSpec } from '@tether/config';
import {
  DEFAULT_STREAM_NAME,
  DEFAULT_SUBJECT_PREFIX,
  isSessionLogError,
  MAX_PARTITIONS,
  MAX_SESSIONS_PER_PRINCIPAL,
  NAMESPACE_ALLOWED,
  NAMESPACE_PATTERN,
  namespaceNames,
  PLACEMENT_TAG_ALLOWED,
  PLACEMENT_TAG_PATTERN,
  resolveConfig,
} from '@tether/session-log';
import { parseTokens } from './auth.js';
import type { SessionLogServiceOptions } from './server.js';

export { ConfigError };

/** Every flag, its environment twin and default: the one source for parsing, the config file and `--help`. */
export const FLAGS = [
  { flag: 'host', env: 'TETHER_GRPC_HOST', help: 'address to listen on (0.0.0.0 in a container)', fallback: '127.0.0.1' },
  { flag: 'port', env: 'TETHER_GRPC_PORT', help: 'port to listen on (0 = any free port)', fallback: '50051' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server URL(s) (repeat, or comma separate)', fallback: 'nats://127.0.0.1:4222', repeat: true },
  { flag: 'token', env: 'TETHER_GRPC_TOKENS', help: 'accepted bearer token, name:secret or secret (repeat, or comma separate)', fallback: '', repeat: true },
  { flag: 'token-file', env: 'TETHER_GRPC_TOKEN_FILE', help: 'file with one token per line (keeps secrets out of ps)', fallback: '' },
  { flag: 'operator-token', env: 'TETHER_OPERATOR_TOKENS', help: 'operator API token (tether-inspect/tether-admin --log grpc://), name:secret or secret; none = API off', fallback: '', repeat: true },
  { flag: 'operator-token-file', env: 'TETHER_OPERATOR_TOKEN_FILE', help: 'file with one operator token per line', fallback: '' },
  { flag: 'tls-cert', env: 'TETHER_GRPC_TLS_CERT', help: 'PEM certificate chain file: serve TLS', fallback: '' },
  { flag: 'tls-key', env: 'TETHER_GRPC_TLS_KEY', help: 'PEM private key file of --tls-cert', fallback: '' },
  { flag: 'tls-client-ca', env: 'TETHER_GRPC_TLS_CLIENT_CA', help: 'PEM CA file: require client certificates it signed (mTLS)', fallback: '' },
  { flag: 'max-payload-bytes', env: 'TETHER_MAX_PAYLOAD_BYTES', help: 'largest event payload accepted', fallback: '1044480' },
  { flag: 'max-batch-entries', env: 'TETHER_MAX_BATCH_ENTRIES', help: 'most entries in one AppendBatch', fallback: '1000' },
  { flag: 'max-message-bytes', env: 'TETHER_GRPC_MAX_MESSAGE_BYTES', help: 'largest request message (bounds a batch)', fallback: '16777216' },
  { flag: 'max-streams-per-caller', env: 'TETHER_MAX_STREAMS_PER_CALLER', help: 'Resume/Follow/WatchControl/WatchAdmin streams one caller may hold', fallback: '1000' },
  { flag: 'max-sessions-per-principal', env: 'TETHER_MAX_SESSIONS_PER_PRINCIPAL', help: 'open sessions per principal, all instances (0 = no limit)', fallback: '0' },
  { flag: 'instance-id', env: 'TETHER_INSTANCE_ID', help: 'name of this instance in its audit events (letters, digits, _, -, ., :; up to 128)', fallback: 'tether-session-log' },
  { flag: 'namespace', env: 'TETHER_NAMESPACE', help: 'separates deployments on one NATS account: the log stream, subjects and buckets carry it (a-z, 0-9, _, -; up to 32)', fallback: '' },
  { flag: 'log-stream', env: 'TETHER_LOG_STREAM', help: 'JetStream stream name of the log; another name needs --namespace (its default: TETHER_LOG_<namespace>)', fallback: 'TETHER_LOG' },
  { flag: 'log-subject-prefix', env: 'TETHER_LOG_SUBJECT_PREFIX', help: 'first subject token(s) of the log; another needs --namespace (its default: tether_<namespace>)', fallback: 'tether' },
  { flag: 'log-max-age', env: 'TETHER_LOG_MAX_AGE', help: 'retention window of events (ms, or 30s/15m/24h)', fallback: '24h' },
  { flag: 'log-max-msgs-per-stream', env: 'TETHER_LOG_MAX_MSGS_PER_STREAM', help: 'cap on events kept per session stream (-1 = none)', fallback: '100000' },
  { flag: 'log-replicas', env: 'TETHER_LOG_REPLICAS', help: 'replicas of the log stream and buckets', fallback: '1' },
  { flag: 'log-partitions', env: 'TETHER_LOG_PARTITIONS', help: `streams the log is spread over, 1 to ${MAX_PARTITIONS}; the same on every process of a deployment`, fallback: '1' },
  { flag: 'log-placement-tags', env: 'TETHER_LOG_PLACEMENT_TAGS', help: "server tags the log's streams and buckets are placed on, comma separated", fallback: '' },
  { flag: 'session-idle', env: 'TETHER_SESSION_IDLE', help: 'idle timeout of a session (ms, or 30s/15m/24h)', fallback: '1h' },
  { flag: 'task-ttl', env: 'TETHER_TASK_TTL', help: "longest TTL of a task record (ms, or 1h); at least the gateways' --task-ttl", fallback: '1h' },
  { flag: 'log-level', env: 'TETHER_LOG_LEVEL', help: 'pino level: trace, debug, info, warn, error, fatal, silent', fallback: 'info' },
  { flag: 'config', env: 'TETHER_CONFIG', help: 'JSON file of settings keyed by flag name (e.g. {"port": 50051, "token": ["gw:…"]})', fallback: '' },
] as const satisfies readonly FlagSpec[];


/** A token's value is a secret: config-file errors say what is wrong with it without printing it. */
const FLAG_OPTIONS: FlagOptions = { secretFlags: ['token', 'operator-token'] };

/**
 * The table as parsed: the two log names without defaults, so that a name
 * given (by flag, env or file) is told apart from none (what it means
 * depends on `--namespace`). `--help` shows FLAGS' defaults.
 */
const UNSET_EMPTY = new Set(['log-stream', 'log-subject-prefix']);
const FLAGS_UNSET_EMPTY = FLAGS.map((f) => (UNSET_EMPTY.has(f.flag) ? { ...f, fallback: '' } : f));

const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
const NAME = /^[A-Za-z0-9_-]{1,64}$/;
const INSTANCE_ID = /^[A-Za-z0-9_.:-]{1,128}$/;
const PREFIX = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/;
const NATS_SCHEMES = new Set(['nats:', 'tls:', 'ws:', 'wss:']);

/** What `main` needs: the service options (without logger and metrics), the log level, and where files were read from. */
export interface ServiceConfig {
  readonly options: Omit<SessionLogServiceOptions, 'logger' | 'metrics' | 'nats' | 'tokens' | 'operatorTokens'> & {
    readonly nats: readonly string[];
    readonly tokens: readonly string[];
    readonly operatorTokens: readonly string[];
  };
  readonly logLevel: string;
  /** Paths the secrets and certificates were read from (shown by `--print-config` instead of their contents). */
  readonly files: { readonly config?: string; readonly tokenFile?: string; readonly operatorTokenFile?: string; readonly tlsCert?: string; readonly tlsKey?: string; readonly tlsClientCa?: string };
}

export function helpText(): string {
  const lines = [
    'Usage: tether-session-log [flags]',
    '',
    'Serves the Tether cursor API (gRPC, proto/tether/cursor/v1/cursor.proto) over the',
    'session log on NATS JetStream, with gRPC health and server reflection.',
    'Every flag has an environment twin. Precedence: flags, then environment, then the',
    '--config file, then defaults. Telemetry follows the standard OTEL_* variables.',
    '',
  ];
  lines.push(...helpLines(FLAGS, { flagWidth: 24, envWidth: 31 }));
  lines.push(
    '  --print-config             print the effective configuration as JSON (secrets masked) and exit',
    '  --help',
    '',
    'Example: tether-session-log --port 50051 --nats nats://127.0.0.1:4222 --token-file /run/secrets/tokens',
    '',
  );
  return lines.join('\n');
}

/**
 * Parses flags, environment and the optional `--config` file (precedence in
 * that order, then defaults) into a validated config. Files named by
 * `--token-file` and `--tls-*` are read here, so a missing one fails at
 * startup. A bad value names the flag, the value and what is allowed; a
 * secret is never repeated in an error.
 *
 * @throws ConfigError `invalid_config`
 */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): ServiceConfig {
  const { raw, configPath } = readSettings(argv, env, readFile, FLAGS_UNSET_EMPTY, FLAG_OPTIONS);
  const read = (flag: string, path: string): string => {
    try {
      return readFile(path);
    } catch (err) {
      throw new ConfigError(`cannot read --${flag} ${JSON.stringify(path)}: ${(err as Error).message}`);
    }
  };

  const tokens = list(raw('token'));
  checkTokens('--token', tokens);
  const tokenFile = raw('token-file');
  if (tokenFile !== '') {
    const fromTokenFile = read('token-file', tokenFile).split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    checkTokens(`--token-file ${JSON.stringify(tokenFile)}`, fromTokenFile);
    tokens.push(...fromTokenFile);
  }
  const operatorTokens = list(raw('operator-token'));
  checkTokens('--operator-token', operatorTokens);
  const operatorTokenFile = raw('operator-token-file');
  if (operatorTokenFile !== '') {
    const fromFile = read('operator-token-file', operatorTokenFile).split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
    checkTokens(`--operator-token-file ${JSON.stringify(operatorTokenFile)}`, fromFile);
    operatorTokens.push(...fromFile);
  }
  // One secret in both sets would make a cursor caller an operator (or the reverse) by accident.
  const cursorDigests = new Set(parseTokens(tokens).map((t) => t.digest.toString('hex')));
  if (parseTokens(operatorTokens).some((t) => cursorDigests.has(t.digest.toString('hex')))) {
    throw new ConfigError('an --operator-token has the same secret as a --token: operator and cursor tokens must differ');
  }
  const cert = raw('tls-cert');
  const key = raw('tls-key');
  const clientCa = raw('tls-client-ca');
  if ((cert === '') !== (key === '')) throw new ConfigError('--tls-cert and --tls-key go together');
  if (clientCa !== '' && cert === '') throw new ConfigError('--tls-client-ca (mTLS) needs --tls-cert and --tls-key');
  const tls =
    cert === ''
      ? undefined
      : { cert: read('tls-cert', cert), key: read('tls-key', key), ...(clientCa === '' ? {} : { clientCa: read('tls-client-ca', clientCa) }) };
  const logLevel = raw('log-level');
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`invalid --log-level ${JSON.stringify(logLevel)}; allowed: ${LOG_LEVELS.join(', ')}`);
  const host = raw('host');
  if (!/^[A-Za-z0-9._:[\]-]+$/.test(host)) throw new ConfigError(`invalid --host ${JSON.stringify(host)}; allowed: a host name or IP address`);
  const nats = list(raw('nats')).map(natsUrl);
  if (nats.length === 0) throw new ConfigError('invalid --nats ""; allowed: one or more NATS URLs like nats://127.0.0.1:4222');
  const log = {
    ...logLayout(raw('namespace'), raw('log-stream'), raw('log-subject-prefix')),
    maxAgeMs: duration('log-max-age', raw('log-max-age'), 1_000),
    maxMsgsPerStream: limit('log-max-msgs-per-stream', raw('log-max-msgs-per-stream')),
    replicas: int('log-replicas', raw('log-replicas'), 1, 5),
    partitions: int('log-partitions', raw('log-partitions'), 1, MAX_PARTITIONS),
    placementTags: list(raw('log-placement-tags'), ',').map((tag) => matching('log-placement-tags', tag, PLACEMENT_TAG_PATTERN, PLACEMENT_TAG_ALLOWED)),
    sessionIdleMs: duration('session-idle', raw('session-idle'), 1_000),
  };
  const maxPayloadBytes = int('max-payload-bytes', raw('max-payload-bytes'), 1, 64 * 1024 * 1024);
  try {
    // The library's own checks, so nothing it would refuse gets past startup.
    resolveConfig({ ...log, maxPayloadBytes });
  } catch (err) {
    if (isSessionLogError(err)) throw new ConfigError(err.message, { cause: err });
    throw err;
  }
  const files = {
    ...(configPath === '' ? {} : { config: configPath }),
    ...(tokenFile === '' ? {} : { tokenFile }),
    ...(operatorTokenFile === '' ? {} : { operatorTokenFile }),
    ...(cert === '' ? {} : { tlsCert: cert, tlsKey: key }),
    ...(clientCa === '' ? {} : { tlsClientCa: clientCa }),
  };
  return {
    logLevel,
    files,
    options: {
      host,
      port: int('port', raw('port'), 0, 65535),
      nats,
      tokens,
      operatorTokens,
      ...(tls === undefined ? {} : { tls }),
      maxPayloadBytes,
      maxBatchEntries: int('max-batch-entries', raw('max-batch-entries'), 1, 100_000),
      maxMessageBytes: int('max-message-bytes', raw('max-message-bytes'), 64 * 1024, 1024 * 1024 * 1024),
      maxStreamsPerCaller: int('max-streams-per-caller', raw('max-streams-per-caller'), 1, 1_000_000),
      maxSessionsPerPrincipal: int('max-sessions-per-principal', raw('max-sessions-per-principal'), 0, MAX_SESSIONS_PER_PRINCIPAL),
      taskTtlMs: duration('task-ttl', raw('task-ttl'), 1_000),
      instanceId: matching('instance-id', raw('instance-id'), INSTANCE_ID, 'letters, digits, _, -, . and :, up to 128 characters'),
      log,
    },
  };
}

/**
 * The effective configuration as JSON, what `--print-config` shows: token
 * secrets are `***` (the caller name stays, it is what logs and sessions
 * show), NATS URL credentials are masked, and TLS material appears as the
 * paths it was read from, never its contents.
 */
export function printableConfig(config: ServiceConfig): string {
  const { tls, tokens, operatorTokens, nats, ...rest } = config.options;
  const { files } = config;
  const printable = {
    ...rest,
    nats: nats.map(maskUrl),
    tokens: parseTokens(tokens).map((t) => `${t.name}:***`),
    tokenFile: files.tokenFile,
    operatorTokens: parseTokens(operatorTokens).map((t) => `${t.name}:***`),
    operatorTokenFile: files.operatorTokenFile,
    tls: tls === undefined ? undefined : { cert: files.tlsCert, key: files.tlsKey, clientCa: files.tlsClientCa },
    logLevel: config.logLevel,
    configFile: files.config,
  };
  return `${JSON.stringify(printable, null, 2)}\n`;
}

/**
 * The namespace and the names it does not derive. `--log-stream` and
 * `--log-subject-prefix` on their own are refused unless they give today's
 * names (docs/design.md, "Namespaces"): either alone leaves the buckets, and
 * the other name, those of every other deployment on the account, so a
 * second deployment fails to start ("subjects overlap") or, worse, shares
 * their session registry. With `--namespace` they name the namespace's
 * stream or subjects instead of the derived ones. No namespace leaves the
 * key out, so the library's layout is today's exactly.
 */
function logLayout(namespaceText: string, streamText: string, prefixText: string): { namespace?: string; streamName: string; subjectPrefix: string } {
  const namespace = namespaceText === '' ? '' : matching('namespace', namespaceText, NAMESPACE_PATTERN, NAMESPACE_ALLOWED);
  const derived = namespaceNames(namespace);
  const streamName = streamText === '' ? derived.streamName : matching('log-stream', streamText, NAME, 'letters, digits, _ and -, up to 64 characters');
  const subjectPrefix = prefixText === '' ? derived.subjectPrefix : matching('log-subject-prefix', prefixText, PREFIX, 'dot-separated tokens of letters, digits, _ and -');
  if (namespace === '') {
    if (streamName !== DEFAULT_STREAM_NAME) throw new ConfigError(needsNamespace('--log-stream', streamName, 'renames only the stream (its subjects stay tether.log.>)'));
    if (subjectPrefix !== DEFAULT_SUBJECT_PREFIX) throw new ConfigError(needsNamespace('--log-subject-prefix', subjectPrefix, 'moves only the subjects (the stream stays TETHER_LOG)'));
  }
  return { ...(namespace === '' ? {} : { namespace }), streamName, subjectPrefix };
}

/** Shared wording with tether-gateway: what was refused, why, and what to give instead. */
function needsNamespace(flag: string, value: string, what: string): string {
  const suggestion = value.toLowerCase().replace(/\./g, '_');
  const example = NAMESPACE_PATTERN.test(suggestion) ? suggestion : 'NAME';
  return (
    `${flag} ${JSON.stringify(value)} needs --namespace: on its own it ${what}, and the buckets (tether_sessions, tether_leases, tether_principals) ` +
    'stay those of every other deployment on the NATS account, so a second deployment fails to start ("subjects overlap") or shares their ' +
    `sessions. Give --namespace ${example} (TETHER_NAMESPACE) instead: it names the stream (TETHER_LOG_${example}), the subjects ` +
    `(tether_${example}.…) and every bucket; or drop ${flag} for the default`
  );
}


/** Refuses token specs the authenticator would refuse, naming where they came from but not the secret. */
function checkTokens(source: string, specs: readonly string[]): void {
  for (const [i, spec] of specs.entries()) {
    try {
      parseTokens([spec]);
    } catch (err) {
      throw new ConfigError(`invalid ${source} (entry ${i + 1}, value withheld): ${(err as Error).message}; allowed: name:secret or a bare secret`);
    }
  }
}

function natsUrl(value: string): string {
  if (value.includes('://')) {
    let scheme = '';
    try {
      scheme = new URL(value).protocol;
    } catch {
      // named in the error below
    }
    if (NATS_SCHEMES.has(scheme)) return value;
  } else if (/^[A-Za-z0-9.[\]:-]+$/.test(value)) {
    return value;
  }
  throw new ConfigError(`invalid --nats ${JSON.stringify(maskUrl(value))}; allowed: nats://host:port (or tls://, ws://, wss://, or host:port), comma separated`);
}

/** `nats://user:pass@host` → `nats://user:***@host`; a bare userinfo is a token: `nats://***@host`. */
function maskUrl(value: string): string {
  return value.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^@/]*)@/, (_, scheme: string, userinfo: string) => {
    const colon = userinfo.indexOf(':');
    return colon === -1 ? `${scheme}***@` : `${scheme}${userinfo.slice(0, colon)}:***@`;
  });
}

function limit(flag: string, text: string): number {
  const n = Number(text);
  if (!/^-?[0-9]+$/.test(text.trim()) || !Number.isSafeInteger(n) || n === 0 || n < -1) {
    throw new ConfigError(`invalid --${flag} ${JSON.stringify(text)}; allowed: a positive integer, or -1 for no limit`);
  }
  return n;
}
