import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport, type EventStore } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, type StreamableHTTPReconnectionOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { LOOPBACK } from './ports.js';

/** Options of {@link startMcpUpstream}. */
export interface McpUpstreamOptions {
  /**
   * Give every session an event store, so SSE events carry ids, POST streams
   * start with a priming event (protocol >= 2025-11-25) and a GET with
   * `Last-Event-ID` replays. `true`: the SDK's `InMemoryEventStore`; a
   * function: a store it makes, one per session. Default false: no ids, no
   * resume.
   *
   * The SDK's store orders replay by sorting ids `<stream>_<Date.now()>_<random>`:
   * events stored within one millisecond replay in random order, and may be
   * replayed twice or skipped around the cursor. Resume tests must space
   * events by at least 1 ms (`delayMs >= 1`), or bring a store that keeps order.
   */
  eventStore?: boolean | (() => EventStore);
  /**
   * Builds each session's `McpServer`. Default: a server with the
   * {@link UpstreamTools} and the `logging` capability.
   */
  createServer?: () => McpServer;
  /**
   * Answer 403 to a request whose `Host`, or `Origin` when it has one, is not
   * a loopback name (`localhost`, `127.0.0.1`, `[::1]`): the DNS rebinding
   * protection the MCP spec asks of a local server. Checked before anything
   * else. Default false.
   */
  loopbackOnly?: boolean;
  /** Default 0 (random). */
  port?: number;
  /** Answer requests with JSON instead of SSE (`enableJsonResponse`). Default false. */
  jsonResponse?: boolean;
  /** `retry:` hint (ms) on priming events; only with `eventStore`. Default: none. */
  retryIntervalMs?: number;
}

/** One HTTP request the upstream received. */
export interface UpstreamRequest {
  /** 1 for the first request the upstream received, then 2, 3…: `requests()` keeps the last 1000, so a test marks the newest `seq` to find what came after. */
  readonly seq: number;
  readonly method: string;
  readonly sessionId: string | undefined;
  readonly lastEventId: string | undefined;
  /**
   * Every header line as received (`IncomingMessage.rawHeaders`: name,
   * value, name, value…, names in their case): what the caller sent,
   * repeated lines included, which `headers` would join or drop (a second
   * `Authorization`).
   */
  readonly rawHeaders: readonly string[];
}

/** An MCP server built on the official SDK, on 127.0.0.1. */
export interface McpUpstream {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** `http://127.0.0.1:<port>`: what a proxy or gateway targets. */
  readonly origin: string;
  readonly port: number;
  /** Live sessions (initialized and not deleted). */
  sessions(): number;
  /** Standalone GET streams currently open (200 sent, not closed), across sessions. */
  openGetStreams(): number;
  /** The last 1000 requests received, oldest first (each `seq` one more than the last). */
  requests(): readonly UpstreamRequest[];
  /** Closes every session and connection, then the listener. Idempotent. */
  close(): Promise<void>;
}

/** Names of the tools; the gateway tests call them. */
export const UpstreamTools = {
  /** `{ count, delayMs }`: `count` progress notifications on the request's own stream, then `done <count>`. */
  StreamProgress: 'stream_progress',
  /** `{ count, delayMs }`: `count` logging messages on the standalone GET stream, then `sent <count>`. */
  NotifyStandalone: 'notify_standalone',
  /** `{ text }`: returns `text`. */
  Echo: 'echo',
} as const;

const MCP_PATH = '/mcp';
const REQUEST_LOG_SIZE = 1000;

interface Session {
  readonly transport: StreamableHTTPServerTransport;
  readonly server: McpServer;
}

/**
 * Starts a stateful Streamable HTTP MCP server: one `StreamableHTTPServerTransport`
 * and one `McpServer` per session, in a map keyed by session id (the SDK's own
 * pattern), on a plain node:http server. POST, GET and DELETE on `/mcp`.
 */
