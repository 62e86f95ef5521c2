import { SpanStatusCode } from '@opentelemetry/api';
import type { Tracer } from '@opentelemetry/api';
import type { TetherMetrics } from '@tether/telemetry';
import { isSessionLogError, isTerminal, samePrincipal, SessionLogErrorCode } from '@tether/session-log';
import type { JsonObject, StoredTask, TaskEvents, TaskRecord, WriterState } from '@tether/session-log';
import type { Logger } from 'pino';
import type { TasksConfig, Route } from '../config.js';
import type { TaskPort } from '../log/log-port.js';
import { CANCELLED, failed, omit, settled, stateOnlyRound } from './outcome.js';
import { TaskOwners } from './task-owners.js';
import { ToolCatalog } from './tool-catalog.js';
import { startToolCall } from './upstream-call.js';
import type { ToolCall } from './upstream-call.js';
import { RpcCode, withoutTasksDeclaration } from './wire.js';

export interface EdgeTasksOptions {
  readonly config: TasksConfig;
  readonly table: TaskPort;
  /** This process's writer id: the runner named in the tasks it runs, and its presence. */
  readonly writerId: string;
  /** `--instance-id`, recorded beside the runner for operators. */
  readonly instanceId: string;
  readonly routes: readonly Route[];
  /** Process liveness of another instance (`gone`: no process holds its presence). */
  readonly probe: (writerId: string) => Promise<WriterState>;
  readonly logger: Logger;
  readonly metrics: TetherMetrics;
  readonly tracer: Tracer;
  /** Each task's notifications, recorded for `tasks/stream` (`--experimental-task-streams`). */
  readonly events?: TaskEvents;
}

/** What starts an upstream call of a task: its first run, an answered input round, a rerun after a lost runner. */
export type RunPhase = 'run' | 'input_round' | 'rerun';

/** A task as one caller may see it. */
export type Visible =
  | { readonly t: 'visible'; readonly stored: StoredTask }
  /** Unknown, malformed, gone, another principal's or another route's: one answer for all. */
  | { readonly t: 'absent' }
  | { readonly t: 'expired' };

/** Bytes of an upstream answer kept for passing back before a call becomes a task. */
const MAX_RAW_BYTES = 4 * 1024 * 1024;
/** Backoff of an outcome the store could not take yet. */
const STORE_RETRY_FIRST_MS = 100;
const STORE_RETRY_MAX_MS = 2_000;
/** How long a liveness answer about another instance is reused. */
const PROBE_CACHE_MS = 200;
/**
 * An upstream's input round that asks nothing and carries only
 * `requestState` (SEP-2322's request-state-only leg: "call me again with
 * this") is followed by the runner itself, after this pause (the official
 * SDK's own pacing), at most MAX_STATE_LEGS times per run: the task stays
 * `working`, and the client sees nothing to answer.
 */
const STATE_LEG_PACING_MS = 250;
const MAX_STATE_LEGS = 100;

/**
 * The gateway's tasks (docs/design.md, "Tasks at the edge"): which calls
 * run here, settling each when its upstream call ends, and the decisions
 * any instance takes on a task it reads (a lost runner, a cancel, an input
 * round answered). Every change is a compare-and-set on the task's record,
 * so two instances deciding at once store one outcome.
 */
export class EdgeTasks {
  readonly config: TasksConfig;
  readonly #table: TaskPort;
  readonly #writerId: string;
  readonly instanceId: string;
  readonly #probe: EdgeTasksOptions['probe'];
  readonly #logger: Logger;
  readonly #metrics: TetherMetrics;
  readonly #tracer: Tracer;
  readonly #catalogs = new Map<string, ToolCatalog>();
  /** Upstream calls this process runs, by task id. */
  readonly #running = new Map<string, ToolCall>();
  /** Each running call's settle (its outcome stored, or given up), for a drain to wait on. */
  readonly #settling = new Set<Promise<unknown>>();
  readonly #alive = new Map<string, { state: WriterState; atMs: number }>();
  readonly #stopCancels: () => void;
  readonly events: TaskEvents | undefined;
  /** Which routes' upstreams run tasks themselves (`tasks/upstream-owned.ts` routes those). */
  readonly owners: TaskOwners;
  /** Set by `drain`/`close`: calls aborted from now on were stopped by us, not by the upstream. */
  #stopping = false;

