/**
 * The reference hop: Debian's nginx as a plain reverse proxy in front of the
 * same upstreams the gateway uses, so every latency table has the cost of a
 * proxy that only forwards bytes beside the gateway's.
 *
 * nginx runs as a foreground child (`daemon off;`) with everything in a fresh
 * temp dir used as its prefix (config, pid, error log, temp paths), on a
 * random loopback port, one `location /<name>/` per upstream. The proxy
 * directives are those of deploy/nginx/tether.conf that matter for MCP
 * (HTTP/1.1 with an empty Connection header and a keep-alive upstream pool,
 * no response or request buffering, no cache, no gzip, long read timeouts),
 * without what only a deployment needs (access log, retries, forwarded-for
 * headers). The deploy harness (test/deploy/nginx-harness.ts) runs that file
 * byte for byte in front of gateways; this one fronts the upstreams, so it
 * writes its own small config.
 */
import { execFile, spawn } from 'node:child_process';
import { accessSync, chmodSync, constants, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { getFreePort } from '@tether/testing';

/** `$NGINX_BIN`, else `nginx` on PATH, else /usr/sbin/nginx (Debian's; `.ci/run` installs it); undefined when none is executable. */
export function findNginx(): string | undefined {
  const candidates = [process.env['NGINX_BIN'], ...(process.env['PATH'] ?? '').split(delimiter).map((d) => (d === '' ? undefined : join(d, 'nginx'))), '/usr/sbin/nginx'];
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

/** What `nginx -v` says, e.g. `nginx/1.22.1`. */
export function nginxVersion(bin: string): Promise<string> {
  return new Promise((resolve) => {
    // nginx prints its version on stderr.
    execFile(bin, ['-v'], (err, stdout, stderr) => {
      const text = `${stdout}${stderr}`;
      resolve(/nginx\/\S+/.exec(text)?.[0] ?? (err === null ? text.trim() : `unknown (${err.message})`));
    });
  });
}

export interface NginxRoute {
  /** Path segment: `/<name>/mcp` on nginx goes to `<origin>/mcp`. */
  readonly name: string;
  /** `http://127.0.0.1:<port>` of the upstream. */
  readonly origin: string;
}

export interface NginxProxy {
  /** The master's pid (our child). */
  readonly pid: number;
  readonly version: string;
  /** `http://127.0.0.1:<port>/<name>/mcp` per route name. */
  url(name: string): string;
  /** The master and its workers, by role name, for CPU accounting (`nginx`, `nginx-worker-1`, ...). */
  processes(): Promise<Record<string, number>>;
  /** SIGTERM to the master by pid (SIGKILL after 5 s), then removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

/** Starts nginx in front of `routes`; resolves once it accepts connections. Throws with nginx's own words when it cannot start. */
export async function startNginxProxy(bin: string, routes: readonly NginxRoute[]): Promise<NginxProxy> {
  const version = await nginxVersion(bin);
  let lastError: unknown;
  // The port is picked free, then bound by nginx: another process can take it in between.
  for (let attempt = 0; attempt < 3; attempt += 1) {
    try {
      return await startOnce(bin, version, routes, await getFreePort());
    } catch (err) {
      lastError = err;
      if (!String((err as Error).message).includes('Address already in use')) throw err;
    }
  }
  throw lastError;
}

async function startOnce(bin: string, version: string, routes: readonly NginxRoute[], port: number): Promise<NginxProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'tether-bench-nginx-'));
  // A master running as root hands requests to workers running as `nobody`
  // (the `user` directive's default; it is ignored when not root): they must
  // be able to traverse the prefix to reach the temp dirs.
  chmodSync(dir, 0o755);
  mkdirSync(join(dir, 'tmp'), { mode: 0o755 });
  const conf = join(dir, 'nginx.conf');
  writeFileSync(conf, config(dir, port, routes));
  const child = spawn(bin, ['-p', `${dir}/`, '-c', conf, '-e', join(dir, 'error.log'), '-g', 'daemon off;'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const pid = child.pid;
  const alive = (): boolean => child.exitCode === null && child.signalCode === null;
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> =>
    (stopping ??= (async () => {
      if (pid !== undefined && alive()) {
        // By pid, the master we started: its fast shutdown stops its workers too.
        process.kill(pid, 'SIGTERM');
        const timer = setTimeout(() => {
          if (alive()) process.kill(pid, 'SIGKILL');
        }, 5_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    })());
  const errorLog = (): string => {
    try {
      return readFileSync(join(dir, 'error.log'), 'utf8');
    } catch {
      return '';
    }
  };
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (!alive() || pid === undefined) {
      const why = `${output}\n${errorLog()}`.trim();
      await stop();
      throw new Error(`nginx exited before accepting connections: ${why}`);
    }
    if (await canConnect(port)) break;
    if (Date.now() > deadline) {
      const why = errorLog();
      await stop();
      throw new Error(`nginx did not accept connections on ${port} within 10 s: ${why}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    pid,
    version,
    url: (name) => `http://127.0.0.1:${port}/${name}/mcp`,
    processes: async () => {
      const workers = await childrenOf(pid);
      return { nginx: pid, ...Object.fromEntries(workers.map((w, i) => [`nginx-worker-${i + 1}`, w])) };
    },
    stop,
  };
}

function config(dir: string, port: number, routes: readonly NginxRoute[]): string {
  const upstreams = routes.map((r) => {
    const hostPort = new URL(r.origin).host;
    // keepalive_timeout below Node's own keep-alive timeout (5 s), as in tether.conf: nginx never reuses a socket the upstream is closing.
    return `    upstream bench_${r.name} {\n        server ${hostPort};\n        keepalive 64;\n        keepalive_timeout 4s;\n    }\n`;
  });
  const locations = routes.map(
    (r) => `        location /${r.name}/ {
            # The trailing slash maps /${r.name}/mcp to /mcp upstream.
            proxy_pass http://bench_${r.name}/;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $host;
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_cache off;
            gzip off;
            proxy_read_timeout 1h;
            proxy_send_timeout 1h;
            proxy_connect_timeout 5s;
            proxy_redirect off;
        }
`,
  );
  return `# Written by test/bench/gateway/nginx.ts: a plain proxy hop, the reference for the gateway's.
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
    client_body_temp_path ${dir}/tmp/body;
    proxy_temp_path ${dir}/tmp/proxy;
    fastcgi_temp_path ${dir}/tmp/fastcgi;
    uwsgi_temp_path ${dir}/tmp/uwsgi;
    scgi_temp_path ${dir}/tmp/scgi;
    access_log off;
    client_max_body_size 8m;
${upstreams.join('')}
    server {
        listen 127.0.0.1:${port};
${locations.join('')}    }
}
`;
}

/** Pids whose parent is `pid` (nginx's workers), from /proc. */
async function childrenOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) comes after the command name, which may hold spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out.sort((a, b) => a - b);
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}
