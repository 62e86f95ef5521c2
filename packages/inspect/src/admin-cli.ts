import { readFileSync } from 'node:fs';
import { isSessionId } from '@tether/protocol';
import { ConfigError } from '@tether/config';
import { isTaskId, MAX_PARTITIONS } from '@tether/session-log';
import { formatChecks, formatSessions, formatTimeline } from './admin-format.js';
import { formatPartitions, formatRebalance } from './admin-partitions-format.js';
import { formatTask, formatTasks } from './admin-task-format.js';
import { InspectError, InspectErrorCode, isInspectError, scrub } from './errors.js';
import { openGrpcOperator } from './grpc-operator.js';
import { grpcLog } from './inspect-config.js';
import { openNatsOperator } from './operator.js';
import type { Operator } from './operator.js';
import type { SessionFilter } from './sessions.js';
import { isPrincipalFilter, isSessionTag, PRINCIPAL_FILTER_ALLOWED } from './tag.js';
import { TASK_STATUSES } from './task-statuses.js';
import type { TaskFilter, TaskStatusName } from './task-model.js';
import { isTaskStatusName } from './task-view.js';

/** Where tether-admin writes; a test passes its own. */
export interface AdminIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Reads `--log-token-file`; default the file system. */
  readonly readFile?: (path: string) => string;
}

const COMMANDS = ['sessions', 'show', 'verify', 'close', 'drain', 'tasks', 'task', 'partitions'] as const;
type Command = (typeof COMMANDS)[number];

const VALUE_FLAGS = ['nats', 'namespace', 'log-partitions', 'log', 'log-token', 'log-token-file', 'verdict', 'state', 'route', 'principal', 'limit', 'timeout', 'status'] as const;
type ValueFlag = (typeof VALUE_FLAGS)[number];

export function adminHelp(): string {
  return [
    'Usage: tether-admin <command> [arguments] [flags]',
    '',
    'An operator\'s command line for one Tether deployment. It talks to NATS directly, with the',
    'credentials of the NATS URL (nats://user:pass@host or a server that trusts this host), or,',
    'with --log grpc://, to a tether-session-log\'s operator API with an operator token: whoever',
    'holds either can do what tether-admin does. Sessions are named by their tag (s_ and 12',
    'characters, as in the services\' log lines), never by their id; their principal by its tag (the',
    'first 12 characters of its digest), never the digest or a token. A task is named by its tag (the first',
    '6 characters of its id and …): its id is a bearer handle, and no output repeats it.',
    '',
    'Commands:',
    '  sessions                 list recent sessions: tag, principal, route, state, age, streams, resume verdicts',
    '    --verdict V            only sessions with a resume of verdict V (resumed, truncated, epoch_mismatch, …)',
    '    --state S              active, closed or expired (the registry forgot it; its audit events remain)',
    '    --route R              only sessions of route R (/mcp)',
    '    --principal P          only sessions of principals whose tag starts with P (1 to 43 base64url',
    '                           characters; its first 12, a tag\'s length, are compared)',
    '    --limit N              at most N sessions, newest first (default 50, 1 to 10000)',
    '  show <tag>               one session as text: each stream\'s events, writers and takeovers, every',
    '                           connection with its instance, cursor and verdict, and the session\'s end',
    '  verify <tag>             check every stream\'s chain (seq contiguous, prev = previous position, one',
    '                           epoch, nothing after the end); exit 1 on any hole or fork, named by position',
    '  close <tag>              close the session on every instance (registry, purge, control message)',
    '  drain <instance>         ask one gateway instance (its --instance-id) to drain, as SIGTERM would',
    '                           (in-process or --log grpc:// gateways alike)',
    '    --timeout MS           how long to wait for its answer (default 3000)',
    '  tasks                    list the gateways\' durable tasks, newest first: task tag (6 characters of the id),',
    '                           status, tool, route, principal, runner instance and whether it lives, attempts,',
    '                           reruns, input rounds, age, time left to the TTL. Never arguments or results.',
    '                           A task an upstream runs itself shows as routed, with its replica\'s digest.',
    `    --status S             only tasks of status S (${TASK_STATUSES.join(', ')})`,
    '    --principal P          only tasks of principals whose tag starts with P (as for sessions)',
    '    --limit N              at most N tasks (default 50, 1 to 10000)',
    '  task <id>                one task in detail: the same facts and its outcome without content (error code,',
    '                           isError, sizes in bytes); takes the full task id and shows only its tag',
    '                           (both also over --log grpc://, through the operator API, with the same output)',
    '  partitions               one line per partition of the log: its stream, messages and bytes, the stream\'s',
    '                           Raft leader and replicas, and the leaders of its registry and lease buckets (NATS only)',
    '    --rebalance            spread the leaders over the servers: partition k\'s stream and both its buckets',
    '                           led by the k-th server hosting the log (sorted by name, modulo their count), each',
    '                           moved by a step-down with that server preferred; prints every move. Needs a',
    '                           replicated log (R3): on R1 there is nothing to move',
    '',
    'Flags of every command:',
    '  --nats URL               NATS server URL(s), comma separated (env TETHER_NATS_URL; default nats://127.0.0.1:4222)',
    '  --namespace NAME         the deployment\'s namespace, as its gateways\' --namespace (env TETHER_NAMESPACE)',
    `  --log-partitions N       the log's partition count, 1 to ${MAX_PARTITIONS} (env TETHER_LOG_PARTITIONS); default: read from`,
    '                           the deployment (partition 0\'s stream); given, it must be the deployment\'s',
    '  --log grpc://HOST:PORT   read and act through a tether-session-log\'s operator API instead of NATS',
    '  --log-token T            its operator token (env TETHER_OPERATOR_TOKEN; or --log-token-file F)',
    '  --json                   print JSON instead of text (errors too: {"error":{"code","message"}})',
    '  --help                   this text',
    '',
    'Exit status: 0 done, 1 a failed check or action (verify found a problem, unknown tag, task or instance,',
    'NATS unavailable), 2 bad input (unknown command or flag, malformed tag, bad value).',
    '',
  ].join('\n');
}

