/**
 * The second reference hop: the smallest honest Node.js reverse proxy, so the
 * gateway's figures have beside them what any Node process in the path costs
 * on this machine (issue 12's targets are ratios to direct; nginx is C).
 *
 * It runs as its own child process (`node --import tsx <this file>`, like the
 * SDK upstream), so its CPU and VmRSS are its own, and does nothing a proxy
 * can skip: no logging, no tracing, no parsing. A `node:http` server; POSTs
 * and DELETEs go out on one undici `Agent` with `request()` (the gateway's
 * `callUpstream`), GETs (the long event streams) on `node:http` with a
 * keep-alive agent (the gateway's `openUpstreamStream`). Status and headers
 * are copied minus hop-by-hop ones, the bodies stream through both ways
 * (an SSE answer is never buffered; its headers are flushed at once, like
 * nginx with `proxy_buffering off`). Routes mirror nginx.ts: `/<name>/<rest>`
 * goes to `<origin>/<rest>`, the client's Host passed on.
 *
 * The parent side (`startNodeProxy`) loads the test kit lazily, so the child
 * imports nothing but node: modules and undici.
 */
import { Agent as HttpAgent, createServer, request as httpRequest } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, Server, ServerResponse } from 'node:http';
import { pipeline } from 'node:stream';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Agent as UndiciAgent } from 'undici';
import type { Dispatcher } from 'undici';
import type { ServiceProcess } from '@tether/testing';

export interface NodeProxyRoute {
  /** Path segment: `/<name>/mcp` on the proxy goes to `<origin>/mcp`. */
  readonly name: string;
  /** `http://127.0.0.1:<port>` of the upstream. */
  readonly origin: string;
}

export interface NodeProxyOptions {
  readonly routes: readonly NodeProxyRoute[];
  /** Extra node flags (`--inspect=127.0.0.1:0`, `--cpu-prof`, ...). */
  readonly nodeArgs?: readonly string[];
}

/** The proxy's child process; the shape of stack.ts's `GatewayProcess`, so idle-streams.ts can measure either. */
export interface NodeProxy {
  readonly process: ServiceProcess;
  readonly pid: number;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** `http://127.0.0.1:<port>/<name>/mcp` per route name. */
  url(name: string): string;
  /** SIGTERM by pid (SIGKILL after 5 s). Idempotent. */
  stop(): Promise<void>;
}

const SELF = fileURLToPath(import.meta.url);

/** Starts the proxy in its own process; resolves once it listens. */
export async function startNodeProxy(options: NodeProxyOptions): Promise<NodeProxy> {
  const { startServiceProcess } = await import('@tether/testing');
  const routes = options.routes.flatMap((r) => ['--route', `${r.name}=${r.origin}`]);
  const proc = await startServiceProcess({
    name: 'node-proxy',
    ...withOpenFiles([...(options.nodeArgs ?? []), '--import', 'tsx', SELF, ...routes]),
    readyLine: (json) => json.msg === 'listening',
  });
  const origin = `http://127.0.0.1:${proc.port}`;
  return {
    process: proc,
    pid: proc.pid,
    origin,
    url: (name) => `${origin}/${name}/mcp`,
    stop: async () => void (await proc.stop('SIGTERM', 5_000)),
  };
}

/**
 * As stack.ts does for the gateway (not exported there): `sh -c 'ulimit -n …;
 * exec node …'`, since 10,000 idle streams need two descriptors each; `exec`
 * keeps the pid.
 */
