import { once } from 'node:events';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyError, readBody } from '../src/http/request.js';

// A real server around readBody: a refused body must reach the client as a
// 413 while the client is still sending, never as a reset.
let url: string;
const server = createServer((req, res) => {
  readBody(req, 1024).then(
    (body) => res.end(`ok ${body.length}`),
    (err: unknown) => {
      res.writeHead(err instanceof BodyError ? err.reply.status : 500);
      res.end(err instanceof Error ? err.message : 'error');
    },
  );
});
beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => server.close());

function post(chunks: Buffer[], headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    // Send slowly, so the answer comes while the body is still arriving.
    let i = 0;
    const next = (): void => {
      if (i === chunks.length) return void req.end();
      req.write(chunks[i++], () => setTimeout(next, 2));
    };
    next();
  });
}

const pieces = (n: number, size: number): Buffer[] => Array.from({ length: n }, () => Buffer.alloc(size, 'x'));

describe('readBody', () => {
  it('a body within the limit is read whole', async () => {
    expect(await post(pieces(4, 200), { 'content-length': '800' })).toEqual({ status: 200, body: 'ok 800' });
  });

  it('a declared length over the limit gets 413 while the client is still sending, not a reset', async () => {
    const answer = await post(pieces(64, 4096), { 'content-length': String(64 * 4096) });
    expect(answer.status).toBe(413);
    expect(answer.body).toMatch(/request body of 262144 bytes exceeds the limit of 1024 bytes/);
  });

  it('a chunked body that grows past the limit gets 413, not a reset', async () => {
    const answer = await post(pieces(64, 4096), { 'transfer-encoding': 'chunked' });
    expect(answer.status).toBe(413);
    expect(answer.body).toMatch(/exceeds the limit of 1024 bytes/);
  });
});