  constructor(options: EdgeTasksOptions) {
    this.config = options.config;
    this.#table = options.table;
    this.#writerId = options.writerId;
    this.instanceId = options.instanceId;
    this.#probe = options.probe;
    this.#logger = options.logger;
    this.#metrics = options.metrics;
    this.#tracer = options.tracer;
    this.events = options.events;
    this.owners = new TaskOwners({ routes: options.routes, refreshMs: options.config.toolRefreshMs, logger: options.logger });
    for (const route of options.routes) {
      this.#catalogs.set(route.path, new ToolCatalog({
        upstreamUrl: route.upstreams[0]!,
        refreshMs: options.config.toolRefreshMs,
        taskTools: options.config.tools,
        noTaskTools: options.config.noTools,
        listing: options.config.toolList,
        logger: options.logger,
      }));
    }
    this.#stopCancels = this.#table.serveCancels(this.#writerId, (taskId) => this.#abortRunning(taskId));
  }

  get table(): TaskPort {
    return this.#table;
  }

  get writerId(): string {
    return this.#writerId;
  }

  catalog(routePath: string): ToolCatalog | undefined {
    return this.#catalogs.get(routePath);
  }

  /** Upstream calls running here now. */
  get running(): number {
    return this.#running.size;
  }

  /** Starts an upstream `tools/call` that may become a task. */
  startCall(url: string, headers: Record<string, string>, body: Buffer, id: unknown): ToolCall {
    return startToolCall({ url, headers, body, id, maxRawBytes: MAX_RAW_BYTES, errors: this.#metrics.upstreamErrors });
  }

  /** Counts a task event (`tether.tasks`). */
  count(event: string): void {
    this.#metrics.tasks.add(1, { event });
  }

  /** The task if `principal` may see it on `route`. */
  async find(taskId: string, principal: string, routePath: string): Promise<Visible> {
    const stored = await this.#table.read(taskId);
    // A route record of an upstream-owned task is not a task the gateway runs.
    if (stored === undefined || stored.record.upstream !== undefined || !samePrincipal(stored.record.principal, principal) || stored.record.route !== routePath) return { t: 'absent' };
    if (Date.now() >= stored.record.createdAtMs + stored.record.ttlMs) return { t: 'expired' };
    return { t: 'visible', stored };
  }

  /**
   * Runs `call` as the task's runner (this process is named in the record):
   * when it ends, the outcome is stored unless something else settled the
   * task first. A call still running when the task expires is closed.
   */
  run(record: TaskRecord, first: ToolCall, phase: RunPhase, again?: (extra: JsonObject) => ToolCall): void {
    const { taskId } = record;
    let call = first;
    this.#running.set(taskId, call);
    this.#metrics.tasksRunning.add(1);
    // A child of the request that started it (the call, the tasks/update, the poll that found the runner gone): the trace links them.
    const span = this.#tracer.startSpan(`tether.task.${phase}`, { attributes: { 'tether.task': tag(taskId), 'mcp.tool': record.tool, 'tether.task.attempt': record.attempts } });
    let expired = false;
    const expiry = setTimeout(() => {
      expired = true;
      call.abort('the task expired before the upstream answered');
    }, Math.max(0, record.createdAtMs + record.ttlMs - Date.now()));
    expiry.unref();
    const recorder = this.events?.writer(taskId);
    if (recorder !== undefined) call.setNotificationSink((message) => void recorder.append(message));
    const mine = (current: TaskRecord): boolean => current.status === 'working' && current.runner === this.#writerId;
    const settling: Promise<unknown> = call.outcome
      .then(async (answered) => {
        let outcome = answered;
        // Request-state-only legs: the upstream wants the call again with its state, not the client's input.
        for (let legs = 0, state = stateOnlyRound(outcome); state !== undefined && again !== undefined && legs < MAX_STATE_LEGS && !expired; legs += 1, state = stateOnlyRound(outcome)) {
          const kept = await this.#storeUntil(record, () => this.#table.update(taskId, (current) => (mine(current) ? { ...current, requestState: state!, updatedAtMs: Date.now() } : undefined)));
          // Cancelled, or settled elsewhere meanwhile: this runner has nothing more to say.
          if (kept === undefined || this.#running.get(taskId) !== call) return undefined;
          await sleep(STATE_LEG_PACING_MS);
          call = again({ requestState: state });
          this.#running.set(taskId, call);
          if (recorder !== undefined) call.setNotificationSink((message) => void recorder.append(message));
          outcome = await call.outcome;
        }
        // Stopping with --task-retry idempotent: store nothing, so the first reader after this process is gone reruns the call.
        if (outcome.kind === 'lost' && outcome.aborted && this.#stopping && (await this.#mayRunAgain(record, {}))) return undefined;
        try {
          // The call stays "running here" while its outcome waits for the store, so readers elsewhere keep answering `working`, not lost.
          return await this.#storeUntil(record, () => this.#table.update(taskId, (current) => (mine(current) ? settled(current, outcome, Date.now()) : undefined)));
        } catch (err) {
          if (!isSessionLogError(err, SessionLogErrorCode.payloadTooLarge)) throw err;
          // The outcome does not fit one message: the task fails, saying so, rather than stay `working` until its TTL.
          const size = outcome.kind === 'answer' ? Buffer.byteLength(JSON.stringify(outcome.answer)) : 0;
          return this.#table.update(taskId, (current) =>
            mine(current)
              ? failed(
                  omit({ ...current, updatedAtMs: Date.now() }, 'inputRequests', 'inputResponses'),
                  { code: RpcCode.internal, message: `the upstream's answer (${size} bytes) is too large for the task store`, data: { reason: 'result_too_large', bytes: size } },
                  `the upstream's answer is too large for the task store (${size} bytes)`,
                )
              : undefined,
          );
        }
      })
      .then((stored) => {
        if (stored === undefined) return;
        const { status } = stored.record;
        span.setAttribute('tether.task.status', status);
        if (status === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: stored.record.statusMessage ?? 'failed' });
        this.count(expired ? 'expired' : status);
        this.#logger.debug({ task: tag(taskId), status }, 'task settled');
        // After the last notification of a settled task: a stream reader ends there (an input round's next call goes on after it).
        if (recorder !== undefined && isTerminal(status)) void recorder.append(endMarker(status), true);
      })
      .catch((err: unknown) => {
        span.setStatus({ code: SpanStatusCode.ERROR, message: 'outcome not stored' });
        this.#logger.warn({ task: tag(taskId), err: String(err) }, 'could not store a task outcome before the task expired (or the gateway stopped)');
      })
      .finally(() => {
        clearTimeout(expiry);
        this.#running.delete(taskId);
        this.#settling.delete(settling);
        this.#metrics.tasksRunning.add(-1);
        span.end();
      });
    this.#settling.add(settling);
  }

  /**
   * Retries `write` while the store is unavailable (a leader election, NATS
   * cut off), with backoff, until it succeeds, the task expires or this
   * process stops: an upstream's answer is never dropped for a passing
   * outage (chaos finding 13).
   */
  async #storeUntil<T>(record: TaskRecord, write: () => Promise<T>): Promise<T> {
    for (let delay = STORE_RETRY_FIRST_MS; ; delay = Math.min(delay * 2, STORE_RETRY_MAX_MS)) {
      try {
        return await write();
      } catch (err) {
        const retryable = isSessionLogError(err, SessionLogErrorCode.logUnavailable);
        if (!retryable || this.#stopping || Date.now() + delay >= record.createdAtMs + record.ttlMs) throw err;
        this.#logger.debug({ task: tag(record.taskId), err: String(err) }, 'task outcome not stored yet; retrying');
        await sleep(delay);
      }
    }
  }

  /**
   * What a reader must know before answering from a `working` record: is
   * its runner still alive? A runner gone is settled here, `failed` with a
   * named error, or, with `--task-retry idempotent` and an idempotent tool,
   * run again by this instance with the reader's credentials.
   */
  async checkRunner(stored: StoredTask, callerHeaders: Readonly<Record<string, string>>, upstreamUrl: string): Promise<StoredTask> {
    return (await this.#settleIfLost(stored, callerHeaders, upstreamUrl, false)).stored;
  }

  /**
   * The sweeper's path (`sweeper.ts`): the reader's settle, for a task whose
   * runner is another instance, without a caller. A task a reader could
   * rerun is left to that reader (`left`): a rerun needs the caller's
   * credentials, which no instance keeps for a task nobody asks about.
   * `settled`: this call stored `failed` (another instance settling it
   * first leaves it `unchanged`).
   */
  async sweep(stored: StoredTask): Promise<'settled' | 'left' | 'unchanged'> {
    const { record } = stored;
    if (record.upstream !== undefined || record.status !== 'working' || record.runner === null || record.runner === this.#writerId) return 'unchanged';
    if (Date.now() >= record.createdAtMs + record.ttlMs) return 'unchanged';
    if ((await this.#liveness(record.runner)) !== 'gone') return 'unchanged';
    if (this.#readerMayRerun(record)) return 'left';
    return (await this.#settleIfLost(stored, {}, '', true)).wrote ? 'settled' : 'unchanged';
  }

  /** Whether a reader finding this runner gone might rerun the call (the tool list not yet known to say no counts as might). */
  #readerMayRerun(record: TaskRecord): boolean {
    if (this.config.retry !== 'idempotent') return false;
    return record.idempotent || this.#catalogs.get(record.route)?.known(record.tool)?.idempotent !== false;
  }

  /**
   * A `working` task whose runner is gone: settled `failed` (or taken over
   * for a rerun, never when `sweeping`). Every instance may decide at once;
   * the compare-and-set on the runner lets one write, and `wrote` says
   * whether it was this one (so each loss is counted and logged once).
   */
  async #settleIfLost(stored: StoredTask, callerHeaders: Readonly<Record<string, string>>, upstreamUrl: string, sweeping: boolean): Promise<{ stored: StoredTask; wrote: boolean }> {
    const { record } = stored;
    const unchanged = { stored, wrote: false };
    if (record.status !== 'working' || record.runner === null) return unchanged;
    if (record.runner === this.#writerId) {
      if (this.#running.has(record.taskId)) return unchanged;
    } else if ((await this.#liveness(record.runner)) !== 'gone') {
      return unchanged;
    }
    const dead = record.runner;
    // The record names this process, which runs no such call: its outcome was never stored (the store stayed out until expiry, or this process stopped).
    const ownLoss = dead === this.#writerId;
    const rerun = !sweeping && (await this.#mayRunAgain(record, callerHeaders));
    let wrote = false;
    const next = await this.#table.update(record.taskId, (current) => {
      wrote = false;
      if (current.status !== 'working' || current.runner !== dead) return undefined;
      wrote = true;
      const now = Date.now();
      if (rerun) return { ...current, runner: this.#writerId, runnerInstance: this.instanceId, attempts: current.attempts + 1, reruns: current.reruns + 1, updatedAtMs: now };
      if (ownLoss) {
        return failed(
          { ...current, updatedAtMs: now },
          { code: RpcCode.internal, message: `the gateway running this task could not store the call's outcome; it is unknown and the call was not run again`, data: { reason: 'outcome_not_stored', runner: dead } },
          'the call\'s outcome could not be stored',
        );
      }
      return failed(
        { ...current, updatedAtMs: now },
        {
          code: RpcCode.internal,
          message: `the gateway instance running this task stopped before the upstream answered; the call's outcome is unknown and it was not run again`,
          data: { reason: 'runner_lost', runner: dead },
        },
        'the gateway instance running this task stopped before the upstream answered',
      );
    });
    if (next === undefined) return unchanged;
    if (wrote && rerun) {
      this.#logger.info({ task: tag(record.taskId), attempt: next.record.attempts }, 'task runner lost: running the idempotent call again');
      this.count('rerun');
      this.run(next.record, this.#callAgain(next.record, callerHeaders, upstreamUrl, {}), 'rerun', (extra) => this.#callAgain(next.record, callerHeaders, upstreamUrl, extra));
    } else if (wrote) {
      this.count(sweeping ? 'runner_lost_swept' : 'runner_lost');
      if (this.events !== undefined) void this.events.writer(record.taskId).append(endMarker('failed'), true);
      this.#logger.info({ task: tag(record.taskId), swept: sweeping }, 'task runner lost: settled failed');
    }
    return { stored: next, wrote };
  }

  /** Liveness of another instance's writer, as the settle decides it (cached 200 ms). */
  runnerState(writerId: string): Promise<WriterState> {
    return this.#liveness(writerId);
  }

  /**
   * Whether a call whose runner is gone may be run again: `--task-retry
   * idempotent` and a tool the upstream annotates `idempotentHint`. The
   * record's flag is what the tool list said when the task was created, and
   * a call never waits for the list, so it may have said nothing yet; then
   * the list is asked now (this rare path may wait for it, once per route).
   */
  async #mayRunAgain(record: TaskRecord, callerHeaders: Readonly<Record<string, string>>): Promise<boolean> {
    if (this.config.retry !== 'idempotent') return false;
    if (record.idempotent) return true;
    return (await this.#catalogs.get(record.route)?.lookup(record.tool, callerHeaders))?.idempotent === true;
  }

  /**
   * `tasks/cancel`: a task waiting for input or whose runner is gone is
   * settled `cancelled` here; a running one is asked of its runner, which
   * closes the upstream call and settles it. A settled task is left as it is.
   */
  async cancel(taskId: string): Promise<void> {
    for (let attempt = 0; attempt < 4; attempt += 1) {
      const stored = await this.#table.read(taskId);
      if (stored === undefined || isTerminal(stored.record.status)) return;
      const { runner } = stored.record;
      if (stored.record.status === 'working' && runner !== null) {
        const answer = runner === this.#writerId ? (this.#abortRunning(taskId) ? 'accepted' : 'not_running') : await this.#table.requestCancel(runner, taskId, 500);
        if (answer === 'accepted' || answer === 'silent') return;
      }
      // Nothing runs it (waiting for input, or its runner is gone): settle it here, unless it changed meanwhile.
      const done = await this.#table.update(taskId, (current) =>
        isTerminal(current.status) || current.runner !== runner ? undefined : { ...omit(current, 'inputRequests', 'inputResponses'), status: 'cancelled', statusMessage: CANCELLED, runner: null, updatedAtMs: Date.now() },
      );
      if (done === undefined || done.record.status === 'cancelled' || isTerminal(done.record.status)) return;
    }
  }

  /**
   * `tasks/update`: stores the answers to outstanding input requests (others
   * are ignored, as SEP-2663 says). When none is left, this instance takes
   * the task and calls the upstream again with the answers and the
   * upstream's `requestState`: MRTR is stateless, so any instance can.
   */
  async answerInput(taskId: string, inputResponses: JsonObject, callerHeaders: Readonly<Record<string, string>>, upstreamUrl: string): Promise<void> {
    let tookIt = false;
    const stored = await this.#table.update(taskId, (current) => {
      tookIt = false;
      if (current.status !== 'input_required') return undefined;
      // Null prototypes, own keys only: a client's key `__proto__` or `constructor` is a key like any other.
      const outstanding: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, current.inputRequests);
      const answered: Record<string, unknown> = Object.assign(Object.create(null) as Record<string, unknown>, current.inputResponses);
      let accepted = 0;
      for (const [key, response] of Object.entries(inputResponses)) {
        if (!Object.hasOwn(outstanding, key)) continue;
        answered[key] = response;
        delete outstanding[key];
        accepted += 1;
      }
      if (accepted === 0) return undefined;
      const now = Date.now();
      if (Object.keys(outstanding).length > 0) return { ...current, inputRequests: outstanding, inputResponses: answered, updatedAtMs: now };
      tookIt = true;
      return {
        ...omit(current, 'inputRequests', 'statusMessage'),
        status: 'working',
        inputResponses: answered,
        runner: this.#writerId,
        runnerInstance: this.instanceId,
        attempts: current.attempts + 1,
        rounds: current.rounds + 1,
        updatedAtMs: now,
      };
    });
    if (stored === undefined || !tookIt) return;
    const { record } = stored;
    const upstreamAnswers: Record<string, unknown> = {};
    for (const [key, response] of Object.entries(record.inputResponses ?? {})) {
      const upstreamKey = record.keyMap !== undefined && Object.hasOwn(record.keyMap, key) ? record.keyMap[key]! : key;
      Object.defineProperty(upstreamAnswers, upstreamKey, { value: response, enumerable: true, writable: true, configurable: true });
    }
    this.run(record, this.#callAgain(record, callerHeaders, upstreamUrl, { inputResponses: upstreamAnswers, ...(record.requestState === undefined ? {} : { requestState: record.requestState }) }), 'input_round', (extra) => this.#callAgain(record, callerHeaders, upstreamUrl, extra));
  }

  /** How a task's call is made again later (a request-state-only leg): with these credentials, at this upstream. */
  againFor(record: TaskRecord, callerHeaders: Readonly<Record<string, string>>, upstreamUrl: string): (extra: JsonObject) => ToolCall {
    return (extra) => this.#callAgain(record, callerHeaders, upstreamUrl, extra);
  }

  /** The task's call made again (an input round answered, or a rerun): its params, the round's additions, this caller's credentials. */
  #callAgain(record: TaskRecord, callerHeaders: Readonly<Record<string, string>>, upstreamUrl: string, extra: JsonObject): ToolCall {
    const id = `tether-task-${record.taskId}-${record.attempts}`;
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { ...withoutTasksDeclaration(record.params), ...extra } }));
    const headers = {
      ...callerHeaders,
      ...record.callHeaders,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-method': 'tools/call',
      'mcp-name': record.tool,
    };
    return this.startCall(upstreamUrl, headers, body, id);
  }

  #abortRunning(taskId: string): boolean {
    const call = this.#running.get(taskId);
    if (call === undefined) return false;
    call.abort(CANCELLED);
    return true;
  }

  async #liveness(writerId: string): Promise<WriterState> {
    const cached = this.#alive.get(writerId);
    if (cached !== undefined && Date.now() - cached.atMs < PROBE_CACHE_MS) return cached.state;
    const state = await this.#probe(writerId);
    if (this.#alive.size > 1_000) this.#alive.clear();
    this.#alive.set(writerId, { state, atMs: Date.now() });
    return state;
  }

  /**
   * SIGTERM: the calls running here may finish into their tasks until
   * `timeoutMs`; the rest are closed and settled `failed` (the gateway
   * stopped), each outcome stored before this resolves (at most 1 s more).
   * Cancels are answered until then.
   */
  async drain(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.#settling.size > 0 && Date.now() < deadline) {
      await Promise.race([Promise.allSettled([...this.#settling]), sleep(deadline - Date.now())]);
    }
    this.close();
    await Promise.race([Promise.allSettled([...this.#settling]), sleep(1_000)]);
  }

  /** Stops answering cancels and closes every upstream call running here (their tasks are settled as their calls end). */
  close(): void {
    this.#stopping = true;
    this.#stopCancels();
    for (const catalog of this.#catalogs.values()) catalog.close();
    for (const call of this.#running.values()) call.abort('the gateway stopped before the upstream answered');
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)).unref());

/** The marker after a call's last recorded notification. */
function endMarker(status: string): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({ status }));
}

/** A task id's first characters, for logs (a task id is a bearer handle: never logged whole). */
export function tag(taskId: string): string {
  return `${taskId.slice(0, 6)}…`;
}
