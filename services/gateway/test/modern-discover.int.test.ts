import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * `server/discover` through a gateway with tasks on, in front of an upstream
 * that still advertises the 2025-11-25 tasks capability beside its own
 * extensions. SEP-2663: the extension replaces `capabilities.tasks`, which
 * MUST NOT be advertised; the gateway serves the extension itself.
 * The upstream is a plain HTTP server: what is tested is the gateway's
 * rewrite of whatever the upstream answers, byte for byte elsewhere.
 */
const TASKS = 'io.modelcontextprotocol/tasks';
const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'discover', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': {},
};
let upstream: Server;
let stack: InProcessStack;
let asked = 0;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    asked += 1;
    req.resume();
    const result = {
      resultType: 'complete',
      supportedVersions: ['2026-07-28'],
      serverInfo: { name: 'legacy-tasks', version: '0' },
      capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } }, extensions: { 'example.com/other': { on: true } } },
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: 1, result }));
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  stack = await startInProcessStack({ upstreamUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp` });
});

afterAll(async () => {
  await stack?.teardown();
  await new Promise((resolve) => upstream?.close(resolve));
});

describe('server/discover through the gateway', () => {
  it('drops the upstream\'s legacy capabilities.tasks, adds the extension, and keeps everything else', async () => {
    const before = asked;
    const res = await fetch(stack.urls[0]!, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: META } }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { result: { capabilities: Record<string, unknown>; serverInfo: unknown } };
    expect(asked).toBe(before + 1);
    expect(body.result.capabilities).toEqual({ tools: {}, extensions: { 'example.com/other': { on: true }, [TASKS]: {} } });
    expect(body.result.serverInfo).toEqual({ name: 'legacy-tasks', version: '0' });
  });
});
