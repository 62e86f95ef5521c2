import type { IncomingMessage, ServerResponse } from 'node:http';
import type { StreamLog, ZooEvent } from './mini-mcp.js';

/** Small HTTP and SSE writing helpers of the zoo's servers. */

export type JsonRpcId = string | number;

/** Writes SSE to one response. */
export interface SseOut {
  write(e: ZooEvent, retryMs?: number): void;
  /** Writes a complete SSE frame as given. */
  frame(text: string): void;
  end(): void;
  /** Replays `events`, then follows `log` live until it ends. */
  serve(events: readonly ZooEvent[], log: StreamLog | undefined): void;
}

export function openSse(res: ServerResponse, sid: string, headers: Record<string, string> = {}): SseOut {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'mcp-session-id': sid, ...headers });
  res.flushHeaders();
  const out: SseOut = {
    write(e, retryMs) {
      if (res.writableEnded) return;
      res.write(`${e.id === undefined ? '' : `id: ${e.id}\n`}${retryMs === undefined ? '' : `retry: ${retryMs}\n`}data: ${e.data}\n\n`);
    },
    frame(text) {
      if (!res.writableEnded) res.write(text);
    },
    end() {
      if (!res.writableEnded) res.end();
    },
    serve(events, log) {
      for (const e of events) out.write(e);
      if (log === undefined || log.done) return out.end();
      const off = log.subscribe((e) => (e === undefined ? out.end() : out.write(e)));
      res.on('close', off);
    },
  };
  return out;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, sid?: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...(sid === undefined ? {} : { 'mcp-session-id': sid }), ...headers });
  res.end(JSON.stringify(body));
}

export function rpcError(id: JsonRpcId | null | undefined, code: number, message: string, data?: unknown): unknown {
  return { jsonrpc: '2.0', id: id ?? null, error: { code, message, ...(data === undefined ? {} : { data }) } };
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
