import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { EventKind } from '@tether/cursor-proto';
import { EventLog } from './log.js';
import { sendJson, sseEvent, startSse, writeIfOpen } from './sse.js';
import { COUNTDOWN_TOOL, countdown, countdownArgs } from './tool.js';

export interface CustomServerOptions {
  /** `host:port` of the Tether session-log service. */
  readonly log: string;
  /** Its bearer token. */
  readonly token?: string;
  /** Port; 0 picks a free one. Default 0. */
  readonly port?: number;
  /** Name of this instance (in logs and session metadata). Default `custom-<random>`. */
  readonly instance?: string;
}

export interface CustomServer {
  /** `http://127.0.0.1:<port>`; the MCP endpoint is `<url>/mcp`. */
  readonly url: string;
  readonly port: number;
  close(): Promise<void>;
}

const SUPPORTED_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'];
/** Sent as the SSE `retry:` hint: how soon a cut client should come back. */
const RETRY_MS = 200;
const MAX_BODY_BYTES = 1024 * 1024;
const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

type JsonRpc = { jsonrpc?: unknown; id?: string | number; method?: unknown; params?: Record<string, unknown> };

/**
 * An MCP server that speaks Streamable HTTP itself, on node:http (no SDK
 * transport), and keeps every SSE event in Tether's log through the gRPC
 * cursor API: each event is appended, and so durable, before the client
 * sees it, and a client that comes back with `Last-Event-ID` is served from
 * the log by whichever instance it reaches.
 */
