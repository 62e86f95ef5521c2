import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';

/**
 * Every nats-server we spawned and that has not exited yet. If the test
 * process goes away, they go too: a leaked server would hold ports and a
 * store dir and outlive the run on a CI box.
 */
const live = new Set<ChildProcess>();
/** Temp dirs we created and have not removed yet; removed (best effort) on exit too. */
const ownedDirs = new Set<string>();
let hooked = false;

function killAll(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const dir of ownedDirs) {
    try {
      rmSync(dir, { recursive: true, force: true, maxRetries: 2 });
    } catch {
      // a dying server may still be writing; a leftover temp dir is harmless
    }
  }
}

/** Remove `dir` if this process exits before `releaseDir(dir)` (i.e. before cleanup ran). */
export function trackOwnedDir(dir: string): void {
  hookProcessExit();
  ownedDirs.add(dir);
}

export function releaseDir(dir: string): void {
  ownedDirs.delete(dir);
}

/** On a fatal signal: kill children, then let the signal do what it would have done. */
function onSignal(signal: NodeJS.Signals): void {
  killAll();
  // `once` already removed us; if nobody else handles the signal, re-raise it
  // so the default action (terminate) still happens.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function hookProcessExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', killAll);
  // Signal listeners only work on the main thread (vitest's default pool
  // is child processes, so this is the usual case).
  if (isMainThread) for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, onSignal);
}

/** Keeps the last `max` lines a stream wrote; a partial last line is kept too. */
export class LineTail {
  readonly #max: number;
  readonly #lines: string[] = [];
  #partial = '';

  constructor(max: number) {
    this.#max = max;
  }

  push(chunk: string): void {
    const parts = (this.#partial + chunk).split('\n');
    this.#partial = parts.pop() ?? '';
    for (const line of parts) {
      this.#lines.push(line.replace(/\r$/, ''));
      if (this.#lines.length > this.#max) this.#lines.shift();
    }
  }

  lines(): string[] {
    const all = this.#partial === '' ? [...this.#lines] : [...this.#lines, this.#partial];
    return all.slice(-this.#max);
  }
}

/** A spawned process plus what we learn about it asynchronously. */
export interface SpawnedChild {
  readonly child: ChildProcess;
  /** Undefined if spawning failed (then `spawnError` resolves with why). */
  readonly pid: number | undefined;
  readonly tail: LineTail;
  /** Resolves once the process has exited; never rejects. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves after exit once stderr is drained (capped, so it cannot hang). */
  readonly drained: Promise<void>;
  /** Resolves if spawning itself fails (ENOENT, EACCES); never rejects. */
  readonly spawnError: Promise<Error>;
  hasExited(): boolean;
}

/** Extras for {@link spawnTracked}; the defaults keep stdout ignored and the parent's env and cwd. */
export interface SpawnTrackedOptions {
  /** The child's whole environment. Default: ours. */
  readonly env?: NodeJS.ProcessEnv;
  readonly cwd?: string;
  /** Pipe stdout (read it from `child.stdout`) instead of ignoring it. Default false. */
  readonly pipeStdout?: boolean;
}

/**
 * Spawns `bin` detached from our event loop (unref'd, stderr unref'd) so a
 * running server never keeps the test runner alive, and registers it for
 * SIGKILL when this process exits.
 */
export function spawnTracked(bin: string, args: readonly string[], tailLines: number, opts: SpawnTrackedOptions = {}): SpawnedChild {
  hookProcessExit();
  const tail = new LineTail(tailLines);
  const child = spawn(bin, args, {
    stdio: ['ignore', opts.pipeStdout === true ? 'pipe' : 'ignore', 'pipe'],
    ...(opts.env === undefined ? {} : { env: opts.env }),
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
  });
  let exitedFlag = false;
  const spawnError = new Promise<Error>((done) => child.once('error', done));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) => {
    child.once('exit', (code, signal) => {
      exitedFlag = true;
      live.delete(child);
      done({ code, signal });
    });
    // A failed spawn emits 'error' and never 'exit'.
    void spawnError.then(() => {
      if (child.pid !== undefined) return;
      exitedFlag = true;
      done({ code: null, signal: null });
    });
  });
  const closed = new Promise<void>((done) => child.once('close', () => done()));
  const drained = exited.then(() => Promise.race([closed, new Promise<void>((done) => setTimeout(done, 250))]));

  if (child.pid !== undefined) live.add(child);
  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => tail.push(chunk));
  child.unref();
  unrefStream(child.stderr);
  unrefStream(child.stdout);

  return { child, pid: child.pid, tail, exited, drained, spawnError, hasExited: () => exitedFlag };
}

function unrefStream(stream: unknown): void {
  if (typeof stream === 'object' && stream !== null && 'unref' in stream && typeof stream.unref === 'function') {
    (stream as { unref(): void }).unref();
  }
}
