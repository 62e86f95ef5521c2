import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { releaseDir, spawnTracked, trackOwnedDir, type SpawnedChild } from './children.js';
import { NatsServerStartError, TestingError, TestingErrorCodes } from './errors.js';
import { findNatsServerBinary } from './find-binary.js';
import { getFreePorts, LOOPBACK, readPortsFile, removePortsFile, takenPort } from './ports.js';
import { healthzProbe, jetStreamApiProbe, pollUntilReady, type Probe } from './readiness.js';
import { natsServerVersion } from './version.js';

/** Options of {@link startNatsServer}. */
export interface NatsServerOptions {
  /**
   * The nats-server binary, run as given (a test may start an old one on
   * purpose, e.g. to see Tether refuse it). Default: {@link findNatsServerBinary}
   * (`$NATS_SERVER_BIN`, else `scripts/nats-server.sh current`; never older than 2.11).
   */
  bin?: string;
  /** Enable JetStream (`-js`). Default true. */
  jetstream?: boolean;
  /** Store dir (`-sd`), also where the ports file goes. Default: a fresh mkdtemp under os.tmpdir(), removed by cleanup(). A dir you pass is never removed. */
  storeDir?: string;
  /** Client port. Default: a free one below the kernel's ephemeral range (`getFreePorts`), pinned for restart(). */
  port?: number;
  /** Appended to the command line, e.g. `['-DV']`. */
  extraArgs?: readonly string[];
  /** Lines of a config file written into the store dir and passed with `-c`, e.g. `['jetstream { sync_interval: always }']`. */
  configLines?: readonly string[];
  /** How long start() and restart() wait for readiness. Default 10000. */
  readyTimeoutMs?: number;
}

/** A real nats-server child process on 127.0.0.1. */
export interface NatsServer {
  /** `nats://127.0.0.1:<port>`. */
  readonly url: string;
  readonly port: number;
  readonly monitorPort: number;
  readonly storeDir: string;
  /** The binary this server runs. */
  readonly bin: string;
  /** Its version as it reports it (`2.15.1`), read once per binary with `--version`. */
  readonly version: string;
  /** Undefined while stopped. */
  readonly pid: number | undefined;
  /** SIGTERM and wait for exit; SIGKILL if still running after 5 s. No-op when stopped. */
  stop(): Promise<void>;
  /** SIGKILL and wait for exit: a crash, as far as the store knows. No-op when stopped. */
  kill(): Promise<void>;
  /**
   * Starts again on the same client port, monitor port and store dir (and
   * cluster routes); stops first if running. Resolves when ready, JetStream
   * included. Rejects `nats_server_disposed` after cleanup(), else
   * `nats_server_start_failed` / `nats_server_ready_timeout`.
   */
  restart(): Promise<void>;
  /**
   * SIGSTOP: the process stays connected but answers nothing, so requests
   * time out while what clients wrote waits in its sockets (acks lost, not
   * messages). `thaw()` (SIGCONT) lets it process them. No-op when stopped.
   */
  freeze(): Promise<void>;
  thaw(): Promise<void>;
  /** Stops if running and removes the store dir if we created it. Idempotent. */
  cleanup(): Promise<void>;
}

const STDERR_TAIL_LINES = 50;
/** First starts tried when a chosen port turns out taken. */
const PORT_ATTEMPTS = 3;
const STOP_GRACE_MS = 5_000;

/** How to launch one server; shared by {@link startNatsServer} and the cluster launcher. */
export interface LaunchSpec {
  readonly bin: string;
  /** Store dir and ports-file dir. */
  readonly dir: string;
  /** Remove `dir` on cleanup(). */
  readonly ownsDir: boolean;
  readonly jetstream: boolean;
  readonly port: number | undefined;
  readonly monitorPort: number | undefined;
  readonly configFile: string | undefined;
  readonly extraArgs: readonly string[];
  readonly readyTimeoutMs: number;
}

type State =
  | { readonly t: 'stopped' }
  | { readonly t: 'running'; readonly proc: SpawnedChild; readonly pid: number }
  | { readonly t: 'disposed' };

export class ManagedNatsServer implements NatsServer {
  readonly #spec: LaunchSpec;
  #state: State = { t: 'stopped' };
  #port: number | undefined;
  #monitorPort: number | undefined;
  /** stop/kill/restart/cleanup run one at a time, in call order. */
  #queue: Promise<unknown> = Promise.resolve();
  #cleanup: Promise<void> | undefined;
  #readyProbe: Probe | undefined;
  /** Whether a start has succeeded: its ports are pinned from then on. */
  #started = false;