interface Parsed {
  readonly command: Command;
  readonly arg: string | undefined;
  readonly flags: Partial<Record<ValueFlag, string>>;
  readonly json: boolean;
  readonly rebalance: boolean;
}

function bad(message: string): InspectError {
  return new InspectError(InspectErrorCode.invalidArgument, message);
}

export function parseAdminArgs(argv: readonly string[]): Parsed | 'help' {
  if (argv.includes('--help') || argv.includes('-h') || argv.length === 0) return 'help';
  const positional: string[] = [];
  const flags: Partial<Record<ValueFlag, string>> = {};
  let json = false;
  let rebalance = false;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--json') {
      json = true;
      continue;
    }
    if (arg === '--rebalance') {
      rebalance = true;
      continue;
    }
    // A task id may start with `--` (base64url): after `task` it is the id, never a flag.
    if (!arg.startsWith('--') || (positional.length === 1 && positional[0] === 'task' && isTaskId(arg))) {
      positional.push(arg);
      continue;
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    if (!(VALUE_FLAGS as readonly string[]).includes(name)) throw bad(`unknown flag --${name.slice(0, 40)} (see --help)`);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || (eq === -1 && value.startsWith('--'))) throw bad(`flag --${name} needs a value`);
    flags[name as ValueFlag] = value;
  }
  const [command, arg, extra] = positional;
  if (command === undefined) throw bad('no command given; one of: ' + COMMANDS.join(', '));
  if (!(COMMANDS as readonly string[]).includes(command)) throw bad(`unknown command ${quoted(command)}; one of: ${COMMANDS.join(', ')}`);
  const needs = NEEDS[command as Command];
  if (needs !== undefined && arg === undefined) throw bad(`${command} needs ${needs[0]}: tether-admin ${command} <${needs[1]}>`);
  const unexpected = needs === undefined ? arg : extra;
  // Not echoed after `task` at all: a near-miss of a task id is still most of a bearer handle.
  if (unexpected !== undefined) throw bad(`unexpected argument ${command === 'task' ? '(not shown)' : quoted(unexpected)} for ${command}`);
  if (command === 'show' || command === 'verify' || command === 'close') assertTag(arg!);
  if (command === 'task') assertTaskId(arg!);
  const only: Record<Command, readonly ValueFlag[]> = { sessions: ['verdict', 'state', 'route', 'principal', 'limit'], show: [], verify: [], close: [], drain: ['timeout'], tasks: ['status', 'principal', 'limit'], task: [], partitions: [] };
  for (const name of ['verdict', 'state', 'route', 'principal', 'limit', 'timeout', 'status'] as const) {
    if (flags[name] !== undefined && !only[command as Command].includes(name)) throw bad(`--${name} does not apply to ${command}`);
  }
  if (rebalance && command !== 'partitions') throw bad(`--rebalance does not apply to ${command}`);
  if (flags['log-partitions'] !== undefined) partitionCount(flags['log-partitions'], '--log-partitions');
  return { command: command as Command, arg, flags, json, rebalance };
}

/** An argument quoted in an error, unless it is a credential: a session id or a task id is never echoed. */
function quoted(text: string): string {
  const head = text.slice(0, 40);
  return isSessionId(text) || isTaskId(text) ? '(not shown: it looks like an id)' : JSON.stringify(head);
}

