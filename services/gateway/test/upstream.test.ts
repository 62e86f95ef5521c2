import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Internal module (not the package's entry): the gateway's short upstream calls.
import { callUpstream, closeUpstreamPool, isEventStream, UpstreamError } from '../src/upstream.js';

let server: Server;
let base: string;
let connections = 0;
const open = new Set<Socket>();
const seen: { method: string; url: string; headers: IncomingHttpHeaders; body: string }[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      if (req.url === '/json') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'up-1' });
        res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
      } else if (req.url === '/sse') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('id: 1\ndata: \n\n');
        setTimeout(() => res.end('id: 2\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'), 20);
      } else if (req.url === '/silent') {
        // An SSE answer that never sends anything after its headers.
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
      } else if (req.url === '/gzip') {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
        res.end('not really gzip');
      } else {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}');
      }
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await closeUpstreamPool();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function text(body: AsyncIterable<Uint8Array>): Promise<string> {
  let out = '';
  for await (const chunk of body) out += Buffer.from(chunk).toString('utf8');
  return out;
}

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const started = Date.now(); Date.now() - started < timeoutMs; await new Promise((r) => setTimeout(r, 10))) if (check()) return true;
  return check();
}

const post = { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call"}') };

describe('callUpstream (pooled keep-alive connections)', () => {
  it('reuses one connection across calls: JSON, a streamed SSE body, a cancelled 404 and a DELETE', async () => {
    // undici frees a connection on the tick after its body ends; a call in
    // that same tick would open a second one (in the gateway a call comes
    // after a log round trip at least).
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    const before = connections;
    for (let i = 0; i < 3; i += 1) {
      const json = await callUpstream(`${base}/json`, post);
      expect([json.status, json.header('mcp-session-id'), isEventStream(json)]).toEqual([200, 'up-1', false]);
      expect((await json.bytes()).toString()).toBe('{"jsonrpc":"2.0","id":1,"result":{}}');
      await tick();
      const sse = await callUpstream(`${base}/sse`, post);
      expect([sse.status, isEventStream(sse)]).toEqual([200, true]);
      expect(await text(sse.body)).toBe('id: 1\ndata: \n\nid: 2\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
      await tick();
      const gone = await callUpstream(`${base}/gone`, post);
      expect(gone.status).toBe(404);
      await gone.cancel();
      await tick();
      const deleted = await callUpstream(`${base}/gone`, { method: 'DELETE', headers: { 'mcp-session-id': 'up-1' } });
      await deleted.cancel();
      await tick();
    }
    expect(connections - before).toBe(1);
    // Sent as given: the body, our headers, no Accept-Encoding of fetch's.
    const last = seen.filter((s) => s.method === 'POST').at(-1)!;
    expect(last.body).toBe(post.body.toString());
    expect(last.headers).toMatchObject({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    expect(last.headers['accept-encoding']).toBeUndefined();
  });

  it('an encoded event stream is not one we record', async () => {
    const gz = await callUpstream(`${base}/gzip`, post);
    expect([gz.status, gz.header('content-encoding'), isEventStream(gz)]).toEqual([200, 'gzip', false]);
    await gz.cancel();
  });

  it('an abort ends a body that sends nothing, at once', async () => {
    const abort = new AbortController();
    const silent = await callUpstream(`${base}/silent`, { ...post, signal: abort.signal });
    const read = text(silent.body);
    setTimeout(() => abort.abort(), 20);
    const started = Date.now();
    await expect(read).rejects.toThrow();
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('an unreachable upstream is an UpstreamError naming the URL, counted once, never the body', async () => {
    const counted: unknown[] = [];
    const errors = { add: (value: number, attributes?: unknown) => void counted.push([value, attributes]) };
    const err = await callUpstream('http://127.0.0.1:9/mcp', { ...post, body: Buffer.from('secret payload'), errors }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as UpstreamError).code).toBe('upstream_unreachable');
    expect((err as Error).message).toMatch(/^upstream http:\/\/127\.0\.0\.1:9\/mcp did not answer: .*ECONNREFUSED/);
    expect((err as Error).message).not.toContain('secret');
    expect(counted).toEqual([[1, { reason: 'unreachable' }]]);
  });

  it('an aborted call rejects with the abort, uncounted', async () => {
    const counted: unknown[] = [];
    const errors = { add: (value: number) => void counted.push(value) };
    const abort = new AbortController();
    abort.abort();
    const err = await callUpstream(`${base}/json`, { ...post, signal: abort.signal, errors }).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(UpstreamError);
    expect(counted).toEqual([]);
  });

  it('closeUpstreamPool closes idle connections; the next call opens a fresh pool', async () => {
    await (await callUpstream(`${base}/json`, post)).bytes();
    expect(open.size).toBeGreaterThan(0);
    await closeUpstreamPool();
    expect(await until(() => open.size === 0, 2_000)).toBe(true);
    const again = await callUpstream(`${base}/json`, post);
    expect(again.status).toBe(200);
    await again.bytes();
  });
});
