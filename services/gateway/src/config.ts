import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { ConfigError, duration, helpLines, int, list, matching, readSettings } from '@tether/config';
import type { FlagOptions, FlagSpec } from '@tether/config';
import { DEFAULT_STREAM_NAME, isSessionLogError, MAX_PARTITIONS, MAX_SESSIONS_PER_PRINCIPAL, PLACEMENT_TAG_ALLOWED, PLACEMENT_TAG_PATTERN, NAMESPACE_ALLOWED, NAMESPACE_PATTERN, namespaceNames, resolveConfig } from '@tether/session-log';
import { AUTH_FLAGS, AUTH_SECRET_FLAGS, checkRouteAuth, parseAuthConfig } from './auth/auth-config.js';
import type { AuthConfig } from './auth/auth-config.js';

export { ConfigError };

/** One route: a path the gateway serves and the upstream replicas behind it. */
export interface Route {
  readonly path: string;
  readonly upstreams: readonly string[];
}

export interface GatewayConfig {
  readonly host: string;
  readonly port: number;
  /** NATS servers for the in-process log (ignored when `logUrl` is set). */
  readonly natsUrl: string;
  /** `grpc://host:port`: use the session-log service instead of NATS. */
  readonly logUrl: string | undefined;
  readonly logToken: string | undefined;
  readonly routes: readonly Route[];
  /** Separates deployments on one NATS account: the log stream, every subject and bucket carry it. '' = none (today's names). */
  readonly namespace: string;
  /** The log's JetStream stream: `--log-stream`, else derived from the namespace (`TETHER_LOG`, `TETHER_LOG_<namespace>`). */
  readonly logStream: string;
  readonly logMaxAgeMs: number;
  readonly logMaxMsgsPerStream: number;
  readonly logReplicas: number;
  /**
   * Streams the log is spread over (`--log-partitions`, 1..256, default 1:
   * the unpartitioned layout). Every process of a deployment must give the
   * same count; the library refuses another at startup. Not used with `--log grpc://`.
   */
  readonly logPartitions: number;
  /** Server tags every stream and bucket of the log is placed on (`--log-placement-tags`). Not used with `--log grpc://`. */
  readonly logPlacementTags: readonly string[];
  readonly sessionIdleMs: number;
  /** Who a caller is: a trusted header's digest (`none`), or a verified token's issuer and subject (`jwt`, `introspect`). */
  readonly auth: AuthConfig;
  /** Origins allowed besides loopback ones. `*` allows any. */
  readonly allowedOrigins: readonly string[];
  readonly heartbeatMs: number;
  readonly retryMs: number;
  readonly drainTimeoutMs: number;
  readonly requestDeadlineMs: number;
  readonly maxBodyBytes: number;
  readonly maxHeaderBytes: number;
  readonly maxEventBytes: number;
  readonly maxStreamsPerSession: number;
  /** Open sessions per principal across every instance; 0 = no limit. In `--log grpc://` mode the service's own setting applies. */
  readonly maxSessionsPerPrincipal: number;
  /** How often readers here probe the writers elsewhere they depend on (one probe per writer process). */
  readonly writerCheckMs: number;
  /** How long a writer may leave probes unanswered before its streams are taken over. */
  readonly writerSilenceMs: number;
  readonly instanceId: string;
  /** Record metadata-only audit events per session (`--audit on|off`, default on). */
  readonly audit: boolean;
  /** Durable tasks for 2026-07-28 clients (the Tasks extension). */
  readonly tasks: TasksConfig;
}

/** `--tasks` and its settings (docs/design.md, "Tasks at the edge"). */
export interface TasksConfig {
  /** `--tasks on|off`: off passes every 2026-07-28 request through untouched. */
  readonly enabled: boolean;
  /** A task-eligible call that the upstream has not answered within this becomes a task. */
  readonly afterMs: number;
  /** Every task's `ttlMs`: readable this long after creation, then "expired", then gone. */
  readonly ttlMs: number;
  readonly pollIntervalMs: number;
  /** Tools treated as task-supporting (`optional`) whatever the upstream declares. */
  readonly tools: readonly string[];
  /** `--no-task-tools`: tools that never become tasks (plain calls, passed through). */
  readonly noTools: readonly string[];
  /** `--task-tool-list on|off`: read the upstream's 2025-era tool list to refine which calls become tasks. */
  readonly toolList: boolean;
  /** `idempotent`: a task whose runner died is run again elsewhere when the upstream annotates the tool `idempotentHint`. */
  readonly retry: 'off' | 'idempotent';
  /** How old the upstream's tool list may get before it is asked again. */
  readonly toolRefreshMs: number;
  /** `--task-sweep-interval`: how often the sweeper looks for working tasks whose runner died (0: never; readers still settle them). */
  readonly sweepIntervalMs: number;
  /** `--experimental-task-streams`: serve `tasks/stream` (the draft SEP-2694) from each task's recorded notifications. */
  readonly streams: boolean;
  /** Events kept per task for `tasks/stream`; a cursor behind them gets `events_gone`. */
  readonly maxEventsPerTask: number;
}

