import { ConfigError, helpLines, int, list, matching, readSettings } from '@tether/config';
import type { FlagSpec } from '@tether/config';
import { MAX_PARTITIONS, PLACEMENT_TAG_ALLOWED, PLACEMENT_TAG_PATTERN } from '@tether/session-log';

/** Every flag of `tether-sdk-example`; `--help` is built from this table, so it lists exactly what the parser accepts. */
export const FLAGS = [
  { flag: 'port', env: 'PORT', help: 'port to serve MCP on (/mcp) and /healthz; 0 picks a free one', fallback: '3000' },
  { flag: 'host', env: 'TETHER_SDK_HOST', help: 'address to listen on', fallback: '127.0.0.1' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server with JetStream (the session log, registry and tasks live there)', fallback: 'nats://127.0.0.1:4222' },
  { flag: 'log-partitions', env: 'TETHER_LOG_PARTITIONS', help: `streams the session log is spread over, 1 to ${MAX_PARTITIONS}; the same on every instance and every other process of the deployment`, fallback: '1' },
  { flag: 'log-placement-tags', env: 'TETHER_LOG_PLACEMENT_TAGS', help: "server tags the log's streams and buckets are placed on, comma separated", fallback: '' },
  { flag: 'instance', env: 'TETHER_SDK_INSTANCE', help: 'name of this instance in log lines', fallback: '' },
  { flag: 'retry-ms', env: 'TETHER_SDK_RETRY_MS', help: 'SSE retry: hint (ms) on priming events and resume acknowledgments: how soon clients reconnect', fallback: '1000' },
  { flag: 'writer-check-ms', env: 'TETHER_SDK_WRITER_CHECK_MS', help: 'a resumed reader asks whether the stream\'s writer lives after this much silence (ms)', fallback: '500' },
  { flag: 'writer-silence-ms', env: 'TETHER_SDK_WRITER_SILENCE_MS', help: 'a writer that answers no probe this long (ms) is taken for gone', fallback: '3000' },
  { flag: 'auth', env: 'TETHER_SDK_AUTH', help: 'none: the Authorization value, trusted as is, is the principal (a demo); jwt: Bearer JWT access tokens verified, sessions bound to their iss and sub', fallback: 'none' },
  { flag: 'auth-jwks-url', env: 'TETHER_SDK_AUTH_JWKS_URL', help: 'jwt: the authorization server\'s JWKS URL', fallback: '' },
  { flag: 'auth-issuer', env: 'TETHER_SDK_AUTH_ISSUER', help: 'jwt: the tokens\' iss, compared exactly', fallback: '' },
  { flag: 'auth-audience', env: 'TETHER_SDK_AUTH_AUDIENCE', help: 'jwt: this server\'s canonical resource URI (RFC 8707), e.g. https://mcp.example.com/mcp: the tokens\' aud, and the metadata\'s resource', fallback: '' },
  { flag: 'auth-scopes', env: 'TETHER_SDK_AUTH_SCOPES', help: 'jwt: scopes every token must carry, comma separated (403 insufficient_scope otherwise)', fallback: '' },
  { flag: 'auth-authorization-server', env: 'TETHER_SDK_AUTH_AUTHORIZATION_SERVER', help: 'jwt: the authorization server named in the protected resource metadata (default: --auth-issuer)', fallback: '' },
  { flag: 'config', env: 'TETHER_SDK_CONFIG', help: 'JSON file of settings keyed by flag name', fallback: '' },
] as const satisfies readonly FlagSpec[];

/** How callers are identified (`--auth`). */
export type ExampleAuth =
  /** The `Authorization` value is the credential, trusted as is: a demo, or behind a proxy that authenticates. */
  | { readonly mode: 'none' }
  | {
      readonly mode: 'jwt';
      readonly jwksUrl: string;
      readonly issuer: string;
      /** The canonical resource URI: the tokens' `aud`, the metadata's `resource`. */
      readonly audience: string;
      readonly scopes: readonly string[];
      readonly authorizationServer: string;
    };

export interface ExampleConfig {
  readonly port: number;
  readonly host: string;
  readonly nats: string;
  /** Streams the session log is spread over (`SessionLogOptions.partitions`); another count than the deployment's is refused at startup. */
  readonly logPartitions: number;
  /** Server tags the log's streams and buckets are placed on (`SessionLogOptions.placementTags`). */
  readonly logPlacementTags: readonly string[];
  /** '' when not given: then `<hostname>-<pid>`. */
  readonly instance: string;
  readonly retryMs: number;
  readonly writerCheckMs: number;
  readonly writerSilenceMs: number;
  readonly auth: ExampleAuth;
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
    logPartitions: int('log-partitions', raw('log-partitions'), 1, MAX_PARTITIONS),
    logPlacementTags: list(raw('log-placement-tags'), ',').map((tag) => matching('log-placement-tags', tag, PLACEMENT_TAG_PATTERN, PLACEMENT_TAG_ALLOWED)),
    instance: raw('instance'),
    retryMs: int('retry-ms', raw('retry-ms'), 1, 600_000),
    writerCheckMs,
    writerSilenceMs,
    auth: parseAuth(raw),
  };
}