/** What each command's argument is, for "needs …" errors; undefined: it takes none. */
const NEEDS: Record<Command, readonly [string, string] | undefined> = {
  sessions: undefined,
  tasks: undefined,
  partitions: undefined,
  show: ['a session tag', 'tag'],
  verify: ['a session tag', 'tag'],
  close: ['a session tag', 'tag'],
  drain: ['an instance id', 'instance'],
  task: ['a task id', 'task id'],
};

/** A task id is a bearer handle: whatever was given is never echoed back. */
function assertTaskId(text: string): void {
  if (isTaskId(text)) return;
  if (/^[A-Za-z0-9_-]{6}(…|\.\.\.)?$/.test(text)) throw bad('that looks like a task tag; task needs the full task id (22 characters of A-Z a-z 0-9 _ -), which a tag does not identify');
  throw bad('not a task id (not shown): a task id is 22 characters of A-Z a-z 0-9 _ -');
}

function assertTag(text: string): void {
  if (isSessionTag(text)) return;
  const head = text.slice(0, 40);
  // A raw id is not echoed back: it is the session's credential.
  if (isSessionId(text)) throw bad('that is a raw session id; sessions are named by tag (s_ and 12 base64url characters of its SHA-256, as in the services\' log lines; tether-admin sessions lists them)');
  if (isTaskId(text)) throw bad('that looks like a task id (not shown); a task is shown by tether-admin task <id>, a session by its tag');
  throw bad(`not a session tag: ${JSON.stringify(head)}; a tag is s_ and 12 base64url characters (tether-admin sessions lists them)`);
}

function taskStatus(text: string): TaskStatusName {
  if (isTaskStatusName(text)) return text;
  throw bad(`invalid --status ${JSON.stringify(text.slice(0, 40))}; allowed: ${TASK_STATUSES.join(', ')}`);
}

/** A partition count from `--log-partitions` or TETHER_LOG_PARTITIONS: 1 to MAX_PARTITIONS. */
function partitionCount(text: string, source: string): number {
  const n = Number(text);
  if (!/^[0-9]{1,3}$/.test(text) || n < 1 || n > MAX_PARTITIONS) throw bad(`invalid ${source} ${JSON.stringify(text.slice(0, 40))}; allowed: an integer from 1 to ${MAX_PARTITIONS}, the gateways' --log-partitions (or leave it out: the count is read from the deployment)`);
  return n;
}

function intFlag(name: string, text: string | undefined, min: number, max: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^[0-9]+$/.test(text) || !Number.isSafeInteger(n) || n < min || n > max) throw bad(`invalid --${name} ${JSON.stringify(text.slice(0, 40))}; allowed: an integer from ${min} to ${max}`);
  return n;
}