  constructor(spec: LaunchSpec) {
    this.#spec = spec;
    this.#port = spec.port;
    this.#monitorPort = spec.monitorPort;
    if (spec.ownsDir) trackOwnedDir(spec.dir);
  }

  get url(): string {
    return `nats://${LOOPBACK}:${this.port}`;
  }
  get port(): number {
    return this.#port ?? 0;
  }
  get monitorPort(): number {
    return this.#monitorPort ?? 0;
  }
  get storeDir(): string {
    return this.#spec.dir;
  }
  get bin(): string {
    return this.#spec.bin;
  }
  get version(): string {
    return natsServerVersion(this.#spec.bin);
  }
  get pid(): number | undefined {
    return this.#state.t === 'running' ? this.#state.pid : undefined;
  }

  stop(): Promise<void> {
    return this.#serial(() => this.#terminate('SIGTERM'));
  }

  kill(): Promise<void> {
    return this.#serial(() => this.#terminate('SIGKILL'));
  }

  freeze(): Promise<void> {
    return this.#serial(async () => {
      const pid = this.pid;
      this.#signal('SIGSTOP');
      // The signal is delivered asynchronously: wait until the kernel says stopped ('T').
      if (pid !== undefined) await waitStopped(pid);
    });
  }

  thaw(): Promise<void> {
    return this.#serial(async () => this.#signal('SIGCONT'));
  }

  restart(): Promise<void> {
    return this.#serial(async () => {
      if (this.#state.t === 'disposed') {
        throw new TestingError(TestingErrorCodes.NatsServerDisposed, `nats-server on port ${this.port} was cleaned up; it cannot restart`);
      }
      await this.#terminate('SIGTERM');
      await this.start();
    });
  }

  cleanup(): Promise<void> {
    this.#cleanup ??= this.#serial(async () => {
      await this.#terminate('SIGTERM');
      this.#state = { t: 'disposed' };
      if (this.#spec.ownsDir) {
        await rm(this.#spec.dir, { recursive: true, force: true, maxRetries: 3 });
        releaseDir(this.#spec.dir);
      }
    });
    return this.#cleanup;
  }

  /** An extra readiness check for every later start (the cluster's meta-group membership). */
  setReadyProbe(probe: Probe): void {
    this.#readyProbe = probe;
  }

  /**
   * Spawns the server and waits until it is ready. On failure the process is
   * SIGKILLed and the error carries its stderr tail. Not serialized: callers
   * are the factory (before anyone holds the object) and restart().
   *
   * Ports not given are chosen below the kernel's ephemeral range, so a
   * restart finds them free (`getFreePorts` says why). Until the first start
   * succeeds, a chosen port found taken is chosen again (another test may
   * have chosen it in the same instant); after that the ports are pinned.
   */
  async start(extraProbe: Probe | undefined = this.#readyProbe): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      const given = { port: this.#port, monitorPort: this.#monitorPort };
      const chosen = this.#started ? [] : await getFreePorts((given.port === undefined ? 1 : 0) + (given.monitorPort === undefined ? 1 : 0));
      this.#port ??= chosen[0];
      this.#monitorPort ??= chosen[chosen.length - 1];
      try {
        await this.#launch(extraProbe);
        this.#started = true;
        return;
      } catch (err) {
        // Only a port chosen here can be chosen again (a route port in the config is the cluster launcher's).
        const taken = err instanceof NatsServerStartError ? takenPort(err.stderrTail) : undefined;
        if (taken === undefined || !chosen.includes(taken) || attempt >= PORT_ATTEMPTS) throw err;
        this.#port = given.port;
        this.#monitorPort = given.monitorPort;
      }
    }
  }

  async #launch(extraProbe: Probe | undefined): Promise<void> {
    const spec = this.#spec;
    const args = [
      '-a', LOOPBACK,
      '-p', String(this.#port ?? -1),
      '-m', String(this.#monitorPort ?? -1),
      ...(spec.jetstream ? ['-js', '-sd', spec.dir] : []),
      '--ports_file_dir', spec.dir,
      ...(spec.configFile === undefined ? [] : ['-c', spec.configFile]),
      ...spec.extraArgs,
    ];
    const proc = spawnTracked(spec.bin, args, STDERR_TAIL_LINES);
    const fail = async (code: typeof TestingErrorCodes.NatsServerStartFailed | typeof TestingErrorCodes.NatsServerReadyTimeout, message: string, cause?: unknown) => {
      proc.child.kill('SIGKILL');
      await proc.drained;
      if (this.#state.t === 'running' && this.#state.proc === proc) this.#state = { t: 'stopped' };
      if (proc.pid !== undefined) await removePortsFile(spec.dir, proc.pid);
      return new NatsServerStartError(code, message, { stderrTail: proc.tail.lines(), args, pid: proc.pid, cause });
    };

    if (proc.pid === undefined) {
      const err = await proc.spawnError;
      throw await fail(TestingErrorCodes.NatsServerStartFailed, `could not spawn ${spec.bin}: ${err.message}`, err);
    }
    const pid = proc.pid;
    this.#state = { t: 'running', proc, pid };
    void proc.exited.then(async () => {
      if (this.#state.t === 'running' && this.#state.pid === pid) this.#state = { t: 'stopped' };
      // A SIGKILLed server leaves its ports file; a stale one could confuse a later pid.
      await removePortsFile(spec.dir, pid).catch(() => undefined);
    });

    const deadline = Date.now() + spec.readyTimeoutMs;
    const shouldStop = () => (proc.hasExited() ? 'exited' : undefined);
    const wait = async (what: string, probe: Probe) => {
      const res = await pollUntilReady(probe, { deadline, shouldStop });
      if (res.ok) return;
      if (res.stopped) {
        const { code, signal } = await proc.exited;
        throw await fail(TestingErrorCodes.NatsServerStartFailed, `nats-server (pid ${pid}) exited with ${signal ?? `code ${code}`} before it was ready (${what})`);
      }
      throw await fail(TestingErrorCodes.NatsServerReadyTimeout, `nats-server (pid ${pid}) not ready after ${spec.readyTimeoutMs}ms (${what}): ${res.reason}`);
    };

    await wait('waiting for its ports file', async () => {
      const ports = await readPortsFile(spec.dir, pid);
      if (ports?.monitorPort === undefined) return 'no ports file yet';
      this.#port = ports.clientPort;
      this.#monitorPort = ports.monitorPort;
      return undefined;
    });
    await wait('GET /healthz', healthzProbe(this.monitorPort));
    if (spec.jetstream) await wait('JetStream API account info', jetStreamApiProbe(this.url));
    if (extraProbe !== undefined) await wait('cluster check', extraProbe);
  }

  #signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    if (this.#state.t === 'running') this.#state.proc.child.kill(signal);
  }

  async #terminate(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const state = this.#state;
    if (state.t !== 'running') return;
    const { child, exited } = state.proc;
    // A frozen process would not act on SIGTERM.
    child.kill('SIGCONT');
    child.kill(signal);
    // Go's runtime can take a while to act on SIGTERM on a loaded box, and
    // JetStream flushes on shutdown; past the grace period, crash it.
    const timer = signal === 'SIGTERM' ? setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS) : undefined;
    await exited;
    clearTimeout(timer);
    await state.proc.drained;
    await removePortsFile(this.#spec.dir, state.pid).catch(() => undefined);
  }

  #serial<T>(op: () => Promise<T>): Promise<T> {
    const next = this.#queue.then(op, op);
    this.#queue = next.catch(() => undefined);
    return next;
  }
}

