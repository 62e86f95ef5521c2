/**
 * `tether-inspect` flags, environment and `--config` file (the shared
 * @tether/config layers: flags, then environment, then the file, then
 * defaults). Pure: files are read through the function the caller passes.
 */
import { readFileSync } from 'node:fs';
import { ConfigError, helpLines, int, list, matching, readSettings } from '@tether/config';
import type { FlagOptions, FlagSpec } from '@tether/config';

export { ConfigError };

/** Every flag, its environment twin and default: the one source for parsing, the config file and `--help`. */
export const INSPECT_FLAGS = [
  { flag: 'host', env: 'TETHER_INSPECT_HOST', help: 'address to listen on (loopback by default: the page is for operators)', fallback: '127.0.0.1' },
  { flag: 'port', env: 'TETHER_INSPECT_PORT', help: 'port to listen on (0 = any free port)', fallback: '8090' },
  { flag: 'token', env: 'TETHER_INSPECT_TOKEN', help: 'access token (at least 16 characters; repeat, or comma separate, to accept several)', fallback: '', repeat: true },
  { flag: 'token-file', env: 'TETHER_INSPECT_TOKEN_FILE', help: 'file with one token per line (keeps secrets out of ps)', fallback: '' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server URL(s) of the log (repeat, or comma separate)', fallback: 'nats://127.0.0.1:4222', repeat: true },
  { flag: 'log', env: 'TETHER_INSPECT_LOG', help: 'not yet: grpc:// is refused (the read model reads NATS; give --nats)', fallback: '' },
  { flag: 'namespace', env: 'TETHER_NAMESPACE', help: 'the deployment to inspect (as given to the gateways; empty = default names)', fallback: '' },
  { flag: 'log-level', env: 'TETHER_LOG_LEVEL', help: 'pino level: trace, debug, info, warn, error, fatal, silent', fallback: 'info' },
  { flag: 'config', env: 'TETHER_CONFIG', help: 'JSON file of settings keyed by flag name (e.g. {"port": 8090, "token": ["…"]})', fallback: '' },
] as const satisfies readonly FlagSpec[];

const FLAG_OPTIONS: FlagOptions = { secretFlags: ['token'] };
const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];
const MIN_TOKEN_LENGTH = 16;
const NAMESPACE = /^[a-z0-9_-]{1,32}$/;

/** What `main` needs to start the inspector. */
export interface InspectConfig {
  readonly host: string;
  readonly port: number;
  /** Accepted access tokens (secrets; never printed). */
  readonly tokens: readonly string[];
  /** NATS server URL(s) of the log. */
  readonly nats: readonly string[];
  readonly namespace: string | undefined;
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
  // The read model reads the stream, the audit events and the registry on NATS; the cursor API has no calls for them (yet).
  if (raw('log') !== '') throw new ConfigError(`--log ${JSON.stringify(raw('log'))} is not supported yet: tether-inspect reads the log on NATS directly; give --nats (and --namespace)`);
  const nats = list(raw('nats'));
  if (nats.length === 0) throw new ConfigError('invalid --nats ""; allowed: one or more NATS URLs like nats://127.0.0.1:4222');
  return { host, port: int('port', raw('port'), 0, 65535), tokens, nats, namespace, logLevel };
}
