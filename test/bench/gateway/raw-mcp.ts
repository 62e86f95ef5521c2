/**
 * A hand-driven MCP client on node:http and our SSE parser: no SDK, no
 * fetch/WHATWG streams, so what the benchmark times is the server side. The
 * same code talks to the gateway and to the upstream directly.
 */
import { Agent, request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { SseParser } from '@tether/protocol';

export const PROTOCOL_VERSION = '2025-11-25';

/** One MCP endpoint and the connection pool used for its POSTs. */
export interface Endpoint {
  readonly url: URL;
  readonly agent: Agent;
  /** Headers added to every request, asked for per request (a client's `Authorization`, fresh or reused). */
  readonly headers?: () => Readonly<Record<string, string>>;
}

export function createEndpoint(url: string, headers?: () => Readonly<Record<string, string>>): Endpoint {
  return { url: new URL(url), agent: new Agent({ keepAlive: true, maxSockets: Infinity }), ...(headers === undefined ? {} : { headers }) };
}

/** What one POST got back. Times are `performance.now()` values. */
export interface PostResult {
  readonly status: number;
  readonly sessionId: string | undefined;
  readonly contentType: string;
  /** When the JSON-RPC response to `expectId` arrived (NaN if it never did). */
  readonly responseAt: number;
  /** When the HTTP response ended. */
  readonly endAt: number;
  /** `notifications/progress` messages seen before the response. */
  readonly progress: number;
  /** The JSON-RPC response to `expectId`, parsed. */
  readonly response: unknown;
}

function send(url: URL, agent: Agent, method: string, headers: Record<string, string>, body?: string): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path: url.pathname, method, headers, agent }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

function headersFor(sessionId: string | undefined, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': PROTOCOL_VERSION, ...extra };
  if (sessionId !== undefined) h['mcp-session-id'] = sessionId;
  return h;
}

/**
 * POSTs one JSON-RPC message and reads the whole answer: a JSON body, or an
 * SSE stream until the server ends it (the gateway after the stream's `end`
 * event, the SDK upstream after the last response).
 */
export async function post(ep: Endpoint, sessionId: string | undefined, message: Record<string, unknown>): Promise<PostResult> {
  const expectId = message['id'];
  const res = await send(ep.url, ep.agent, 'POST', headersFor(sessionId, ep.headers?.()), JSON.stringify(message));
  const contentType = String(res.headers['content-type'] ?? '');
  const sid = res.headers['mcp-session-id'];
  let responseAt = Number.NaN;
  let response: unknown;
  let progress = 0;
  const see = (text: string): void => {
    const value = JSON.parse(text) as { id?: unknown; method?: unknown };
    for (const m of Array.isArray(value) ? (value as { id?: unknown; method?: unknown }[]) : [value]) {
      if (m.method === 'notifications/progress') progress += 1;
      else if (m.method === undefined && expectId !== undefined && m.id === expectId && Number.isNaN(responseAt)) {
        responseAt = performance.now();
        response = m;
      }
    }
  };
  if (contentType.startsWith('text/event-stream')) {
    const parser = new SseParser();
    for await (const chunk of res) for (const msg of parser.push(chunk as Buffer)) if (msg.hasData && msg.data !== '') see(msg.data);
  } else {
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    if (text !== '' && contentType.startsWith('application/json')) see(text);
  }
  return { status: res.statusCode ?? 0, sessionId: typeof sid === 'string' ? sid : undefined, contentType, responseAt, endAt: performance.now(), progress, response };
}

let nextId = 1;

/** initialize + notifications/initialized; returns the session id. */
export async function initialize(ep: Endpoint): Promise<string> {
  const init = await post(ep, undefined, {
    jsonrpc: '2.0',
    id: nextId++,
    method: 'initialize',
    params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'tether-gateway-bench', version: '0' } },
  });
  if (init.status !== 200 || init.sessionId === undefined) throw new Error(`initialize at ${ep.url.href} answered ${init.status}`);
  const note = await post(ep, init.sessionId, { jsonrpc: '2.0', method: 'notifications/initialized' });
  if (note.status !== 202) throw new Error(`notifications/initialized at ${ep.url.href} answered ${note.status}`);
  return init.sessionId;
}

/** tools/call `stream_progress {count, delayMs: 0}` with a progress token; fails unless all `count` notifications and the result came. */
export async function streamProgress(ep: Endpoint, sessionId: string, count: number): Promise<PostResult> {
  const id = nextId++;
  const started = performance.now();
  const result = await post(ep, sessionId, {
    jsonrpc: '2.0',
    id,
    method: 'tools/call',
    params: { name: 'stream_progress', arguments: { count, delayMs: 0 }, _meta: { progressToken: `p${id}` } },
  });
  if (result.status !== 200 || result.progress !== count || Number.isNaN(result.responseAt)) {
    throw new Error(`stream_progress(${count}) at ${ep.url.href}: status ${result.status}, ${result.progress} progress, response ${Number.isNaN(result.responseAt) ? 'missing' : 'ok'}`);
  }
  return { ...result, responseAt: result.responseAt - started, endAt: result.endAt - started };
}

/** An open GET stream whose first SSE block arrived. */
export interface IdleStream {
  /** The id of the first event (a fresh GET's priming event names the stream head), if it had one. */
  readonly firstId: string | undefined;
  /** Resolves when the server or we end it. */
  readonly closed: Promise<void>;
  close(): void;
}

/**
 * Opens a GET SSE stream (its own connection: `agent` should not keep sockets
 * alive) and resolves once the first SSE block arrived, i.e. the server has
 * finished setting it up. Heartbeats are read and dropped afterwards.
 */
export function openGet(ep: Endpoint, agent: Agent, sessionId: string, lastEventId?: string, timeoutMs = 30_000): Promise<IdleStream> {
  const headers: Record<string, string> = { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION, ...ep.headers?.() };
  if (lastEventId !== undefined) headers['last-event-id'] = lastEventId;
  return new Promise((resolve, reject) => {
    const req = request({ host: ep.url.hostname, port: ep.url.port, path: ep.url.pathname, method: 'GET', headers, agent });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`GET stream at ${ep.url.href} sent nothing within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        clearTimeout(timer);
        res.resume();
        reject(new Error(`GET stream at ${ep.url.href} answered ${res.statusCode ?? 0}`));
        return;
      }
      const closed = new Promise<void>((done) => res.once('close', () => done()));
      const parser = new SseParser();
      let first = true;
      res.on('data', (chunk: Buffer) => {
        if (!first) return;
        const [msg] = parser.push(chunk);
        if (msg === undefined) return;
        first = false;
        clearTimeout(timer);
        resolve({ firstId: msg.id, closed, close: () => req.destroy() });
      });
      res.on('error', () => undefined);
    });
    req.end();
  });
}