export async function startMcpUpstream(opts: McpUpstreamOptions = {}): Promise<McpUpstream> {
  const sessions = new Map<string, Session>();
  const pending = new Set<Session>();
  const getStreams = new Set<ServerResponse>();
  const log: UpstreamRequest[] = [];
  let received = 0;
  const sockets = new Set<Socket>();
  let closing: Promise<void> | undefined;

  const newSession = async (): Promise<Session> => {
    const eventStore = opts.eventStore === true ? new InMemoryEventStore() : typeof opts.eventStore === 'function' ? opts.eventStore() : undefined;
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: randomUUID,
      enableJsonResponse: opts.jsonResponse ?? false,
      ...(eventStore === undefined ? {} : { eventStore }),
      ...(opts.retryIntervalMs === undefined ? {} : { retryInterval: opts.retryIntervalMs }),
      onsessioninitialized: (id) => {
        sessions.set(id, session);
        pending.delete(session);
      },
    });
    const server = (opts.createServer ?? createToolServer)();
    const session: Session = { transport, server };
    transport.onclose = () => {
      const id = transport.sessionId;
      if (id !== undefined && sessions.get(id) === session) sessions.delete(id);
      pending.delete(session);
    };
    pending.add(session);
    await server.connect(transport);
    return session;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    const sessionId = header(req, 'mcp-session-id');
    log.push({ seq: (received += 1), method: req.method ?? '', sessionId, lastEventId: header(req, 'last-event-id'), rawHeaders: req.rawHeaders });
    if (log.length > REQUEST_LOG_SIZE) log.shift();
    if (opts.loopbackOnly === true && !isLoopbackRequest(req)) return sendJsonRpcError(res, 403, -32000, 'Forbidden: Host or Origin is not a loopback name');
    if (url.pathname !== MCP_PATH) return sendJsonRpcError(res, 404, -32000, `no MCP endpoint at ${url.pathname}`);
    if (closing !== undefined) return sendJsonRpcError(res, 503, -32000, 'upstream is closing');

    if (sessionId !== undefined) {
      const session = sessions.get(sessionId);
      if (session === undefined) return sendJsonRpcError(res, 404, -32001, 'Session not found');
      if (req.method === 'GET' && header(req, 'last-event-id') === undefined) trackGetStream(res);
      const body = req.method === 'POST' ? await readJson(req) : undefined;
      if (body !== undefined && !body.ok) return sendJsonRpcError(res, 400, -32700, 'Parse error');
      return session.transport.handleRequest(req, res, body?.value);
    }
    if (req.method !== 'POST') return sendJsonRpcError(res, 400, -32000, 'Bad Request: Mcp-Session-Id header is required');
    const body = await readJson(req);
    if (!body.ok) return sendJsonRpcError(res, 400, -32700, 'Parse error');
    if (!isInitializeRequest(body.value)) return sendJsonRpcError(res, 400, -32000, 'Bad Request: no session id and not an initialize request');
    const session = await newSession();
    await session.transport.handleRequest(req, res, body.value);
  };

  const trackGetStream = (res: ServerResponse) => {
    getStreams.add(res);
    res.once('close', () => getStreams.delete(res));
  };

  const httpServer: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, err instanceof Error ? err.message : String(err));
      else res.destroy();
    });
  });
  httpServer.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((done, reject) => {
    httpServer.once('error', reject);
    httpServer.listen({ host: LOOPBACK, port: opts.port ?? 0 }, () => {
      httpServer.off('error', reject);
      done();
    });
  });
  const address = httpServer.address();
  if (address === null || typeof address === 'string') throw new Error('mcp upstream: no TCP address after listen');
  const port = address.port;
  const origin = `http://${LOOPBACK}:${port}`;

  return {
    url: `${origin}${MCP_PATH}`,
    origin,
    port,
    sessions: () => sessions.size,
    openGetStreams: () => [...getStreams].filter((res) => res.headersSent && res.statusCode === 200 && !res.writableEnded).length,
    requests: () => [...log],
    close() {
      closing ??= (async () => {
        const all = [...sessions.values(), ...pending];
        sessions.clear();
        pending.clear();
        // McpServer.close() closes its transport, which ends every SSE stream of the session.
        await Promise.allSettled(all.map((s) => s.server.close()));
        await new Promise<void>((done) => {
          httpServer.close(() => done());
          for (const socket of sockets) socket.destroy();
        });
      })();
      return closing;
    },
  };
}

