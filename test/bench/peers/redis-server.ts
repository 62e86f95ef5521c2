/**
 * A private `redis-server` for the peer baselines: a random free loopback
 * port, a fresh temp dir, never the machine's own Redis on 6379. Stopped and
 * restarted by its PID only. Two persistence modes:
 *
 * - `none`: `--save '' --appendonly no`, memory only (a restart loses everything);
 * - `aof-always`: `--appendonly yes --appendfsync always`, every write
 *   fsynced before its reply (the durability JetStream's file store with
 *   `sync_interval: always` gives), so a restart keeps every acknowledged event.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { getFreePort } from '@tether/testing';

export const RedisPersistence = { none: 'none', aofAlways: 'aof-always' } as const;
export type RedisPersistence = (typeof RedisPersistence)[keyof typeof RedisPersistence];

export interface RedisServer {
  readonly url: string;
  readonly port: number;
  readonly version: string;
  readonly bin: string;
  readonly dir: string;
  readonly persistence: RedisPersistence;
  /** PID of the running process (changes on `restart`). */
  readonly pid: number;
  /** SIGKILL (a crash, nothing flushed on the way out), then a new process on the same port and dir. */
  restart(): Promise<void>;
  /** SIGKILL by PID, then removes the dir. */
  stop(): Promise<void>;
}

/**
 * `REDIS_SERVER_BIN` when set (and only it: undefined if it is not
 * executable), else `/usr/bin/redis-server`, else the first `redis-server`
 * on PATH; undefined if none.
 */
export function findRedisServer(): string | undefined {
  const explicit = process.env['REDIS_SERVER_BIN'];
  const candidates = explicit !== undefined && explicit !== '' ? [explicit] : ['/usr/bin/redis-server', ...(process.env['PATH'] ?? '').split(delimiter).map((d) => join(d, 'redis-server'))];
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return c;
    } catch {
      // next
    }
  }
  return undefined;
}

export function redisVersion(bin: string): string {
  const out = execFileSync(bin, ['--version'], { encoding: 'utf8' });
  return /v=([0-9][^ ]*)/.exec(out)?.[1] ?? out.trim();
}

const live = new Set<ChildProcess>();
// A bench that throws or is interrupted must not leave servers behind.
process.once('exit', () => {
  for (const child of live) if (child.pid !== undefined) killQuietly(child.pid);
});

export async function startRedisServer(persistence: RedisPersistence, bin = findRedisServer()): Promise<RedisServer> {
  if (bin === undefined) throw new Error('redis-server not found (set REDIS_SERVER_BIN, or apt-get install redis-server)');
  const version = redisVersion(bin);
  const dir = mkdtempSync(join(tmpdir(), `tether-redis-${persistence}-`));
  // A free port a moment ago: another process may take it before redis-server binds it, so a launch that exits early is retried on a new one.
  let port = 0;
  let child: ChildProcess | undefined;
  const argsFor = (p: number): string[] => [
    '--port', String(p),
    '--bind', '127.0.0.1',
    '--dir', dir,
    '--save', '',
    '--daemonize', 'no',
    '--logfile', join(dir, 'redis.log'),
    ...(persistence === RedisPersistence.aofAlways ? ['--appendonly', 'yes', '--appendfsync', 'always'] : ['--appendonly', 'no']),
  ];
  for (let attempt = 1; child === undefined; attempt += 1) {
    port = await getFreePort();
    try {
      child = await launch(bin, argsFor(port), port);
    } catch (err) {
      if (attempt >= 3) {
        rmSync(dir, { recursive: true, force: true });
        throw err;
      }
    }
  }
  const args = argsFor(port);
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    version,
    bin,
    dir,
    persistence,
    get pid() {
      return child?.pid ?? -1;
    },
    async restart() {
      if (child !== undefined) await kill(child);
      child = await launch(bin, args, port);
    },
    async stop() {
      if (child !== undefined) await kill(child);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function launch(bin: string, args: readonly string[], port: number): Promise<ChildProcess> {
  const child = spawn(bin, args, { stdio: 'ignore' });
  live.add(child);
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `exited ${code ?? signal}`;
    live.delete(child);
  });
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (exited !== undefined) throw new Error(`redis-server on port ${port} ${exited} before it answered PING (see its log in --dir)`);
    if (await ping(port)) return child;
    await new Promise((r) => setTimeout(r, 20));
  }
  await kill(child);
  throw new Error(`redis-server on port ${port} did not answer PING within 10 s`);
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  killQuietly(child.pid);
  await gone;
}

function killQuietly(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** True once the server answers `PING` with `+PONG` (and is done loading its AOF). */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let data = '';
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(500, () => done(false));
    socket.once('error', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      data += chunk.toString('utf8');
      if (data.includes('\r\n')) done(data.startsWith('+PONG'));
    });
  });
}