/** Every flag, its env twin and default: the single source for parsing and `--help`. */
export const FLAGS = [
  { flag: 'host', env: 'TETHER_HOST', help: 'address to listen on', fallback: '127.0.0.1' },
  { flag: 'port', env: 'TETHER_PORT', help: 'port to listen on (0 = any free port)', fallback: '8080' },
  { flag: 'nats', env: 'TETHER_NATS_URL', help: 'NATS server URL(s), comma separated', fallback: 'nats://127.0.0.1:4222' },
  { flag: 'log', env: 'TETHER_LOG_URL', help: 'use the session-log service instead of NATS: grpc://host:port', fallback: '' },
  { flag: 'log-token', env: 'TETHER_LOG_TOKEN', help: 'bearer token for the session-log service', fallback: '' },
  { flag: 'upstream', env: 'TETHER_UPSTREAMS', help: 'upstream MCP URL for the default route /mcp (repeat or comma separate for replicas)', fallback: '', repeat: true },
  { flag: 'route', env: 'TETHER_ROUTES', help: 'extra route: /path=url[,url...] (repeat; env separates routes with ;)', fallback: '', repeat: true },
  { flag: 'namespace', env: 'TETHER_NAMESPACE', help: 'separates deployments on one NATS account: the log stream, subjects and buckets carry it (a-z, 0-9, _, -; up to 32; --log grpc:// uses the service\'s)', fallback: '' },
  { flag: 'log-stream', env: 'TETHER_LOG_STREAM', help: 'JetStream stream name of the log; another name needs --namespace (its default: TETHER_LOG_<namespace>)', fallback: 'TETHER_LOG' },
  { flag: 'log-max-age', env: 'TETHER_LOG_MAX_AGE', help: 'retention window of events (ms, or 30s/15m/24h)', fallback: '24h' },
  { flag: 'log-max-msgs-per-stream', env: 'TETHER_LOG_MAX_MSGS_PER_STREAM', help: 'cap on events kept per session stream (-1 = none)', fallback: '100000' },
  { flag: 'log-replicas', env: 'TETHER_LOG_REPLICAS', help: 'replicas of the log stream and buckets', fallback: '1' },
  { flag: 'log-partitions', env: 'TETHER_LOG_PARTITIONS', help: `streams the log is spread over, 1 to ${MAX_PARTITIONS}; the same on every process of a deployment (--log grpc:// uses the service's)`, fallback: '1' },
  { flag: 'log-placement-tags', env: 'TETHER_LOG_PLACEMENT_TAGS', help: "server tags the log's streams and buckets are placed on, comma separated (--log grpc:// uses the service's)", fallback: '' },
  { flag: 'session-idle', env: 'TETHER_SESSION_IDLE', help: 'idle timeout of a session (ms, or 30s/15m/24h)', fallback: '1h' },
  ...AUTH_FLAGS,
  { flag: 'allowed-origins', env: 'TETHER_ALLOWED_ORIGINS', help: 'origins allowed besides loopback, comma separated (* = any)', fallback: '' },
  { flag: 'heartbeat', env: 'TETHER_HEARTBEAT', help: 'SSE comment interval on idle streams (ms, or 15s)', fallback: '15s' },
  { flag: 'retry', env: 'TETHER_RETRY', help: 'SSE retry hint sent to clients (ms)', fallback: '1000' },
  { flag: 'drain-timeout', env: 'TETHER_DRAIN_TIMEOUT', help: 'how long SIGTERM waits for pumps to finish (ms, or 10s)', fallback: '10s' },
  { flag: 'request-deadline', env: 'TETHER_REQUEST_DEADLINE', help: 'longest an upstream response stream is recorded (ms, or 5m)', fallback: '5m' },
  { flag: 'max-body-bytes', env: 'TETHER_MAX_BODY_BYTES', help: 'largest request body accepted', fallback: '4194304' },
  { flag: 'max-header-bytes', env: 'TETHER_MAX_HEADER_BYTES', help: 'largest request header block accepted', fallback: '16384' },
  { flag: 'max-event-bytes', env: 'TETHER_MAX_EVENT_BYTES', help: 'largest upstream SSE event recorded', fallback: '1048576' },
  { flag: 'max-streams-per-session', env: 'TETHER_MAX_STREAMS_PER_SESSION', help: 'open SSE streams per session on one instance', fallback: '32' },
  { flag: 'max-sessions-per-principal', env: 'TETHER_MAX_SESSIONS_PER_PRINCIPAL', help: 'open sessions per principal, all instances (0 = no limit; anonymous callers share one; --log grpc:// uses the service\'s)', fallback: '0' },
  { flag: 'writer-check', env: 'TETHER_WRITER_CHECK', help: 'how often readers here probe each writer instance they depend on (ms, or 1s)', fallback: '500' },
  { flag: 'writer-silence', env: 'TETHER_WRITER_SILENCE', help: 'how long a writer instance may leave probes unanswered before its streams are taken over (ms, or 3s)', fallback: '3s' },
  { flag: 'instance-id', env: 'TETHER_INSTANCE_ID', help: 'name of this instance in logs, audit events and tether-admin drain (default random)', fallback: '' },
  { flag: 'audit', env: 'TETHER_AUDIT', help: 'record metadata-only audit events per session in the log (on|off; with --log grpc:// sent to the service\'s RecordAudit)', fallback: 'on' },
  { flag: 'tasks', env: 'TETHER_TASKS', help: 'durable tasks (Tasks extension) for 2026-07-28 clients: on|off (with --log grpc://, through the session-log service)', fallback: 'on' },
  { flag: 'task-after', env: 'TETHER_TASK_AFTER', help: 'a task-supporting call not answered within this becomes a task (ms, or 1s)', fallback: '250' },
  { flag: 'task-ttl', env: 'TETHER_TASK_TTL', help: 'how long a task stays readable after creation (ms, or 1h)', fallback: '1h' },
  { flag: 'task-poll-interval', env: 'TETHER_TASK_POLL_INTERVAL', help: 'pollIntervalMs suggested to clients (ms, or 1s)', fallback: '1000' },
  { flag: 'task-tools', env: 'TETHER_TASK_TOOLS', help: 'tools run as tasks when slow even if the upstream\'s tool list says execution.taskSupport forbidden, comma separated', fallback: '' },
  { flag: 'no-task-tools', env: 'TETHER_NO_TASK_TOOLS', help: 'tools that never become tasks (any other call from a client declaring the Tasks extension does when slow), comma separated', fallback: '' },
  { flag: 'task-tool-list', env: 'TETHER_TASK_TOOL_LIST', help: 'read the upstream\'s 2025-era tool list (execution.taskSupport, idempotentHint) to refine which calls become tasks: on|off', fallback: 'on' },
  { flag: 'task-retry', env: 'TETHER_TASK_RETRY', help: 'a task whose gateway died: off (settled failed) or idempotent (re-run when the tool is annotated idempotentHint)', fallback: 'off' },
  { flag: 'experimental-task-streams', env: 'TETHER_EXPERIMENTAL_TASK_STREAMS', help: 'serve tasks/stream {taskId, after?}, the recorded notifications of a task as SEP-2694 events, seq from 0 (a draft; may change): on|off', fallback: 'off' },
  { flag: 'task-max-events', env: 'TETHER_TASK_MAX_EVENTS', help: 'notifications kept per task for tasks/stream (older ones: events_gone)', fallback: '10000' },
  { flag: 'task-tool-refresh', env: 'TETHER_TASK_TOOL_REFRESH', help: 'how often the upstream tool list (taskSupport, idempotentHint) is read again (ms, or 1m)', fallback: '1m' },
  { flag: 'task-sweep-interval', env: 'TETHER_TASK_SWEEP_INTERVAL', help: 'how often working tasks whose gateway died are looked for and settled failed, polled or not (ms, or 2s; 0 = only when read)', fallback: '2000' },
  { flag: 'config', env: 'TETHER_CONFIG', help: 'JSON file of settings, keyed by flag name (e.g. {"port": 8080, "upstream": ["http://a/mcp"]})', fallback: '' },
] as const satisfies readonly FlagSpec[];

