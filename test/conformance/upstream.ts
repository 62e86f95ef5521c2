import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { OrderedEventStore } from './event-store.js';
import { createConformanceServer } from './features.js';

/** The MCP server the conformance suite tests, directly and through a gateway. */
export interface ConformanceUpstream {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** Closes every session and connection, then the listener. Idempotent. */
  close(): Promise<void>;
}

export interface ConformanceUpstreamOptions {
  /** `retry:` hint on priming events (SEP-1699). Default 500. */
  retryIntervalMs?: number;
}

const MCP_PATH = '/mcp';
const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: McpServer;
}

/**
 * Starts a stateful Streamable HTTP server on 127.0.0.1 with a random port:
 * one SDK `StreamableHTTPServerTransport` and `McpServer` per session, each
 * with an event store so POST streams get priming events and resume with
 * `Last-Event-ID`. Requests whose `Host` or `Origin` is not a loopback name
 * get 403, as the dns-rebinding-protection scenario requires of a local server.
 */
export async function startConformanceUpstream(opts: ConformanceUpstreamOptions = {}): Promise<ConformanceUpstream> {
  const sessions = new Map<string, Session>();
  const sockets = new Set<Socket>();
  let closing: Promise<void> | undefined;

  const newSession = async (): Promise<Session> => {
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      eventStore: new OrderedEventStore(),
      retryInterval: opts.retryIntervalMs ?? 500,
      onsessioninitialized: (id) => {
        sessions.set(id, session);
      },
    });
    const server = createConformanceServer();
    const session: Session = { transport, server };
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && sessions.get(id) === session) sessions.delete(id);
    };
    await server.connect(transport);
    return session;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!isLoopbackHost(req.headers.host) || !isLoopbackOrigin(header(req, 'origin'))) return reply(res, 403, -32000, 'Forbidden: Host or Origin is not a loopback name');
    if (new URL(req.url ?? '/', 'http://upstream').pathname !== MCP_PATH) return reply(res, 404, -32000, 'Not found');
    if (closing !== undefined) return reply(res, 503, -32000, 'Closing');
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    if (body !== undefined && !body.ok) return reply(res, 400, -32700, 'Parse error');
    const sessionId = header(req, 'mcp-session-id');
    if (sessionId !== undefined) {
      const session = sessions.get(sessionId);
      if (session === undefined) return reply(res, 404, -32001, 'Session not found');
      return session.transport.handleRequest(req, res, body?.value);
    }
    if (body === undefined || !isInitializeRequest(body.value)) return reply(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    const session = await newSession();
    await session.transport.handleRequest(req, res, body.value);
  };

  const http = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) reply(res, 500, -32603, err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });
  http.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((done, fail) => {
    http.once('error', fail);
    http.listen({ host: '127.0.0.1', port: 0 }, () => done());
  });
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('conformance upstream: no TCP address after listen');

  return {
    url: `http://127.0.0.1:${address.port}${MCP_PATH}`,
    close() {
      closing ??= (async () => {
        const all = [...sessions.values()];
        sessions.clear();
        await Promise.allSettled(all.map((s) => s.server.close()));
        await new Promise<void>((done) => {
          http.close(() => done());
          for (const socket of sockets) socket.destroy();
        });
      })();
      return closing;
    },
  };
}

function isLoopbackHost(host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    return LOOPBACK_HOSTNAMES.has(new URL(`http://${host}`).hostname);
  } catch {
    return false;
  }
}

function isLoopbackOrigin(origin: string | undefined): boolean {
  if (origin === undefined) return true;
  try {
    return LOOPBACK_HOSTNAMES.has(new URL(origin).hostname);
  } catch {
    return false;
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

async function readJson(req: IncomingMessage): Promise<{ ok: true; value: unknown } | { ok: false }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return { ok: true, value: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown };
  } catch {
    return { ok: false };
  }
}

function reply(res: ServerResponse, status: number, code: number, message: string): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
