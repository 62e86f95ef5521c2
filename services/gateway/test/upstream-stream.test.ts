import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// Internal module (not the package's entry): the listener's upstream GET.
import { openUpstreamStream } from '../src/upstream-stream.js';
import { UpstreamError } from '../src/upstream.js';

let server: Server;
let base: string;
const seenHeaders: Record<string, string | string[] | undefined>[] = [];
beforeAll(async () => {
  server = createServer((req, res) => {
    seenHeaders.push(req.headers);
    if (req.url === '/sse') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\ndata: {"n":1}\n\n');
      setTimeout(() => res.end('id: 2\ndata: {"n":2}\n\n'), 20);
    } else if (req.url === '/gzip') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'content-encoding': 'gzip' });
      res.end('not really gzip');
    } else if (req.url === '/cut') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 1\ndata: {}\n\n');
      setTimeout(() => res.socket?.destroy(), 20);
    } else {
      res.writeHead(405).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

async function text(body: AsyncIterable<Uint8Array>): Promise<string> {
  let out = '';
  for await (const chunk of body) out += Buffer.from(chunk).toString('utf8');
  return out;
}

describe('openUpstreamStream (the listener GET, on node:http)', () => {
  it('streams an SSE body as it comes, with the headers given and no Accept-Encoding', async () => {
    const s = await openUpstreamStream(`${base}/sse`, { accept: 'text/event-stream', 'mcp-session-id': 'up-1' }, new AbortController().signal);
    expect([s.status, s.eventStream]).toEqual([200, true]);
    expect(await text(s.body)).toBe('id: 1\ndata: {"n":1}\n\nid: 2\ndata: {"n":2}\n\n');
    expect(seenHeaders.at(-1)).toMatchObject({ accept: 'text/event-stream', 'mcp-session-id': 'up-1' });
    expect(seenHeaders.at(-1)?.['accept-encoding']).toBeUndefined();
  });

  it('an encoded body or another status is not an event stream we record', async () => {
    const gz = await openUpstreamStream(`${base}/gzip`, {}, new AbortController().signal);
    expect([gz.status, gz.eventStream]).toEqual([200, false]);
    gz.close();
    const other = await openUpstreamStream(`${base}/nope`, {}, new AbortController().signal);
    expect([other.status, other.eventStream]).toEqual([405, false]);
    other.close();
  });

  it('a connection cut mid-body throws from the body; an abort ends it; an unreachable upstream is an UpstreamError naming it', async () => {
    const cut = await openUpstreamStream(`${base}/cut`, {}, new AbortController().signal);
    await expect(text(cut.body)).rejects.toThrow();
    const abort = new AbortController();
    const open = await openUpstreamStream(`${base}/sse`, {}, abort.signal);
    abort.abort();
    await expect(text(open.body)).rejects.toThrow();
    const err = await openUpstreamStream('http://127.0.0.1:9/mcp', {}, new AbortController().signal).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UpstreamError);
    expect((err as Error).message).toMatch(/^upstream http:\/\/127\.0\.0\.1:9\/mcp did not answer: /);
  });
});