/** Runs one tether-admin command; resolves with the exit status (0, 1, 2). */
export async function runAdmin(argv: readonly string[], io: AdminIo): Promise<number> {
  let parsed: Parsed | 'help';
  const wantsJson = argv.includes('--json');
  try {
    parsed = parseAdminArgs(argv);
  } catch (err) {
    return fail(io, wantsJson, err);
  }
  if (parsed === 'help') {
    io.stdout(adminHelp());
    return 0;
  }
  let operator: Operator | undefined;
  try {
    const { command, arg, flags, json, rebalance } = parsed;
    const state = flags.state;
    if (state !== undefined && !['active', 'closed', 'expired'].includes(state)) throw bad(`invalid --state ${JSON.stringify(state.slice(0, 40))}; allowed: active, closed, expired`);
    if (flags.verdict !== undefined && !/^[a-z_]{1,32}$/.test(flags.verdict)) throw bad(`invalid --verdict ${JSON.stringify(flags.verdict.slice(0, 40))}; allowed: a verdict such as resumed, truncated, epoch_mismatch, diverged, ahead, abandoned, unknown_session, malformed`);
    const status = flags.status === undefined ? undefined : taskStatus(flags.status);
    if (flags.principal !== undefined && !isPrincipalFilter(flags.principal)) throw bad(`invalid --principal (not shown); allowed: ${PRINCIPAL_FILTER_ALLOWED}`);
    const limit = intFlag('limit', flags.limit, 1, 10_000);
    const timeoutMs = intFlag('timeout', flags.timeout, 1, 600_000);
    operator = await openOperator(flags, io);
    const print = (value: unknown, text: () => string): void => io.stdout(json ? `${JSON.stringify(value, null, 2)}\n` : text());
    switch (command) {
      case 'sessions': {
        const filter: SessionFilter = { ...(flags.verdict === undefined ? {} : { verdict: flags.verdict }), ...(state === undefined ? {} : { state }), ...(flags.route === undefined ? {} : { route: flags.route }), ...(flags.principal === undefined ? {} : { principal: flags.principal }), ...(limit === undefined ? {} : { limit }) };
        const rows = await operator.listSessions(filter);
        print(rows, () => formatSessions(rows, Date.now()));
        return 0;
      }
      case 'show': {
        const timeline = await operator.readTimeline(arg!);
        if (timeline === undefined) throw new InspectError(InspectErrorCode.sessionNotFound, `no session with tag ${arg!} in ${operator.describe} (closed sessions stay visible until the log's max_age)`);
        print(timeline, () => formatTimeline(timeline, Date.now()));
        return 0;
      }
      case 'verify': {
        const checks = await operator.checkChains(arg!);
        const ok = checks.every((c) => c.ok);
        print({ tag: arg, ok, streams: checks }, () => formatChecks(arg!, checks));
        return ok ? 0 : 1;
      }
      case 'close': {
        const outcome = await operator.closeSession(arg!);
        print(outcome, () => `${outcome.tag}: ${outcome.closed ? 'closed on every instance' : 'was not active; its events were purged again'}\n`);
        return 0;
      }
      case 'drain': {
        const answer = await operator.drainInstance(arg!, timeoutMs);
        print(answer, () => `${answer.instance}: ${answer.ok ? answer.detail ?? 'draining' : `refused (${answer.detail ?? 'no reason'})`}\n`);
        return answer.ok ? 0 : 1;
      }
      case 'tasks': {
        const filter: TaskFilter = { ...(status === undefined ? {} : { status }), ...(flags.principal === undefined ? {} : { principal: flags.principal }), ...(limit === undefined ? {} : { limit }) };
        const list = await operator.listTasks(filter);
        print(list, () => formatTasks(list, Date.now()));
        return 0;
      }
      case 'task': {
        const task = await operator.readTask(arg!);
        print(task, () => formatTask(task, Date.now()));
        return 0;
      }
      case 'partitions': {
        if (!rebalance) {
          const partitions = await operator.listPartitions();
          print(partitions, () => formatPartitions(partitions));
          return 0;
        }
        const result = await operator.rebalancePartitions();
        print(result, () => formatRebalance(result));
        return result.moves.every((m) => m.outcome === 'moved') ? 0 : 1;
      }
    }
    return 2;
  } catch (err) {
    return fail(io, parsed.json, err);
  } finally {
    await operator?.close();
  }
}

/** NATS by default; a session-log service's operator API with `--log grpc://` (then `--nats` and `--namespace` do not apply). */
async function openOperator(flags: Partial<Record<ValueFlag, string>>, io: AdminIo): Promise<Operator> {
  let log;
  try {
    log = grpcLog(flags.log ?? '', flags['log-token'] ?? (flags.log === undefined ? '' : (io.env['TETHER_OPERATOR_TOKEN'] ?? '')), flags['log-token-file'] ?? '', io.readFile ?? ((path) => readFileSync(path, 'utf8')));
  } catch (err) {
    throw err instanceof ConfigError ? bad(err.message) : err;
  }
  if (log !== undefined) {
    if (flags.nats !== undefined || flags.namespace !== undefined || flags['log-partitions'] !== undefined) throw bad('--nats, --namespace and --log-partitions do not apply with --log: the session-log service reads its own log');
    return openGrpcOperator(log);
  }
  const envPartitions = io.env['TETHER_LOG_PARTITIONS'];
  const partitions =
    flags['log-partitions'] !== undefined ? partitionCount(flags['log-partitions'], '--log-partitions') : envPartitions === undefined || envPartitions === '' ? undefined : partitionCount(envPartitions, 'TETHER_LOG_PARTITIONS');
  return openNatsOperator({ servers: flags.nats ?? io.env['TETHER_NATS_URL'] ?? 'nats://127.0.0.1:4222', namespace: flags.namespace ?? io.env['TETHER_NAMESPACE'] ?? '', ...(partitions === undefined ? {} : { partitions }) });
}

function fail(io: AdminIo, json: boolean, err: unknown): number {
  const code = isInspectError(err) ? err.code : 'internal';
  // A read error can name a subject, and a subject holds the raw session id.
  const message = scrub(err instanceof Error ? err.message : String(err));
  io.stderr(`tether-admin: ${message}\n`);
  if (json) io.stdout(`${JSON.stringify({ error: { code, message } })}\n`);
  return isInspectError(err, InspectErrorCode.invalidArgument) ? 2 : 1;
}