export async function startCustomServer(options: CustomServerOptions): Promise<CustomServer> {
  const instance = options.instance ?? `custom-${randomBytes(3).toString('hex')}`;
  const log = new EventLog(options.log, options.token);
  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      process.stderr.write(`${instance}: ${req.method} failed: ${String(err)}\n`);
      if (!res.headersSent) sendJson(res, 500, { error: 'internal error' });
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') return sendJson(res, 404, { error: 'not found' });
    // DNS rebinding protection (spec, "Security Warning"): only loopback origins here.
    const origin = req.headers.origin;
    if (origin !== undefined && !/^https?:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/.test(origin)) return sendJson(res, 403, { error: 'origin not allowed' });
    const principal = req.headers.authorization ?? '';
    const sessionId = header(req, 'mcp-session-id');
    if (req.method === 'POST') return post(req, res, principal, sessionId);
    if (req.method === 'GET') return get(req, res, principal, sessionId);
    if (req.method === 'DELETE') {
      if (sessionId === undefined || (await log.findSession(sessionId, principal)) === undefined) return sendJson(res, 404, { error: 'unknown session' });
      await log.closeSession(sessionId, instance);
      res.writeHead(200).end();
      return;
    }
    res.writeHead(405, { allow: 'GET, POST, DELETE' }).end();
  }

  async function post(req: IncomingMessage, res: ServerResponse, principal: string, sessionId: string | undefined): Promise<void> {
    const msg = parse(await readBody(req));
    if (msg === undefined) return sendJson(res, 400, rpcError(null, -32700, 'expected one JSON-RPC message'));
    if (msg.method === 'initialize') {
      if (sessionId !== undefined) return sendJson(res, 400, rpcError(msg.id ?? null, -32600, 'initialize must not carry a session'));
      const asked = msg.params?.['protocolVersion'];
      const version = typeof asked === 'string' && SUPPORTED_VERSIONS.includes(asked) ? asked : (SUPPORTED_VERSIONS[0] as string);
      const session = await log.openSession(principal, { protocolVersion: version, openedBy: instance });
      const result = { protocolVersion: version, capabilities: { tools: {} }, serverInfo: { name: 'tether-custom-server', version: '0.1.0' } };
      return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result }, { 'mcp-session-id': session.sessionId });
    }
    if (sessionId === undefined) return sendJson(res, 400, rpcError(msg.id ?? null, -32600, 'Mcp-Session-Id is required'));
    if ((await log.findSession(sessionId, principal)) === undefined) return sendJson(res, 404, rpcError(msg.id ?? null, -32001, 'session not found'));
    const headers = { 'mcp-session-id': sessionId };
    if (msg.id === undefined || typeof msg.method !== 'string') {
      res.writeHead(202, headers).end(); // a notification or a response: accepted, nothing to answer
      return;
    }
    if (msg.method === 'ping') return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result: {} }, headers);
    if (msg.method === 'tools/list') return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result: { tools: [COUNTDOWN_TOOL] } }, headers);
    if (msg.method !== 'tools/call') return sendJson(res, 200, rpcError(msg.id, -32601, `unknown method ${msg.method}`), headers);
    const args = countdownArgs(msg.params?.['arguments']);
    if (msg.params?.['name'] !== COUNTDOWN_TOOL.name || typeof args === 'string') {
      return sendJson(res, 200, rpcError(msg.id, -32602, typeof args === 'string' ? args : 'unknown tool'), headers);
    }
    const meta = msg.params['_meta'] as { progressToken?: string | number } | undefined;

    // A new response stream: every event is appended before it is written,
    // and the run goes on if the client goes away, so that a resume on any
    // instance finds all of it in the log.
    const stream = Array.from(randomBytes(8), (b) => BASE32[b & 31]).join('');
    startSse(res, headers);
    const primeId = await log.append(sessionId, stream, 'prime', '');
    writeIfOpen(res, sseEvent(primeId, '', RETRY_MS));
    try {
      for await (const message of countdown(msg.id, meta?.progressToken, args)) {
        const data = JSON.stringify(message);
        writeIfOpen(res, sseEvent(await log.append(sessionId, stream, 'event', data), data));
      }
      await log.append(sessionId, stream, 'end', '');
    } finally {
      res.end();
    }
  }

  async function get(req: IncomingMessage, res: ServerResponse, principal: string, sessionId: string | undefined): Promise<void> {
    const lastEventId = header(req, 'last-event-id');
    // This server sends nothing unprompted, so it offers no standalone GET stream.
    if (lastEventId === undefined) return void res.writeHead(405, { allow: 'POST, DELETE' }).end();
    if (sessionId === undefined) return sendJson(res, 400, { error: 'Mcp-Session-Id is required' });
    const abort = new AbortController();
    res.once('close', () => abort.abort());
    const resume = log.resume(sessionId, lastEventId, principal, abort.signal);
    const ack = await resume.ack;
    if ('refused' in ack) {
      const verdict = ack.refused;
      // DESIGN section 7: malformed is the client's mistake; any other
      // refusal of a session that is the caller's ends it, and 404 makes a
      // spec-compliant client start a new one.
      if (verdict !== 'malformed' && verdict !== 'unknown_session') await log.closeSession(sessionId, instance).catch(() => undefined);
      return sendJson(res, verdict === 'malformed' ? 400 : 404, { error: 'resume refused', verdict }, { 'tether-resume': verdict });
    }
    if (ack.endedAtCursor || ack.nothingLeft) {
      abort.abort();
      return void res.writeHead(204, { 'tether-resume': 'resumed' }).end();
    }
    startSse(res, { 'mcp-session-id': sessionId, 'tether-resume': 'resumed' });
    await resume.events((event) => {
      if (event.kind === EventKind.END) {
        res.end();
        return undefined;
      }
      if (res.destroyed || res.writableEnded) return undefined;
      return res.write(sseEvent(event.id, event.payload.toString('utf8'))) ? undefined : once(res, 'drain').then(() => undefined);
    });
    res.end();
  }

  server.listen(options.port ?? 0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      log.close();
    },
  };
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return typeof value === 'string' && value !== '' ? value : undefined;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > MAX_BODY_BYTES) throw new Error('request body too large');
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parse(text: string): JsonRpc | undefined {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) && (value as JsonRpc).jsonrpc === '2.0' ? (value as JsonRpc) : undefined;
  } catch {
    return undefined;
  }
}

function rpcError(id: string | number | null, code: number, message: string): object {
  return { jsonrpc: '2.0', id, error: { code, message } };
}
