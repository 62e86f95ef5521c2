/**
 * Runs Debian's nginx with deploy/nginx/tether.conf, byte for byte, as an
 * unprivileged-friendly child process: everything (pid, logs, temp dirs, the
 * config) lives in a fresh temp dir used as nginx's prefix.
 *
 * The only site-specific inputs are the two include files that tether.conf
 * documents (deploy/README.md, "nginx"):
 *   <dir>/tether/gateways.conf   `server host:port;` lines
 *   <dir>/tether/listen.conf     `listen ...;`
 * The main config written here plays the part of /etc/nginx/nginx.conf. On
 * purpose it carries defaults that would break SSE (gzip for
 * text/event-stream, response buffering, ignoring the gateway's
 * X-Accel-Buffering, a 1 s read timeout): the tests then show that the
 * snippet's own settings win, whatever the main config says.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { getFreePort } from '@tether/testing';

/** The file users deploy. */
export const TETHER_NGINX_CONF = fileURLToPath(new URL('../../deploy/nginx/tether.conf', import.meta.url));

/** `$NGINX_BIN`, else `nginx` on PATH, else /usr/sbin/nginx; undefined when none is executable. */
export function findNginx(): string | undefined {
  const candidates = [process.env.NGINX_BIN, ...(process.env.PATH ?? '').split(delimiter).map((d) => (d === '' ? undefined : join(d, 'nginx'))), '/usr/sbin/nginx'];
  for (const candidate of candidates) {
    if (candidate === undefined || candidate === '') continue;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // next
    }
  }
  return undefined;
}

/** What deploy/README.md tells users to write next to their nginx.conf. */
export interface NginxSite {
  /** `host:port` of each gateway. */
  readonly gateways: readonly string[];
  /** The `listen` parameter, e.g. `127.0.0.1:8080` or `8080`. */
  readonly listen: string;
}

/**
 * Writes the site into `dir`: tether.conf copied unchanged, plus
 * `tether/gateways.conf` and `tether/listen.conf`. `dir` must be the
 * directory of the main nginx.conf (relative includes resolve against it).
 */
export function renderNginxSite(dir: string, site: NginxSite): void {
  copyFileSync(TETHER_NGINX_CONF, join(dir, 'tether.conf'));
  mkdirSync(join(dir, 'tether'), { recursive: true });
  writeFileSync(join(dir, 'tether', 'gateways.conf'), site.gateways.map((g) => `server ${g};\n`).join(''));
  writeFileSync(join(dir, 'tether', 'listen.conf'), `listen ${site.listen};\n`);
}

/** One line of the `tether_upstream` access log format defined in tether.conf. */
export interface AccessEntry {
  readonly method: string;
  readonly uri: string;
  readonly status: number;
  /** Every gateway nginx tried, in order (more than one when it moved on to the next). */
  readonly upstreams: readonly string[];
  /** The gateway that produced the response: the last one tried. */
  readonly upstream: string | undefined;
  readonly lastEventId: string | undefined;
  /** `$request_completion`: false when the response was cut short (e.g. the client went away mid-stream). */
  readonly completed: boolean;
  /** $request_time, seconds. */
  readonly requestTimeS: number;
  readonly line: string;
}

const ACCESS_LINE = /^\S+ \[[^\]]+\] "(\S+) (\S+)" (\d{3}) upstream=(.*?) upstream_status=.*? last_event_id="([^"]*)" bytes=\d+ completion="(\w*)" rt=([\d.]+) /;

export function parseAccessLog(text: string): AccessEntry[] {
  const entries: AccessEntry[] = [];
  for (const line of text.split('\n')) {
    const m = ACCESS_LINE.exec(line);
    if (m === null) continue;
    const upstreams = m[4] === '-' ? [] : m[4]!.split(/, | : /).filter((u) => u !== '');
    entries.push({
      method: m[1]!,
      uri: m[2]!,
      status: Number(m[3]),
      upstreams,
      upstream: upstreams.at(-1),
      lastEventId: m[5] === '-' || m[5] === '' ? undefined : m[5],
      completed: m[6] === 'OK',
      requestTimeS: Number(m[7]),
      line,
    });
  }
  return entries;
}

