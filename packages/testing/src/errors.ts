/**
 * Local error codes of the test kit. Match on `err.code`, never on messages.
 */
export const TestingErrorCodes = {
  /** No usable nats-server binary (NATS_SERVER_BIN bad, or nothing on PATH). */
  NatsServerNotFound: 'nats_server_not_found',
  /** The process could not be spawned, or exited before it was ready. */
  NatsServerStartFailed: 'nats_server_start_failed',
  /** The process ran but did not become ready within `readyTimeoutMs`. */
  NatsServerReadyTimeout: 'nats_server_ready_timeout',
  /** `restart()` after `cleanup()`: the server (and maybe its store) is gone. */
  NatsServerDisposed: 'nats_server_disposed',
  /** A cluster did not form (some node failed, or no meta leader in time). */
  NatsClusterStartFailed: 'nats_cluster_start_failed',
  /** A service process could not be spawned, or exited before its ready line. */
  ServiceStartFailed: 'service_start_failed',
  /** A service process ran but printed no ready line within `readyTimeoutMs`. */
  ServiceReadyTimeout: 'service_ready_timeout',
} as const;

export type TestingErrorCode = (typeof TestingErrorCodes)[keyof typeof TestingErrorCodes];

/** Base error of `@tether/testing`: a stable string `code`, `cause` kept. */
export class TestingError extends Error {
  readonly code: TestingErrorCode;

  constructor(code: TestingErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TestingError';
    this.code = code;
  }
}

/** Thrown by `findNatsServerBinary()`; the message says how to install one. */
export class NatsServerNotFoundError extends TestingError {
  /** Where we looked, in order (NATS_SERVER_BIN, then PATH and fallbacks). */
  readonly searched: readonly string[];

  constructor(reason: string, searched: readonly string[]) {
    super(
      TestingErrorCodes.NatsServerNotFound,
      `${reason}. Install nats-server: \`apt-get install -y nats-server\` (Debian/Ubuntu), ` +
        'or download it from https://github.com/nats-io/nats-server/releases, ' +
        'or set NATS_SERVER_BIN=/path/to/nats-server.',
    );
    this.name = 'NatsServerNotFoundError';
    this.searched = searched;
  }
}

/** A nats-server failed to start or to become ready. */
export class NatsServerStartError extends TestingError {
  /** The last lines the server wrote to stderr (its log), oldest first. */
  readonly stderrTail: readonly string[];
  readonly args: readonly string[];
  readonly pid: number | undefined;

  constructor(
    code: TestingErrorCode,
    message: string,
    fields: { stderrTail: readonly string[]; args: readonly string[]; pid: number | undefined; cause?: unknown },
  ) {
    const tail = fields.stderrTail.length > 0 ? `\n--- nats-server stderr (last ${fields.stderrTail.length} lines) ---\n${fields.stderrTail.join('\n')}` : '\n(nats-server wrote nothing to stderr)';
    super(code, `${message}\ncommand: nats-server ${fields.args.join(' ')}${tail}`, fields.cause === undefined ? undefined : { cause: fields.cause });
    this.name = 'NatsServerStartError';
    this.stderrTail = fields.stderrTail;
    this.args = fields.args;
    this.pid = fields.pid;
  }
}

/** A service process (`startServiceProcess`) failed to start or to print its ready line. */
export class ServiceProcessStartError extends TestingError {
  /** The `name` given to `startServiceProcess`. */
  readonly service: string;
  readonly pid: number | undefined;
  /** Exit code and signal if the process exited before it was ready (or was killed after the timeout). */
  readonly exitCode: number | null;
  readonly exitSignal: NodeJS.Signals | null;
  /** Last lines of stdout and stderr, oldest first. */
  readonly stdoutTail: readonly string[];
  readonly stderrTail: readonly string[];

  constructor(
    code: typeof TestingErrorCodes.ServiceStartFailed | typeof TestingErrorCodes.ServiceReadyTimeout,
    message: string,
    fields: {
      service: string;
      command: string;
      args: readonly string[];
      pid: number | undefined;
      exitCode: number | null;
      exitSignal: NodeJS.Signals | null;
      stdoutTail: readonly string[];
      stderrTail: readonly string[];
      cause?: unknown;
    },
  ) {
    const section = (what: string, lines: readonly string[]) =>
      lines.length > 0 ? `\n--- ${what} (last ${lines.length} lines) ---\n${lines.join('\n')}` : `\n(${what}: nothing)`;
    super(
      code,
      `${message}\ncommand: ${fields.command} ${fields.args.join(' ')}` +
        `\nexit: ${fields.exitSignal ?? (fields.exitCode === null ? 'none (never ran)' : `code ${fields.exitCode}`)}` +
        section('stderr', fields.stderrTail.slice(-30)) +
        section('stdout', fields.stdoutTail.slice(-30)),
      fields.cause === undefined ? undefined : { cause: fields.cause },
    );
    this.name = 'ServiceProcessStartError';
    this.service = fields.service;
    this.pid = fields.pid;
    this.exitCode = fields.exitCode;
    this.exitSignal = fields.exitSignal;
    this.stdoutTail = fields.stdoutTail;
    this.stderrTail = fields.stderrTail;
  }
}

export function isTestingError(err: unknown): err is TestingError {
  return err instanceof TestingError;
}

export function isNatsServerNotFound(err: unknown): err is NatsServerNotFoundError {
  return err instanceof TestingError && err.code === TestingErrorCodes.NatsServerNotFound;
}
