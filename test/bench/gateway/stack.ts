/**
 * The processes the gateway benchmark measures: a private nats-server, SDK
 * upstreams in their own processes (one answering with SSE, one with JSON),
 * and gateway processes whose RSS is read from /proc.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';

const GATEWAY_MAIN = fileURLToPath(new URL('../../../services/gateway/dist/main.js', import.meta.url));
const UPSTREAM_MAIN = fileURLToPath(new URL('../../shared/mcp-upstream-main.ts', import.meta.url));

/**
 * Children run through `sh -c 'ulimit -n …; exec node …'`: 10,000 idle
 * streams need ~20,000 descriptors in the gateway (client + upstream socket
 * each). `exec` keeps the pid, so /proc/<pid> is the node process. Raising
 * the hard limit needs root (or a high hard limit); otherwise the soft limit
 * goes up to the hard one and the benchmark reports the cap.
 */
const WANTED_OPEN_FILES = 65_536;
function withOpenFiles(args: readonly string[]): { command: string; args: string[] } {
  return {
    command: '/bin/sh',
    args: ['-c', `ulimit -n ${WANTED_OPEN_FILES} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"`, process.execPath, ...args],
  };
}

export interface Upstream {
  readonly process: ServiceProcess;
  /** `http://127.0.0.1:<port>/mcp` */
  readonly url: string;
}

export interface GatewayProcess {
  readonly process: ServiceProcess;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly pid: number;
}

export interface GatewayOptions {
  readonly name: string;
  /** Extra gateway flags (`--route /json=...`). */
  readonly args?: readonly string[];
  /** Extra node flags (`--cpu-prof`, ...). */
  readonly nodeArgs?: readonly string[];
  /** Port to listen on; default 0 (any free one). A gateway whose own URL is its `--auth-audience` needs it known first. */
  readonly port?: number;
}

export interface BenchStack {
  readonly nats: NatsServer;
  /** Default SDK upstream: an event store, answers tools/call as SSE. */
  readonly sseUpstream: Upstream;
  /** The same upstream with `enableJsonResponse`: tools/call answered as JSON. */
  readonly jsonUpstream: Upstream;
  startGateway(options: GatewayOptions): Promise<GatewayProcess>;
  close(): Promise<void>;
}

export async function startBenchStack(): Promise<BenchStack> {
  const nats = await startNatsServer();
  const started: ServiceProcess[] = [];
  try {
    const upstream = async (name: string, args: readonly string[]): Promise<Upstream> => {
      const proc = await startServiceProcess({ name, ...withOpenFiles(['--import', 'tsx', UPSTREAM_MAIN, ...args]), readyLine: (json) => json.msg === 'listening' });
      started.push(proc);
      return { process: proc, url: `http://127.0.0.1:${proc.port}/mcp` };
    };
    const sseUpstream = await upstream('upstream-sse', ['--event-store']);
    const jsonUpstream = await upstream('upstream-json', ['--event-store', '--json']);
    return {
      nats,
      sseUpstream,
      jsonUpstream,
      async startGateway(options) {
        const proc = await startServiceProcess({
          name: options.name,
          ...withOpenFiles([...(options.nodeArgs ?? []), GATEWAY_MAIN, '--port', String(options.port ?? 0), '--nats', nats.url, '--upstream', sseUpstream.url, '--instance-id', options.name, ...(options.args ?? [])]),
          readyLine: (json) => json.msg === 'listening',
        });
        started.push(proc);
        return { process: proc, origin: `http://127.0.0.1:${proc.port}`, pid: proc.pid };
      },
      async close() {
        // SIGTERM first: a gateway drains and exits 0, which also writes a --cpu-prof profile.
        await Promise.all(started.map((p) => p.stop('SIGTERM', 15_000).catch(() => undefined)));
        await nats.cleanup();
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.kill().catch(() => undefined)));
    await nats.cleanup();
    throw err;
  }
}

/** VmRSS of a process, in KiB. */
export async function rssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN);
}

/** Soft limit on open files of a process (default: this one). */
export async function openFilesLimit(pid: number | 'self' = 'self'): Promise<number> {
  const limits = await readFile(`/proc/${pid}/limits`, 'utf8');
  const value = /Max open files\s+(\S+)/.exec(limits)?.[1];
  return value === undefined || value === 'unlimited' ? Number.POSITIVE_INFINITY : Number(value);
}