/**
 * Starts a nats-server on 127.0.0.1 with random client and monitor ports and,
 * by default, JetStream on a fresh store dir. Resolves once the server is
 * ready (JetStream API answering). Call cleanup() when done.
 *
 * @throws NatsServerNotFoundError `nats_server_not_found`
 * @throws NatsServerStartError `nats_server_start_failed` | `nats_server_ready_timeout`, with the server's stderr tail
 */
export async function startNatsServer(opts: NatsServerOptions = {}): Promise<NatsServer> {
  const bin = opts.bin ?? findNatsServerBinary();
  const ownsDir = opts.storeDir === undefined;
  const dir = opts.storeDir ?? (await mkdtemp(join(tmpdir(), 'tether-nats-')));
  if (!ownsDir) await mkdir(dir, { recursive: true });
  let configFile: string | undefined;
  if (opts.configLines !== undefined && opts.configLines.length > 0) {
    configFile = join(dir, 'nats-server.conf');
    await writeFile(configFile, `${opts.configLines.join('\n')}\n`);
  }
  const server = new ManagedNatsServer({
    bin,
    dir,
    ownsDir,
    jetstream: opts.jetstream ?? true,
    port: opts.port,
    monitorPort: undefined,
    configFile,
    extraArgs: opts.extraArgs ?? [],
    readyTimeoutMs: opts.readyTimeoutMs ?? 10_000,
  });
  try {
    await server.start();
  } catch (err) {
    await server.cleanup();
    throw err;
  }
  return server;
}

/** Until /proc says the process is stopped ('T'), for at most 2 s (then on regardless: the caller's own checks decide). */
async function waitStopped(pid: number): Promise<void> {
  const until = Date.now() + 2_000;
  while (Date.now() < until) {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    // Field 3, after the parenthesised command name.
    if (stat === '' || stat.slice(stat.lastIndexOf(')') + 2).startsWith('T')) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
