/**
 * Local error codes of the test kit. Match on `err.code`, never on messages.
 */
export const TestingErrorCodes = {
  /** No usable nats-server binary (NATS_SERVER_BIN bad, or scripts/nats-server.sh found or fetched none). */
  NatsServerNotFound: 'nats_server_not_found',
  /** The nats-server found (NATS_SERVER_BIN, or what the script printed) is older than 2.11. */
  NatsServerTooOld: 'nats_server_too_old',
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

/** How to get a current server; Debian 12's package (2.9.10) is too old, so never `apt-get install`. */
const HOW_TO_GET =
  'Get nats-server 2.11 or later: `bash scripts/nats-server.sh current` finds or fetches one ' +
  "(Debian unstable's package, into .tether/nats-server/), or download it from " +
  'https://github.com/nats-io/nats-server/releases and set NATS_SERVER_BIN=/path/to/nats-server.';

/** Thrown by `findNatsServerBinary()`; the message says how to get one. */
export class NatsServerNotFoundError extends TestingError {
  /** What was tried, in order (NATS_SERVER_BIN, or scripts/nats-server.sh). */
  readonly searched: readonly string[];

  constructor(reason: string, searched: readonly string[]) {
    super(TestingErrorCodes.NatsServerNotFound, `${reason}. ${HOW_TO_GET}`);
    this.name = 'NatsServerNotFoundError';
    this.searched = searched;
  }
}

/**
 * Thrown by `findNatsServerBinary()` for a server older than Tether's floor
 * (2.11): tests never run on one by accident.
 */
export class NatsServerTooOldError extends TestingError {
  readonly bin: string;
  /** As the binary reports it, e.g. `2.9.10`. */
  readonly version: string;
  /** `2.11`. */
  readonly minimum: string;

  constructor(fields: { bin: string; version: string; minimum: string; source: string }) {
    super(
      TestingErrorCodes.NatsServerTooOld,
      `${fields.source} is nats-server ${fields.version} (${fields.bin}): Tether needs ${fields.minimum} or later ` +
        '(a 2.9.10 cluster lost acknowledged events: docs/reliability.md, finding 5). ' +
        `Unset NATS_SERVER_BIN to get the current one from scripts/nats-server.sh, or point it at one. ${HOW_TO_GET}`,
    );
    this.name = 'NatsServerTooOldError';
    this.bin = fields.bin;
    this.version = fields.version;
    this.minimum = fields.minimum;
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

export function isNatsServerTooOld(err: unknown): err is NatsServerTooOldError {
  return err instanceof TestingError && err.code === TestingErrorCodes.NatsServerTooOld;
}
