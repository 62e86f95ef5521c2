import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';

// A 2026-07-28-style stateless upstream: no sessions, answers each request on its own.
const seen: { headers: Record<string, unknown>; body: string }[] = [];
const upstream = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    seen.push({ headers: req.headers, body });
    res.writeHead(200, { 'content-type': 'text/event-stream', 'x-upstream': 'stateless' });
    res.write('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n');
    res.end('data: {"jsonrpc":"2.0","id":7,"result":{"ok":true}}\n\n');
  });
});

let nats: NatsServer;
let gateway: Gateway;
let url: string;
beforeAll(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  nats = await startNatsServer();
  const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
  const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstreamUrl, '--heartbeat', '200'], {});
  gateway = createGateway(config, await createLocalLog({ servers: nats.url, streamName: 'PASS' }), pino({ level: 'silent' }));
  url = `http://127.0.0.1:${await gateway.listen()}/mcp`;
});
afterAll(async () => {
  await gateway.close();
  upstream.close();
  await nats.cleanup();
});

describe('stateless (2026-07-28) requests', () => {
  it('pass through untouched: no session minted, no ids added, bytes as the upstream sent them', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'x', _meta: { protocolVersion: '2026-07-28' } } });
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(res.headers.get('x-upstream')).toBe('stateless');
    expect(await res.text()).toBe('data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\ndata: {"jsonrpc":"2.0","id":7,"result":{"ok":true}}\n\n');
    expect(seen.at(-1)?.body).toBe(body);
  });
});

describe('heartbeats', () => {
  it('an idle stream gets SSE comments so proxies keep it open', async () => {
    // deliver() is the one writer of every client stream: an idle log iterator must still produce comments.
    const { deliver } = await import('../src/streams/deliver.js');
    const chunks: string[] = [];
    const sink = createServer(async (_req, res) => {
      const idle = (async function* () {
        await new Promise((resolve) => setTimeout(resolve, 700));
      })();
      await deliver(res, idle, { headers: {}, priming: false, retryMs: 1000, heartbeatMs: 200, signal: new AbortController().signal });
      res.end();
    });
    await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
    const res = await fetch(`http://127.0.0.1:${(sink.address() as AddressInfo).port}/`);
    for await (const chunk of res.body!) chunks.push(Buffer.from(chunk).toString());
    sink.close();
    expect(chunks.join('').match(/^: keepalive$/gm)?.length ?? 0).toBeGreaterThanOrEqual(2);
  });
});
