import type { IncomingMessage, ServerResponse } from 'node:http';
import { once } from 'node:events';

/** A body over `maxBytes`: the caller answers 413 without reading further. */
export const BODY_TOO_LARGE = Symbol('body too large');

/**
 * A web `Request` for a node:http request. The body is read whole (MCP
 * bodies are JSON-RPC messages; the SDKs cap them at 4 MiB too) so the
 * router can look at it before the SDK does.
 */
export async function toWebRequest(req: IncomingMessage, maxBytes: number): Promise<Request | typeof BODY_TOO_LARGE> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
  const method = req.method ?? 'GET';
  if (method === 'GET' || method === 'HEAD') return new Request(url, { method, headers });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxBytes) return BODY_TOO_LARGE;
    chunks.push(chunk);
  }
  return new Request(url, { method, headers, body: Buffer.concat(chunks) });
}

/**
 * Writes a web `Response` to node:http, streaming its body as it comes (SSE
 * frames leave one by one) and honouring backpressure. When the client goes
 * away the body is cancelled, which ends whatever feeds it.
 */
export async function writeNodeResponse(response: Response, res: ServerResponse): Promise<void> {
  const headers: Record<string, string> = {};
  response.headers.forEach((value, name) => (headers[name] = value));
  res.writeHead(response.status, headers);
  if (response.body === null) {
    res.end();
    return;
  }
  res.flushHeaders();
  const reader = response.body.getReader();
  const cancel = (): void => void reader.cancel().catch(() => undefined);
  res.once('close', cancel);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await Promise.race([once(res, 'drain'), once(res, 'close')]);
      if (res.destroyed) return;
    }
    res.end();
  } catch {
    // The body errored (a reader that cannot continue): cut the connection so the client resumes and gets the verdict.
    res.destroy();
  } finally {
    res.off('close', cancel);
  }
}
