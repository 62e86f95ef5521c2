import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server';
import type { CreateMcpHandlerOptions } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { LOOPBACK } from './ports.js';

/** Options of {@link startModernUpstream}. */
export interface ModernUpstreamOptions {
  /** Builds the server for each request. Default: one with the {@link ModernTools}. */
  createServer?: () => McpServer;
  /** `createMcpHandler`'s own options (`legacy: 'stateless' | 'reject'`, `responseMode`, …). */
  handler?: CreateMcpHandlerOptions;
  /** Default 0 (random). */
  port?: number;
}

/** An official SDK v2 server (`createMcpHandler`) on 127.0.0.1: 2026-07-28 per request, 2025-era traffic statelessly. */
export interface ModernUpstream {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  readonly origin: string;
  /** Every request's headers, oldest first (the last 1000), names in lower case. */
  requests(): readonly Readonly<Record<string, string>>[];
  close(): Promise<void>;
}

/** Names of the default server's tools. */
export const ModernTools = {
  /** `{ name }`: returns `hello <name>`. */
  Greet: 'greet',
} as const;

const REQUEST_LOG_SIZE = 1000;

function defaultServer(): McpServer {
  const server = new McpServer({ name: 'tether-test-modern-upstream', version: '0.0.0' });
  server.registerTool(ModernTools.Greet, { description: 'greets', inputSchema: z.object({ name: z.string() }) }, ({ name }) => ({ content: [{ type: 'text', text: `hello ${name}` }] }));
  return server;
}

/**
 * Starts the SDK v2's own HTTP entry, `createMcpHandler`, behind node:http
 * (the handler is fetch-shaped; bodies are read whole, as MCP bodies are
 * single JSON-RPC messages, and answers stream back as they come).
 */
export function startModernUpstream(opts: ModernUpstreamOptions = {}): Promise<ModernUpstream> {
  return listenFetchHandler(createMcpHandler(opts.createServer ?? defaultServer, opts.handler), { ...(opts.port === undefined ? {} : { port: opts.port }), abortOnClientClose: false });
}

/** A fetch-shaped MCP handler, as `createMcpHandler` returns it. */
export interface FetchHandler {
  fetch(request: Request): Promise<Response>;
  close(): Promise<void>;
}

export interface ListenOptions {
  /** Default 0 (random). */
  readonly port?: number;
  /**
   * Abort the request (its `signal`) when the client closes the connection
   * before the answer is whole: at 2026-07-28 closing the stream cancels the
   * request. Off, the handler runs on (and a listen stream lives until
   * `close()`).
   */
  readonly abortOnClientClose: boolean;
}

/** node:http on 127.0.0.1 in front of a fetch-shaped handler, with the request log and `close()` both test upstreams share. */
export async function listenFetchHandler(handler: FetchHandler, opts: ListenOptions): Promise<ModernUpstream> {
  const log: Record<string, string>[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers[name] = value;
    log.push(headers);
    if (log.length > REQUEST_LOG_SIZE) log.shift();
    serve(handler.fetch, req, res, opts.abortOnClientClose).catch(() => res.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, LOOPBACK, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  const origin = `http://${LOOPBACK}:${port}`;
  let closed: Promise<void> | undefined;
  return {
    url: `${origin}/mcp`,
    origin,
    requests: () => log.slice(),
    close: () =>
      (closed ??= (async () => {
        await handler.close();
        for (const s of sockets) s.destroy();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      })()),
  };
}

/** node:http to the fetch-shaped handler; with `abortOnClientClose`, the client's disconnect is the request's abort. */
async function serve(fetchHandler: (request: Request) => Promise<Response>, req: IncomingMessage, res: ServerResponse, abortOnClientClose: boolean): Promise<void> {
  const gone = new AbortController();
  // 'close' comes after the last byte too; only a close before it is the client leaving.
  if (abortOnClientClose) {
    res.once('close', () => {
      if (!res.writableFinished) gone.abort(new Error('the client closed the connection'));
    });
  }
  const chunks: Buffer[] = [];
  for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers.set(name, value);
  const method = req.method ?? 'GET';
  const body = method === 'GET' || method === 'HEAD' ? {} : { body: Buffer.concat(chunks) };
  const signal = abortOnClientClose ? { signal: gone.signal } : {};
  const request = new Request(`http://${req.headers.host ?? LOOPBACK}${req.url ?? '/'}`, { method, headers, ...signal, ...body });
  const response = await fetchHandler(request);
  const out: Record<string, string> = {};
  response.headers.forEach((value, name) => (out[name] = value));
  res.writeHead(response.status, out);
  if (response.body === null) return void res.end();
  const reader = response.body.getReader();
  gone.signal.addEventListener('abort', () => void reader.cancel().catch(() => undefined), { once: true });
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    res.write(value);
  }
  res.end();
}
