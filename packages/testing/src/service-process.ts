import { LineTail, spawnTracked, type SpawnedChild } from './children.js';
import { ServiceProcessStartError, TestingErrorCodes } from './errors.js';

/**
 * Decides which stdout line means "ready". A RegExp is tested against the raw
 * line; a function is called for lines that parse as a JSON object (pino logs),
 * with the raw line second.
 */
// `any` on purpose: tests read fields of log lines without ceremony (`(o) => o.msg === 'listening'`).
export type ReadyLineMatcher = RegExp | ((json: Record<string, any>, line: string) => boolean);

/** Options of {@link startServiceProcess}. */
export interface ServiceProcessOptions {
  /** Executable, e.g. `process.execPath`. */
  command: string;
  args: readonly string[];
  /** Added to (and overriding) our own environment. */
  env?: Record<string, string>;
  cwd?: string;
  /** The stdout line that says the service is ready. */
  readyLine: ReadyLineMatcher;
  /** Default 15000. */
  readyTimeoutMs?: number;
  /** Names the process in errors, e.g. `gateway-a`. */
  name: string;
}

export interface ExitStatus {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

/** A child process that printed its ready line. */
export interface ServiceProcess {
  readonly name: string;
  readonly pid: number;
  /** The `port` field of the ready line if it was JSON with a numeric `port`, or a regex's `(?<port>...)` group. */
  readonly port: number | undefined;
  /** The ready line, parsed if it was JSON. */
  readonly readyJson: Record<string, unknown> | undefined;
  /** The last 500 stdout lines, oldest first (a copy). */
  readonly stdoutLines: string[];
  /** Those of {@link stdoutLines} that parse as JSON objects. */
  readonly stdoutJson: Record<string, unknown>[];
  /** The last 200 stderr lines. */
  readonly stderrLines: string[];
  /** Resolves once the process has exited; never rejects. */
  readonly exited: Promise<ExitStatus>;
  /**
   * Resolves with the first stdout line from now on (or among the buffered
   * ones, with `{ includePast: true }`) that matches; rejects after
   * `timeoutMs` (default 10000) or when the process exits first.
   */
  waitForLine(match: ReadyLineMatcher, opts?: { timeoutMs?: number; includePast?: boolean }): Promise<string>;
  /** Sends `signal` (default SIGTERM) and waits for exit; SIGKILL after `timeoutMs` (default 10000). No-op once exited. */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<ExitStatus>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

const STDOUT_LINES = 500;
const STDERR_LINES = 200;

interface LineWaiter {
  readonly match: ReadyLineMatcher;
  readonly done: (line: string) => void;
}

/**
 * Spawns a service (unref'd, SIGKILLed if the test process exits) and resolves
 * once it prints a line that matches `readyLine`.
 *
 * @throws ServiceProcessStartError `service_start_failed` (spawn failed or it
 *   exited first) | `service_ready_timeout` (then it is SIGKILLed); the error
 *   carries the exit status and both output tails.
 */
export async function startServiceProcess(opts: ServiceProcessOptions): Promise<ServiceProcess> {
  const readyTimeoutMs = opts.readyTimeoutMs ?? 15_000;
  const env = opts.env === undefined ? undefined : { ...process.env, ...opts.env };
  const proc = spawnTracked(opts.command, opts.args, STDERR_LINES, {
    pipeStdout: true,
    ...(env === undefined ? {} : { env }),
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
  });
  const stdout = new StdoutLines(proc);

  const fail = async (code: typeof TestingErrorCodes.ServiceStartFailed | typeof TestingErrorCodes.ServiceReadyTimeout, message: string, cause?: unknown) => {
    proc.child.kill('SIGKILL');
    const status = await proc.exited;
    await proc.drained;
    return new ServiceProcessStartError(code, message, {
      service: opts.name,
      command: opts.command,
      args: opts.args,
      pid: proc.pid,
      exitCode: status.code,
      exitSignal: status.signal,
      stdoutTail: stdout.tail.lines(),
      stderrTail: proc.tail.lines(),
      cause,
    });
  };

  if (proc.pid === undefined) {
    const err = await proc.spawnError;
    throw await fail(TestingErrorCodes.ServiceStartFailed, `${opts.name}: could not spawn ${opts.command}: ${err.message}`, err);
  }
  const pid = proc.pid;

  let readyLine: string;
  try {
    readyLine = await stdout.waitFor(opts.readyLine, readyTimeoutMs, true);
  } catch (err) {
    if (err instanceof ExitedFirst) {
      throw await fail(TestingErrorCodes.ServiceStartFailed, `${opts.name} (pid ${pid}) exited before its ready line`);
    }
    throw await fail(TestingErrorCodes.ServiceReadyTimeout, `${opts.name} (pid ${pid}) printed no ready line within ${readyTimeoutMs}ms; SIGKILLed it`);
  }
  const readyJson = parseJsonObject(readyLine);
  const port = portOf(readyLine, readyJson, opts.readyLine);

  let stopping: Promise<ExitStatus> | undefined;
  const stop = (signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 10_000): Promise<ExitStatus> => {
    if (proc.hasExited()) return proc.exited;
    if (signal === 'SIGKILL') {
      proc.child.kill('SIGKILL');
      return proc.exited;
    }
    stopping ??= (async () => {
      proc.child.kill(signal);
      // A service that hangs in its drain must not hang the suite.
      const timer = setTimeout(() => proc.child.kill('SIGKILL'), timeoutMs);
      const status = await proc.exited;
      clearTimeout(timer);
      await proc.drained;
      return status;
    })();
    return stopping;
  };

  return {
    name: opts.name,
    pid,
    port,
    readyJson,
    get stdoutLines() {
      return stdout.tail.lines();
    },
    get stdoutJson() {
      return stdout.tail.lines().flatMap((line): Record<string, unknown>[] => {
        const json = parseJsonObject(line);
        return json === undefined ? [] : [json];
      });
    },
    get stderrLines() {
      return proc.tail.lines();
    },
    exited: proc.exited,
    waitForLine: (match, waitOpts = {}) => stdout.waitFor(match, waitOpts.timeoutMs ?? 10_000, waitOpts.includePast ?? false),
    stop,
    async kill() {
      await stop('SIGKILL');
      await proc.drained;
    },
  };
}

class ExitedFirst extends Error {}

/** Splits stdout into lines, keeps a tail and serves waiters. */
class StdoutLines {
  readonly tail = new LineTail(STDOUT_LINES);
  readonly #waiters = new Set<LineWaiter>();
  readonly #proc: SpawnedChild;
  #partial = '';