/** Values that must not be printed: masked by `--print-config`, withheld from config-file errors. */
const SECRET_FLAGS = ['log-token', ...AUTH_SECRET_FLAGS];

/** Routes contain commas (replica lists), so repeated `--route`s are joined with `;`, as in `TETHER_ROUTES`. */
const FLAG_OPTIONS: FlagOptions = { separator: (flag) => (flag === 'route' ? ';' : ','), secretFlags: SECRET_FLAGS };

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The table as parsed: `--log-stream` without a default, so that a stream
 * name given (by flag, env or file) is told apart from none (its meaning
 * depends on `--namespace`). `--help` shows FLAGS' default.
 */
const FLAGS_UNSET_EMPTY = FLAGS.map((f) => (f.flag === 'log-stream' ? { ...f, fallback: '' } : f));


export function helpText(): string {
  const lines = [
    'Usage: tether-gateway [flags]',
    '',
    'Every flag has an environment twin. Precedence: flags, then environment, then the --config file, then defaults.',
    '',
  ];
  lines.push(...helpLines(FLAGS, { flagWidth: 26, envWidth: 32 }));
  lines.push('  --print-config               print the effective configuration (secrets masked) and exit', '  --help', '');
  return lines.join('\n');
}

/** Parses argv and env into a validated config. A bad value names the flag, the value and what is allowed. */
export function parseConfig(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string = (path) => readFileSync(path, 'utf8'),
): GatewayConfig {
  refuseRetired(argv, env);
  const { raw } = readSettings(argv, env, readFile, FLAGS_UNSET_EMPTY, FLAG_OPTIONS);

  const upstreams = list(raw('upstream'), ',').map((u) => url('upstream', u));
  const routes: Route[] = [];
  if (upstreams.length > 0) routes.push({ path: '/mcp', upstreams });
  for (const spec of list(raw('route'), ';')) {
    const eq = spec.indexOf('=');
    const path = spec.slice(0, eq);
    if (eq <= 0 || !/^\/[A-Za-z0-9._~/-]*$/.test(path)) throw new ConfigError(`invalid --route ${JSON.stringify(spec)}; allowed: /path=http://host/mcp[,http://other/mcp]`);
    if (routes.some((r) => r.path === path)) throw new ConfigError(`invalid --route ${JSON.stringify(spec)}; path ${path} is already routed`);
    const targets = list(spec.slice(eq + 1), ',').map((u) => url('route', u));
    if (targets.length === 0) throw new ConfigError(`invalid --route ${JSON.stringify(spec)}; it names no upstream URL`);
    routes.push({ path, upstreams: targets });
  }
  if (routes.length === 0) throw new ConfigError('no upstream configured: give --upstream http://host/mcp (or TETHER_UPSTREAMS) or --route /path=url');

  const logUrl = raw('log');
  if (logUrl !== '' && !/^grpcs?:\/\/[^/]+$/.test(logUrl)) throw new ConfigError(`invalid --log ${JSON.stringify(logUrl)}; allowed: grpc://host:port or grpcs://host:port`);
  const instanceId = raw('instance-id') === '' ? `gw-${randomBytes(4).toString('hex')}` : raw('instance-id');
  const auth = parseAuthConfig(raw);
  checkRouteAuth(auth, routes.map((r) => r.path));
  return {
    host: raw('host'),
    port: int('port', raw('port'), 0, 65535),
    natsUrl: raw('nats'),
    logUrl: logUrl === '' ? undefined : logUrl,
    logToken: raw('log-token') === '' ? undefined : raw('log-token'),
    routes,
    ...logLayout(raw('namespace'), raw('log-stream'), logUrl !== ''),
    logMaxAgeMs: duration('log-max-age', raw('log-max-age'), 1_000),
    logMaxMsgsPerStream: int('log-max-msgs-per-stream', raw('log-max-msgs-per-stream'), -1, Number.MAX_SAFE_INTEGER),
    logReplicas: int('log-replicas', raw('log-replicas'), 1, 5),
    logPartitions: int('log-partitions', raw('log-partitions'), 1, MAX_PARTITIONS),
    logPlacementTags: list(raw('log-placement-tags'), ',').map((tag) => matching('log-placement-tags', tag, PLACEMENT_TAG_PATTERN, PLACEMENT_TAG_ALLOWED)),
    sessionIdleMs: duration('session-idle', raw('session-idle'), 1_000),
    auth,
    allowedOrigins: list(raw('allowed-origins'), ','),
    heartbeatMs: duration('heartbeat', raw('heartbeat'), 100),
    retryMs: int('retry', raw('retry'), 0, 600_000),
    drainTimeoutMs: duration('drain-timeout', raw('drain-timeout'), 0),
    requestDeadlineMs: duration('request-deadline', raw('request-deadline'), 1_000),
    maxBodyBytes: int('max-body-bytes', raw('max-body-bytes'), 1_024, 64 * 1024 * 1024),
    maxHeaderBytes: int('max-header-bytes', raw('max-header-bytes'), 1_024, 1024 * 1024),
    maxEventBytes: int('max-event-bytes', raw('max-event-bytes'), 1_024, 16 * 1024 * 1024),
    maxStreamsPerSession: int('max-streams-per-session', raw('max-streams-per-session'), 1, 10_000),
    maxSessionsPerPrincipal: int('max-sessions-per-principal', raw('max-sessions-per-principal'), 0, MAX_SESSIONS_PER_PRINCIPAL),
    writerCheckMs: duration('writer-check', raw('writer-check'), 50),
    writerSilenceMs: duration('writer-silence', raw('writer-silence'), 500),
    instanceId,
    audit: onOff('audit', raw('audit')),
    tasks: parseTasks(raw),
  };
}

