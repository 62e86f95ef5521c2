import { SseParser } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';

export const PROTOCOL_VERSION = '2025-11-25';

/** A hand-driven MCP client: raw fetch and our SSE parser, to see exactly what the gateway sends. */
export async function initialize(url: string, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } }),
  });
  const sessionId = res.headers.get('mcp-session-id');
  await res.arrayBuffer();
  if (res.status !== 200 || sessionId === null) throw new Error(`initialize answered ${res.status}`);
  await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION, ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
  }).then((r) => r.arrayBuffer());
  return sessionId;
}

export interface RawStream {
  readonly status: number;
  readonly headers: Headers;
  /** Parsed SSE messages; ends when the server ends the stream. */
  readonly messages: AsyncGenerator<SseMessage>;
  /** The JSON body of a non-SSE answer. */
  json(): Promise<unknown>;
  cancel(): void;
}

export async function request(url: string, init: { method: string; sessionId?: string; lastEventId?: string; body?: unknown; headers?: Record<string, string> }): Promise<RawStream> {
  const controller = new AbortController();
  const headers: Record<string, string> = { accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION, ...init.headers };
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  if (init.sessionId !== undefined) headers['mcp-session-id'] = init.sessionId;
  if (init.lastEventId !== undefined) headers['last-event-id'] = init.lastEventId;
  const res = await fetch(url, {
    method: init.method,
    headers,
    signal: controller.signal,
    ...(init.body === undefined ? {} : { body: typeof init.body === 'string' ? init.body : JSON.stringify(init.body) }),
  });
  async function* messages(): AsyncGenerator<SseMessage> {
    const parser = new SseParser();
    if (res.body === null) return;
    try {
      for await (const chunk of res.body) for (const m of parser.push(chunk)) yield m;
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    }
  }
  return { status: res.status, headers: res.headers, messages: messages(), json: () => res.json(), cancel: () => controller.abort() };
}

export const callTool = (id: number, name: string, args: Record<string, unknown>): unknown => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args, _meta: { progressToken: `p${id}` } },
});