  constructor(proc: SpawnedChild) {
    this.#proc = proc;
    const out = proc.child.stdout;
    out?.setEncoding('utf8');
    out?.on('data', (chunk: string) => {
      this.tail.push(chunk);
      const parts = (this.#partial + chunk).split('\n');
      this.#partial = parts.pop() ?? '';
      for (const part of parts) this.#line(part.replace(/\r$/, ''));
    });
  }

  waitFor(match: ReadyLineMatcher, timeoutMs: number, includePast: boolean): Promise<string> {
    if (includePast) {
      const past = this.tail.lines().find((line) => matches(match, line));
      if (past !== undefined) return Promise.resolve(past);
    }
    if (this.#proc.hasExited()) return Promise.reject(new ExitedFirst('the process has exited'));
    return new Promise<string>((resolveLine, reject) => {
      const waiter: LineWaiter = {
        match,
        done: (line) => {
          settle();
          resolveLine(line);
        },
      };
      const timer = setTimeout(() => {
        settle();
        reject(new Error(`no matching stdout line within ${timeoutMs}ms`));
      }, timeoutMs);
      const settle = () => {
        clearTimeout(timer);
        this.#waiters.delete(waiter);
      };
      this.#waiters.add(waiter);
      // The exit event can come before the last stdout chunk: judge after the pipe drained.
      void this.#proc.exited.then(() => this.#proc.drained).then(() => {
        if (!this.#waiters.has(waiter)) return;
        settle();
        reject(new ExitedFirst('the process exited first'));
      });
    });
  }

  #line(line: string): void {
    for (const waiter of [...this.#waiters]) if (matches(waiter.match, line)) waiter.done(line);
  }
}

function matches(match: ReadyLineMatcher, line: string): boolean {
  if (match instanceof RegExp) {
    match.lastIndex = 0;
    return match.test(line);
  }
  const json = parseJsonObject(line);
  return json !== undefined && match(json, line);
}

function parseJsonObject(line: string): Record<string, unknown> | undefined {
  const trimmed = line.trim();
  if (!trimmed.startsWith('{')) return undefined;
  try {
    const parsed: unknown = JSON.parse(trimmed);
    return typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function portOf(line: string, json: Record<string, unknown> | undefined, match: ReadyLineMatcher): number | undefined {
  const fromJson = json?.['port'];
  if (typeof fromJson === 'number' && Number.isInteger(fromJson) && fromJson > 0) return fromJson;
  if (match instanceof RegExp) {
    match.lastIndex = 0;
    const group = match.exec(line)?.groups?.['port'];
    const port = Number(group);
    if (group !== undefined && Number.isInteger(port) && port > 0) return port;
  }
  return undefined;
}