type TaskFlag = 'tasks' | 'task-after' | 'task-ttl' | 'task-poll-interval' | 'task-tools' | 'no-task-tools' | 'task-tool-list' | 'task-retry' | 'task-tool-refresh' | 'task-sweep-interval' | 'experimental-task-streams' | 'task-max-events';

function parseTasks(raw: (flag: TaskFlag) => string): TasksConfig {
  const retry = raw('task-retry');
  if (retry !== 'off' && retry !== 'idempotent') throw new ConfigError(`invalid --task-retry ${JSON.stringify(retry)}; allowed: off or idempotent`);
  const tools = list(raw('task-tools'), ',');
  const noTools = list(raw('no-task-tools'), ',');
  const both = tools.filter((tool) => noTools.includes(tool));
  if (both.length > 0) throw new ConfigError(`--task-tools and --no-task-tools both name ${both.map((tool) => JSON.stringify(tool)).join(', ')}; name each tool in one of them`);
  return {
    enabled: onOff('tasks', raw('tasks')),
    afterMs: duration('task-after', raw('task-after'), 0),
    ttlMs: duration('task-ttl', raw('task-ttl'), 1_000),
    pollIntervalMs: duration('task-poll-interval', raw('task-poll-interval'), 10),
    tools,
    noTools,
    toolList: onOff('task-tool-list', raw('task-tool-list')),
    retry,
    toolRefreshMs: duration('task-tool-refresh', raw('task-tool-refresh'), 1_000),
    sweepIntervalMs: sweepInterval(raw('task-sweep-interval')),
    streams: onOff('experimental-task-streams', raw('experimental-task-streams')),
    maxEventsPerTask: int('task-max-events', raw('task-max-events'), 1, 1_000_000),
  };
}

