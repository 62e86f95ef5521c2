import type { ServerResponse } from 'node:http';

/**
 * One SSE event (WHATWG HTML, "Server-sent events", event stream format):
 * an `id:` line, an optional `retry:` line, then one `data:` line per line
 * of the payload, and a blank line. A payload with no lines still gets one
 * empty `data:` line, which is how a priming event looks (SEP-1699).
 */
export function sseEvent(id: string, data: string, retryMs?: number): string {
  let frame = `id: ${id}\n`;
  if (retryMs !== undefined) frame += `retry: ${retryMs}\n`;
  for (const line of data.split(/\r\n|\r|\n/)) frame += `data: ${line}\n`;
  return `${frame}\n`;
}

/** Starts an SSE response. */
export function startSse(res: ServerResponse, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache, no-transform', connection: 'keep-alive', ...headers });
  res.flushHeaders();
}

/** Writes if the client is still there; a gone client is not an error (the log has the event). */
export function writeIfOpen(res: ServerResponse, chunk: string): void {
  if (!res.destroyed && !res.writableEnded) res.write(chunk);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers });
  res.end(text);
}