/** The tools every session offers. */
function createToolServer(): McpServer {
  // `logging` makes the SDK send notifications/message at all: without the
  // capability, sendLoggingMessage() is a silent no-op.
  const server = new McpServer({ name: 'tether-test-upstream', version: '0.0.0' }, { capabilities: { logging: {} } });
  const countArgs = { count: z.number().int().min(0), delayMs: z.number().int().min(0) };

  server.registerTool(UpstreamTools.StreamProgress, { description: 'Sends count progress notifications on the stream of this request, then answers.', inputSchema: countArgs }, async ({ count, delayMs }, extra) => {
    const progressToken = extra._meta?.progressToken;
    // Not in the millisecond of the stream's priming event either: the
    // InMemoryEventStore (below) would order the two by their random suffix,
    // and a nested resume from the priming id could then skip progress 1 (a
    // 35 s chaos run in CI caught exactly that as a payload gap).
    await pause(1);
    for (let i = 1; i <= count; i += 1) {
      // extra.sendNotification sets relatedRequestId, so the transport puts the
      // notification on this POST's SSE stream, not on the standalone GET one.
      if (progressToken !== undefined) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: i, total: count, message: `step ${i}` } });
      }
      // Also after the last one: the SDK's InMemoryEventStore orders replay by
      // `<stream>_<Date.now()>_<random>`, so a response stored in the same
      // millisecond as the last progress could be replayed before it.
      await pause(delayMs);
    }
    return { content: [{ type: 'text', text: `done ${count}` }] };
  });

  server.registerTool(UpstreamTools.NotifyStandalone, { description: 'Sends count logging messages on the standalone GET stream, then answers.', inputSchema: countArgs }, async ({ count, delayMs }, extra) => {
    // Which call sent a message: a checker can then tell a repeat within a
    // call from a new call whose first messages the upstream dropped.
    const call = String(extra.requestId);
    for (let i = 1; i <= count; i += 1) {
      // No relatedRequestId: the transport routes it to the GET stream (or
      // drops it, or only stores it with an event store, when none is open).
      await server.sendLoggingMessage({ level: 'info', logger: 'tether-test-upstream', data: { seq: i, of: count, call } }, extra.sessionId);
      if (i < count) await pause(delayMs);
    }
    return { content: [{ type: 'text', text: `sent ${count}` }] };
  });

  server.registerTool(UpstreamTools.Echo, { description: 'Returns its text.', inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server;
}

function pause(ms: number): Promise<unknown> {
  return ms <= 0 ? nextTurn() : new Promise((done) => setTimeout(done, ms));
}

const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

/** `Host` names a loopback address, and so does `Origin` if the request has one. */
function isLoopbackRequest(req: IncomingMessage): boolean {
  const origin = header(req, 'origin');
  return isLoopbackUrl(`http://${req.headers.host ?? ''}`) && (origin === undefined || isLoopbackUrl(origin));
}

function isLoopbackUrl(url: string): boolean {
  try {
    return LOOPBACK_HOSTNAMES.has(new URL(url).hostname);
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

function sendJsonRpcError(res: ServerResponse, status: number, code: number, message: string): void {
  const body = JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null });
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/** Options of {@link connectSdkClient}. */
export interface SdkClientOptions {
  /** A fetch to use instead of the global one (to count, delay or break requests). */
  fetch?: typeof fetch;
  /** Sent on every request (e.g. `Authorization`, `Origin`). */
  headers?: Record<string, string>;
  /** Default: fast for tests, 50 ms first delay, x1.5, 500 ms at most, 20 attempts. */
  reconnection?: Partial<StreamableHTTPReconnectionOptions>;
}

/** An initialized official SDK client. */
export interface SdkClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** Everything the client reported through `onerror` (broken streams, failed reconnects...), oldest first. */
  readonly errors: Error[];
  /** Closes the client (aborts its streams) without ending the session. */
  close(): Promise<void>;
}

const TEST_RECONNECTION: StreamableHTTPReconnectionOptions = {
  initialReconnectionDelay: 50,
  maxReconnectionDelay: 500,
  reconnectionDelayGrowFactor: 1.5,
  maxRetries: 20,
};

/**
 * Connects the official SDK `Client` over `StreamableHTTPClientTransport`
 * (initialize, then `notifications/initialized`, after which the transport
 * opens the standalone GET stream on its own). To end the session too, call
 * `transport.terminateSession()` (DELETE) before `close()`.
 */
export async function connectSdkClient(url: string, opts: SdkClientOptions = {}): Promise<SdkClient> {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    reconnectionOptions: { ...TEST_RECONNECTION, ...opts.reconnection },
    ...(opts.fetch === undefined ? {} : { fetch: opts.fetch }),
    ...(opts.headers === undefined ? {} : { requestInit: { headers: opts.headers } }),
  });
  const client = new Client({ name: 'tether-test-client', version: '0.0.0' }, { capabilities: {} });
  const errors: Error[] = [];
  client.onerror = (err) => errors.push(err);
  await client.connect(transport);
  return { client, transport, errors, close: () => client.close() };
}