/** 0 turns the sweeper off; otherwise at least 100 ms (each tick lists and probes). */
function sweepInterval(text: string): number {
  return text === '0' ? 0 : duration('task-sweep-interval', text, 100);
}

/**
 * The namespace and the log stream's name. `--log-stream` on its own is
 * refused unless it names today's stream (docs/design.md, "Namespaces"): a
 * stream name alone leaves the subjects and buckets those of every other
 * deployment on the account, so a second deployment either fails to start
 * ("subjects overlap") or, worse, shares their session registry. With
 * `--namespace` it names the namespace's stream instead of the derived one.
 */
function logLayout(namespaceText: string, streamText: string, viaService: boolean): { namespace: string; logStream: string } {
  const namespace = namespaceText === '' ? '' : matching('namespace', namespaceText, NAMESPACE_PATTERN, NAMESPACE_ALLOWED);
  const logStream = streamText === '' ? namespaceNames(namespace).streamName : matching('log-stream', streamText, NAME, 'letters, digits, _ and -, up to 64 characters');
  // Ignoring them would let a gateway meant for one deployment serve another's sessions without a word.
  if (viaService && (namespace !== '' || logStream !== DEFAULT_STREAM_NAME)) {
    throw new ConfigError(
      `${namespace === '' ? '--log-stream' : '--namespace'} has no effect with --log grpc://: the session-log service's own --namespace decides which log it serves; set it there and drop it here`,
    );
  }
  if (streamText === '') return { namespace, logStream };
  if (namespace === '' && logStream !== DEFAULT_STREAM_NAME) throw new ConfigError(streamNeedsNamespace('--log-stream', logStream));
  return { namespace, logStream };
}


