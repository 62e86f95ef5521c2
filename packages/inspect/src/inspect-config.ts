/**
 * `tether-inspect` flags, environment and `--config` file (the shared
 * @tether/config layers: flags, then environment, then the file, then
 * defaults). Pure: files are read through the function the caller passes.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, helpLines, int, list, matching, readSettings } from '@tether/config';
import type { FlagOptions, FlagSpec } from '@tether/config';
import { MAX_PARTITIONS } from '@tether/session-log';

export { ConfigError };

/** Every flag, its environment twin and default: the one source for parsing, the config file and `--help`. */
export const INSPECT_FLAGS = [
  { flag: 'host', env: 'TETHER_INSPECT_HOST', help: 'address to listen on (loopback by default: the page is for operators)', fallback: '127.0.0.1' },
  { flag: 'port', env: 'TETHER_INSPECT_PORT', help: 'port to listen on (0 = any free port)', fallback: '8090' },
  { flag: 'token', env: 'TETHER_INSPECT_TOKEN', help: 'access token (at least 16 characters; repeat, or comma separate, to accept several)', fallback: '', repeat: true },
  { flag: 'token-file', env: 'TETHER_INSPECT_TOKEN_FILE', help: 'file with one token per line (keeps secrets out of ps)', fallback: '' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server URL(s) of the log (repeat, or comma separate)', fallback: 'nats://127.0.0.1:4222', repeat: true },
  { flag: 'log', env: 'TETHER_INSPECT_LOG', help: 'grpc://host:port of a tether-session-log with --operator-token: read through its operator API instead of NATS', fallback: '' },
  { flag: 'log-token', env: 'TETHER_OPERATOR_TOKEN', help: 'operator token for --log (one of the service\'s --operator-token secrets)', fallback: '' },
  { flag: 'log-token-file', env: 'TETHER_OPERATOR_TOKEN_FILE', help: 'file holding the operator token for --log (its first line)', fallback: '' },
  { flag: 'namespace', env: 'TETHER_NAMESPACE', help: 'the deployment to inspect (as given to the gateways; empty = default names)', fallback: '' },
  { flag: 'log-partitions', env: 'TETHER_LOG_PARTITIONS', help: `the log's partition count, 1 to ${MAX_PARTITIONS}, as the gateways' (empty = read from the deployment; given, it must agree)`, fallback: '' },
  { flag: 'log-level', env: 'TETHER_LOG_LEVEL', help: 'pino level: trace, debug, info, warn, error, fatal, silent', fallback: 'info' },
  { flag: 'config', env: 'TETHER_CONFIG', help: 'JSON file of settings keyed by flag name (e.g. {"port": 8090, "token": ["…"]})', fallback: '' },
] as const satisfies readonly FlagSpec[];

const FLAG_OPTIONS: FlagOptions = { secretFlags: ['token', 'log-token'] };
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
const MIN_TOKEN_LENGTH = 16;
const NAMESPACE = /^[a-z0-9_-]{1,32}$/;

/** What `main` needs to start the inspector. */
export interface InspectConfig {
  readonly host: string;
  readonly port: number;
  /** Accepted access tokens (secrets; never printed). */
  readonly tokens: readonly string[];
  /** NATS server URL(s) of the log (unused with `log`). */
  readonly nats: readonly string[];
  /** A session-log service's operator API, `grpc://host:port`, and its operator token (a secret). */
  readonly log: { readonly url: string; readonly token: string } | undefined;
  readonly namespace: string | undefined;
  /** `--log-partitions`; undefined: read the count from the deployment. */
  readonly partitions: number | undefined;
  readonly logLevel: string;
}

export function inspectHelpText(): string {
  return [
    'Usage: tether-inspect --token T [flags]',
    '',
    "A read-only web page over Tether's log: recent sessions (by tag, never the raw id),",
    "and one session as a timeline of its streams, events, writers, connections and",
    'resume verdicts, with a chain check on demand. Open http://HOST:PORT/?token=T once:',
    'the token is exchanged for an HttpOnly cookie. The JSON API under /api/ takes',
    '`Authorization: Bearer T`. Every flag has an environment twin.',
    '',
    ...helpLines(INSPECT_FLAGS, { flagWidth: 16, envWidth: 27 }),
    '  --help',
    '',
    'Example: tether-inspect --nats nats://127.0.0.1:4222 --port 8090 --token-file /run/secrets/inspect',
    '',
  ].join('\n');
}

/**
 * Parses and checks the inspector's settings. A token is required: the
 * page shows which instances served which sessions, and runs chain checks
 * that read the log, so it is never open to anyone on the host.
 *
 * @throws ConfigError `invalid_config`, naming the flag (a secret's value is withheld)
 */
export function parseInspectConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): InspectConfig {
  const { raw } = readSettings(argv, env, readFile, INSPECT_FLAGS, FLAG_OPTIONS);
  const tokens = list(raw('token'));
  const tokenFile = raw('token-file');
  if (tokenFile !== '') {
    let text: string;
    try {
      text = readFile(tokenFile);
    } catch (err) {
      throw new ConfigError(`cannot read --token-file ${JSON.stringify(tokenFile)}: ${(err as Error).message}`);
    }
    tokens.push(...text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#')));
  }
  if (tokens.length === 0) throw new ConfigError('tether-inspect needs --token (or --token-file): the page is never served without one');
  for (const [i, token] of tokens.entries()) {
    if (token.length < MIN_TOKEN_LENGTH) throw new ConfigError(`invalid --token (entry ${i + 1}, value withheld): at least ${MIN_TOKEN_LENGTH} characters`);
  }
  const logLevel = raw('log-level');
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`invalid --log-level ${JSON.stringify(logLevel)}; allowed: ${LOG_LEVELS.join(', ')}`);
  const host = raw('host');
  if (!/^[A-Za-z0-9._:[\]-]+$/.test(host)) throw new ConfigError(`invalid --host ${JSON.stringify(host)}; allowed: a host name or IP address`);
  const namespaceText = raw('namespace');
  const namespace = namespaceText === '' ? undefined : matching('namespace', namespaceText, NAMESPACE, 'a-z, 0-9, _ and -, up to 32 characters');
  const log = grpcLog(raw('log'), raw('log-token'), raw('log-token-file'), readFile);
  if (log !== undefined && namespace !== undefined) throw new ConfigError('--namespace does not apply with --log: the session-log service reads its own namespace');
  const partitionsText = raw('log-partitions');
  const partitions = partitionsText === '' ? undefined : int('log-partitions', partitionsText, 1, MAX_PARTITIONS);
  if (log !== undefined && partitions !== undefined) throw new ConfigError('--log-partitions does not apply with --log: the session-log service reads its own log');
  const nats = list(raw('nats'));
  if (nats.length === 0) throw new ConfigError('invalid --nats ""; allowed: one or more NATS URLs like nats://127.0.0.1:4222');
  return { host, port: int('port', raw('port'), 0, 65535), tokens, nats, log, namespace, partitions, logLevel };
}