function withOpenFiles(args: readonly string[]): { command: string; args: string[] } {
  return {
    command: '/bin/sh',
    args: ['-c', 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$0" "$@"', process.execPath, ...args],
  };
}

/**
 * RFC 9110 section 7.6.1: Connection and the fields it names, plus the
 * classic hop-by-hop set, are not forwarded. Node and undici write their own
 * framing (Transfer-Encoding, Content-Length of what they send) and keep-alive.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

function endToEnd(headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>): Record<string, string | string[]> {
  const named = String(headers['connection'] ?? '').toLowerCase().split(',').map((s) => s.trim());
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name) || named.includes(name)) continue;
    out[name] = value;
  }
  return out;
}

/** The proxy itself: a `node:http` server on 127.0.0.1 (`port` 0: any). */
export async function runNodeProxy(routes: readonly NodeProxyRoute[], port = 0): Promise<{ server: Server; close(): Promise<void> }> {
  const byName = new Map(routes.map((r) => [r.name, new URL(r.origin)]));
  const pool = new UndiciAgent();
  const streams = new HttpAgent({ keepAlive: true, maxSockets: Infinity });

  const answer = (res: ServerResponse, status: number, headers: OutgoingHttpHeaders, eventStream: boolean): void => {
    res.writeHead(status, headers);
    // An SSE stream may send nothing for long (a standalone GET): the client must see its headers now.
    if (eventStream) res.flushHeaders();
  };
  const fail = (res: ServerResponse): void => {
    if (res.headersSent) res.destroy();
    else res.writeHead(502, { 'content-type': 'text/plain' }).end('upstream did not answer\n');
  };

  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    const slash = url.indexOf('/', 1);
    const upstream = slash === -1 ? undefined : byName.get(url.slice(1, slash));
    if (upstream === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('no route\n');
      return;
    }
    const path = url.slice(slash);
    const headers = endToEnd(req.headers);
    const method = req.method ?? 'GET';
    if (method === 'GET') {
      const out = httpRequest({ host: upstream.hostname, port: upstream.port, path, method, headers, agent: streams }, (up: IncomingMessage) => {
        answer(res, up.statusCode ?? 502, endToEnd(up.headers), String(up.headers['content-type'] ?? '').startsWith('text/event-stream'));
        pipeline(up, res, () => undefined);
      });
      out.on('error', () => fail(res));
      // The client went away: so does the upstream stream (pipeline covers the body once it flows).
      res.once('close', () => {
        if (!res.writableFinished) out.destroy();
      });
      out.end();
      return;
    }
    const aborted = new AbortController();
    res.once('close', () => {
      if (!res.writableFinished) aborted.abort();
    });
    const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
    pool
      .request({
        origin: upstream.origin,
        path,
        method: method as Dispatcher.HttpMethod,
        headers,
        ...(hasBody ? { body: req } : {}),
        signal: aborted.signal,
      })
      .then(
        (up) => {
          answer(res, up.statusCode, endToEnd(up.headers), String(up.headers['content-type'] ?? '').startsWith('text/event-stream'));
          pipeline(up.body, res, () => undefined);
        },
        () => fail(res),
      );
  });

  await new Promise<void>((done, reject) => {
    server.once('error', reject);
    server.listen({ host: '127.0.0.1', port }, () => {
      server.off('error', reject);
      done();
    });
  });
  return {
    server,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
      streams.destroy();
      await pool.close();
    },
  };
}

/** Child-process entry: `--route <name>=<origin>` (repeated) `[--port N]`; one JSON ready line, nothing else. */
async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const routes: NodeProxyRoute[] = [];
  let port = 0;
  for (let i = 0; i < args.length; i += 2) {
    const value = args[i + 1] ?? '';
    if (args[i] === '--port') port = Number(value);
    else if (args[i] === '--route' && value.includes('=')) routes.push({ name: value.slice(0, value.indexOf('=')), origin: value.slice(value.indexOf('=') + 1) });
    else throw new Error(`node-proxy: unknown argument ${args[i] ?? ''} (want --route <name>=<origin>, --port <n>)`);
  }
  const proxy = await runNodeProxy(routes, port);
  const address = proxy.server.address();
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: typeof address === 'object' && address !== null ? address.port : 0 })}\n`);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    void proxy.close().finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // As the SDK upstream's main: a SIGKILLed parent re-parents us; stop then.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) stop();
  }, 2_000).unref();
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) await main();
