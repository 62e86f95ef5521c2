import { createServer } from 'node:http';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { CallToolRequestSchema, ListToolsRequestSchema, isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { COUNT_TOOL } from './mini-mcp.js';

/** Anything in the zoo: a URL to probe and a way to stop it. */
export interface ZooHandle {
  readonly name: string;
  readonly url: string;
  close(): Promise<void>;
}

export interface SdkServerOptions {
  /** Resumable with the SDK's example `InMemoryEventStore`. Default true; false gives a server with no ids at all. */
  eventStore?: boolean;
  /** `retryInterval` of the priming event. Default 100 ms. */
  retryMs?: number;
}

/**
 * The correct single-process server: the official SDK's Streamable HTTP
 * transport with `InMemoryEventStore`, one transport per session, and the
 * same `count` tool as the rest of the zoo.
 *
 * The example store orders events by comparing ids as strings
 * (`<stream>_<ms>_<random>`), so two events of one stream stored in the same
 * millisecond can replay out of order. `count` spaces its events out to stay
 * clear of that; it is the store's flaw, not the subject of these tests.
 */
export async function startSdkServer(options: SdkServerOptions = {}): Promise<ZooHandle> {
  const withStore = options.eventStore ?? true;
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const sockets = new Set<Socket>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const header = req.headers['mcp-session-id'];
    const sid = typeof header === 'string' ? header : undefined;
    const body = req.method === 'POST' ? (JSON.parse(await readBody(req)) as unknown) : undefined;
    let transport = sid === undefined ? undefined : transports.get(sid);
    if (transport === undefined && sid === undefined && isInitializeRequest(body)) {
      const t = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        ...(withStore ? { eventStore: new InMemoryEventStore(), retryInterval: options.retryMs ?? 100 } : {}),
        onsessioninitialized: (id) => void transports.set(id, t),
      });
      t.onclose = () => {
        if (t.sessionId !== undefined) transports.delete(t.sessionId);
      };
      await countServer().connect(t);
      transport = t;
    }
    if (transport === undefined) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'Session not found' } }));
      return;
    }
    await transport.handleRequest(req, res, body);
  };

  const server: HttpServer = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    name: withStore ? 'sdk-in-memory-event-store' : 'sdk-without-event-store',
    url: `http://127.0.0.1:${port}/mcp`,
    async close() {
      for (const t of transports.values()) await t.close();
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

function countServer(): Server {
  const server = new Server({ name: 'zoo-sdk', version: '0.0.0' }, { capabilities: { tools: {}, logging: {} } });
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [COUNT_TOOL] }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const args = (request.params.arguments ?? {}) as { n?: number; intervalMs?: number };
    const n = args.n ?? 40;
    const intervalMs = args.intervalMs ?? 15;
    const token = request.params._meta?.progressToken;
    for (let i = 1; i <= n; i++) {
      await sleep(intervalMs);
      if (extra.signal.aborted) break;
      await (token === undefined
        ? extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data: `tick ${i}` } })
        : extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: n } }));
    }
    await sleep(intervalMs);
    return { content: [{ type: 'text', text: `counted ${n}` }] };
  });
  return server;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
