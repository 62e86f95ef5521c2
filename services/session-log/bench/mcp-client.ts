/**
 * A hand-driven MCP client on node:http: initialize, then `stream_progress`
 * calls whose SSE answer is read to the JSON-RPC response. The same code
 * talks to a gateway and to the upstream directly, so the difference is the
 * gateway's.
 */
import { Agent, request } from 'node:http';
import type { IncomingMessage } from 'node:http';
import { SseParser } from '@tether/protocol';

const VERSION = '2025-11-25';
let nextId = 1;

export interface Endpoint {
  readonly url: URL;
  readonly agent: Agent;
  sessionId: string | undefined;
}

export function endpoint(url: string): Endpoint {
  return { url: new URL(url), agent: new Agent({ keepAlive: true }), sessionId: undefined };
}

function post(ep: Endpoint, message: Record<string, unknown>): Promise<IncomingMessage> {
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': VERSION };
  if (ep.sessionId !== undefined) headers['mcp-session-id'] = ep.sessionId;
  return new Promise((resolve, reject) => {
    const req = request({ host: ep.url.hostname, port: ep.url.port, path: ep.url.pathname, method: 'POST', headers, agent: ep.agent }, resolve);
    req.on('error', reject);
    req.end(JSON.stringify(message));
  });
}

async function drain(res: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of res) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export async function initialize(ep: Endpoint): Promise<void> {
  const res = await post(ep, { jsonrpc: '2.0', id: nextId++, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'bench-grpc', version: '0' } } });
  const sid = res.headers['mcp-session-id'];
  await drain(res);
  if (res.statusCode !== 200 || typeof sid !== 'string') throw new Error(`initialize at ${ep.url.href} answered ${res.statusCode}`);
  ep.sessionId = sid;
  const note = await post(ep, { jsonrpc: '2.0', method: 'notifications/initialized' });
  await drain(note);
}

/** `stream_progress {count}`: ms until the JSON-RPC response arrived (after `count` progress events). */
export async function streamProgress(ep: Endpoint, count: number): Promise<number> {
  const id = nextId++;
  const started = performance.now();
  const res = await post(ep, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'stream_progress', arguments: { count, delayMs: 0 }, _meta: { progressToken: `p${id}` } } });
  const parser = new SseParser();
  let seen = 0;
  let at = Number.NaN;
  for await (const chunk of res) {
    for (const msg of parser.push(chunk as Buffer)) {
      if (!msg.hasData || msg.data === '') continue;
      const m = JSON.parse(msg.data) as { id?: unknown; method?: unknown };
      if (m.method === 'notifications/progress') seen += 1;
      else if (m.id === id && Number.isNaN(at)) at = performance.now();
    }
  }
  if (seen !== count || Number.isNaN(at)) throw new Error(`stream_progress(${count}) at ${ep.url.href}: ${seen} progress events, response ${Number.isNaN(at) ? 'missing' : 'ok'}`);
  return at - started;
}