export interface NginxProcess {
  readonly pid: number;
  readonly port: number;
  /** `http://127.0.0.1:<port>`. */
  readonly origin: string;
  /** The prefix dir (config, logs, pid). */
  readonly dir: string;
  accessLog(): AccessEntry[];
  errorLog(): string;
  /** SIGTERM (fast shutdown: open SSE streams are cut), SIGKILL after 5 s; removes the dir. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let hooked = false;
function hookExit(): void {
  if (hooked) return;
  hooked = true;
  // SIGTERM, not SIGKILL: the master then stops its workers too.
  process.once('exit', () => {
    for (const child of live) child.kill('SIGTERM');
  });
}

/** Starts nginx with the deployed tether.conf in front of `gateways`; resolves once it accepts connections. */
export async function startNginx(nginxBin: string, gateways: readonly string[]): Promise<NginxProcess> {
  let lastError: unknown;
  // The listen port is picked free and then bound by nginx: another process
  // can take it in between, so retry on "Address already in use".
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      return await startOnce(nginxBin, gateways, await getFreePort());
    } catch (err) {
      lastError = err;
      if (!String((err as Error).message).includes('Address already in use')) throw err;
    }
  }
  throw lastError;
}

async function startOnce(nginxBin: string, gateways: readonly string[], port: number): Promise<NginxProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'tether-nginx-'));
  // Workers drop to an unprivileged user when the master runs as root: they
  // must be able to traverse the prefix to reach the temp dirs.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'tmp'), { mode: 0o755 });
  renderNginxSite(dir, { gateways, listen: `127.0.0.1:${port}` });
  writeFileSync(join(dir, 'nginx.conf'), mainConf(dir));
  const child = spawn(nginxBin, ['-p', `${dir}/`, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  hookExit();
  live.add(child);
  let output = '';
  child.stdout?.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => (live.delete(child), done())));
  const readErrorLog = () => {
    try {
      return readFileSync(join(dir, 'error.log'), 'utf8');
    } catch {
      return '';
    }
  };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    })());

  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null || child.signalCode !== null) {
      const why = `${output}\n${readErrorLog()}`.trim();
      await stop();
      throw new Error(`nginx exited before accepting connections: ${why}`);
    }
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      const why = readErrorLog();
      await stop();
      throw new Error(`nginx did not accept connections on ${port} within 10 s: ${why}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    pid: child.pid!,
    port,
    origin: `http://127.0.0.1:${port}`,
    dir,
    accessLog: () => {
      try {
        return parseAccessLog(readFileSync(join(dir, 'access.log'), 'utf8'));
      } catch {
        return [];
      }
    },
    errorLog: readErrorLog,
    stop,
  };
}

function mainConf(dir: string): string {
  return `# Stands in for /etc/nginx/nginx.conf (written by test/deploy/nginx-harness.ts).
worker_processes 2;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log notice;
events { worker_connections 1024; }
http {
    client_body_temp_path ${dir}/tmp/body;
    proxy_temp_path ${dir}/tmp/proxy;
    fastcgi_temp_path ${dir}/tmp/fastcgi;
    uwsgi_temp_path ${dir}/tmp/uwsgi;
    scgi_temp_path ${dir}/tmp/scgi;

    # Hostile defaults: each would break SSE if tether.conf did not override it.
    gzip on;
    gzip_min_length 1;
    gzip_types text/event-stream application/json;
    proxy_buffering on;
    proxy_ignore_headers X-Accel-Buffering;
    proxy_read_timeout 1s;

    include tether.conf;
    access_log ${dir}/access.log tether_upstream;
}
`;
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}