type AuthFlag = 'auth' | 'auth-jwks-url' | 'auth-issuer' | 'auth-audience' | 'auth-scopes' | 'auth-authorization-server';
const TOKEN_FLAGS = ['auth-jwks-url', 'auth-issuer', 'auth-audience', 'auth-scopes', 'auth-authorization-server'] as const;

/** The `--auth` flags together: each missing or stray one is named. */
function parseAuth(raw: (flag: AuthFlag) => string): ExampleAuth {
  const mode = raw('auth');
  if (mode === 'none') {
    const stray = TOKEN_FLAGS.find((flag) => raw(flag) !== '');
    if (stray !== undefined) throw new ConfigError(`--${stray} needs --auth jwt (--auth is none)`);
    return { mode };
  }
  if (mode !== 'jwt') throw new ConfigError(`invalid --auth ${JSON.stringify(mode)}; allowed: none or jwt`);
  const missing = (['auth-jwks-url', 'auth-issuer', 'auth-audience'] as const).filter((flag) => raw(flag).trim() === '');
  if (missing.length > 0) throw new ConfigError(`--auth jwt needs ${missing.map((flag) => `--${flag}`).join(' and ')}`);
  const issuer = httpUrl('auth-issuer', raw('auth-issuer').trim());
  return {
    mode,
    jwksUrl: httpUrl('auth-jwks-url', raw('auth-jwks-url').trim()),
    issuer,
    audience: httpUrl('auth-audience', raw('auth-audience').trim()),
    scopes: list(raw('auth-scopes')).map((scope) => matching('auth-scopes', scope, /^[\x21\x23-\x5b\x5d-\x7e]+$/, 'scope tokens (RFC 6749: printable ASCII without spaces, quotes or backslashes), comma separated')),
    authorizationServer: raw('auth-authorization-server').trim() === '' ? issuer : httpUrl('auth-authorization-server', raw('auth-authorization-server').trim()),
  };
}

/** An absolute http(s) URL without a fragment (RFC 8707 forbids one in a resource; an issuer has none). */
function httpUrl(flag: AuthFlag, value: string): string {
  const parsed = URL.parse(value);
  if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || parsed.hash !== '' || value.includes('#')) {
    throw new ConfigError(`invalid --${flag} ${JSON.stringify(value)}; allowed: an absolute http(s) URL without a fragment`);
  }
  return value;
}

export function helpText(): string {
  return [
    'Usage: tether-sdk-example [flags]',
    '',
    'An official-SDK MCP server (tools stream, ping, slow_task) that any instance of a fleet can serve:',
    'sessions and events in the Tether session log on NATS JetStream, durable tasks on JetStream.',
    'MCP at /mcp, liveness at GET /healthz. Flags, then environment, then --config, then defaults.',
    '',
    ...helpLines(FLAGS, { flagWidth: 26, envWidth: 37 }),
    `  --${'help'.padEnd(26)} ${''.padEnd(37)} this text`,
    '',
  ].join('\n');
}