/**
 * The log layout flags a `--log grpc://` gateway was given and does not use:
 * the service lays out the log, as it does for `--log-replicas` and
 * `--log-max-age`. Ignored (main logs them), not refused as `--namespace`
 * is: a partition count or a tag names no deployment, so ignoring one never
 * serves another deployment's sessions, and one environment (a shared
 * ConfigMap) may hold them for every process.
 */
export function ignoredWithGrpcLog(config: GatewayConfig): string[] {
  if (config.logUrl === undefined) return [];
  return [...(config.logPartitions === 1 ? [] : ['--log-partitions']), ...(config.logPlacementTags.length === 0 ? [] : ['--log-placement-tags'])];
}

/** Shared wording with tether-session-log: what was refused, why, and what to give instead. */
function streamNeedsNamespace(flag: string, value: string): string {
  const suggestion = value.toLowerCase();
  const example = NAMESPACE_PATTERN.test(suggestion) ? suggestion : 'NAME';
  return (
    `${flag} ${JSON.stringify(value)} needs --namespace: on its own it renames only the stream, and the subjects (tether.log.>, tether.ctl.…) ` +
    'and buckets (tether_sessions, tether_leases, tether_principals) stay those of every other deployment on the NATS account, so a second ' +
    `deployment fails to start ("subjects overlap") or shares their sessions. Give --namespace ${example} (TETHER_NAMESPACE) instead: it names ` +
    `the stream (TETHER_LOG_${example}), the subjects (tether_${example}.…) and every bucket; or drop ${flag} for the default ${DEFAULT_STREAM_NAME}`
  );
}

/**
 * Flags that no longer exist, refused with what replaced them (a config
 * that set them expects behaviour the gateway no longer has).
 */
const RETIRED = [
  {
    flag: 'lease-ttl',
    env: 'TETHER_LEASE_TTL',
    why: 'writers are no longer leased per stream: liveness is per instance, and a dead writer is taken over at once (docs/design.md section 6); remove it, or see --writer-check and --writer-silence',
  },
] as const;

function refuseRetired(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): void {
  for (const { flag, env: name, why } of RETIRED) {
    if (argv.some((a) => a === `--${flag}` || a.startsWith(`--${flag}=`))) throw new ConfigError(`--${flag} was removed: ${why}`);
    if (env[name] !== undefined) throw new ConfigError(`${name} was removed: ${why}`);
  }
}

/** The effective configuration as JSON, secrets masked: what `--print-config` shows. */
export function printableConfig(config: GatewayConfig): string {
  const masked: Record<string, unknown> = { ...config };
  for (const flag of SECRET_FLAGS) {
    const key = flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    if (masked[key] !== undefined) masked[key] = '***';
  }
  if (config.auth.mode !== 'none') {
    const { exchange } = config.auth;
    masked.auth = {
      ...config.auth,
      ...(config.auth.mode === 'introspect' ? { clientSecret: '***' } : {}),
      ...(exchange === undefined ? {} : { exchange: { ...exchange, clientSecret: '***' } }),
    };
  }
  return `${JSON.stringify(masked, null, 2)}\n`;
}

function onOff(flag: string, value: string): boolean {
  if (value === 'on') return true;
  if (value === 'off') return false;
  throw new ConfigError(`invalid --${flag} ${JSON.stringify(value)}; allowed: on or off`);
}

function url(flag: string, value: string): string {
  try {
    const parsed = new URL(value);
    if (parsed.protocol === 'http:' || parsed.protocol === 'https:') return parsed.toString();
  } catch {
    // fall through to the error naming the value
  }
  throw new ConfigError(`invalid --${flag} URL ${JSON.stringify(value)}; allowed: http(s)://host[:port]/path`);
}