/**
 * `--log grpc://…` with its operator token, or undefined without `--log`.
 * Shared with tether-admin. The token is a secret: never repeated in an error.
 */
export function grpcLog(url: string, token: string, tokenFile: string, readFile: (path: string) => string): { url: string; token: string } | undefined {
  if (url === '') {
    if (token !== '' || tokenFile !== '') throw new ConfigError('--log-token needs --log grpc://host:port (without --log the log is read on NATS)');
    return undefined;
  }
  if (!/^grpcs?:\/\/[^\s/]+:[0-9]{1,5}\/?$/.test(url)) throw new ConfigError(`invalid --log ${JSON.stringify(url.slice(0, 80))}; allowed: grpc://host:port or grpcs://host:port of a tether-session-log started with --operator-token`);
  let secret = token;
  if (tokenFile !== '') {
    if (token !== '') throw new ConfigError('give --log-token or --log-token-file, not both');
    try {
      secret = (readFile(tokenFile).split(/\r?\n/).find((l) => l.trim() !== '' && !l.trim().startsWith('#')) ?? '').trim();
    } catch (err) {
      throw new ConfigError(`cannot read --log-token-file ${JSON.stringify(tokenFile)}: ${(err as Error).message}`);
    }
  }
  if (secret === '') throw new ConfigError('--log grpc:// needs --log-token (or --log-token-file): the operator API never answers without one');
  return { url, token: secret };
}
