import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ModernTools, startModernUpstream } from '@tether/testing';
import type { ModernUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * The 2026-07-28 era passes through the gateway untouched (issue 23's first
 * step): an SDK v2 client pinned to 2026-07-28, an SDK v2 `createMcpHandler`
 * upstream, the same answer directly and through the gateway. The revision
 * requires `Mcp-Method` (and `Mcp-Name` for the methods that name something)
 * on every request POST and checks them against the body: a gateway that
 * drops them turns every modern call into a -32020.
 */
let upstream: ModernUpstream;
let stack: InProcessStack;

beforeAll(async () => {
  upstream = await startModernUpstream();
  stack = await startInProcessStack({ upstreamUrl: upstream.url });
});

afterAll(async () => {
  await stack?.teardown();
  await upstream?.close();
});

async function greet(url: string): Promise<unknown> {
  const client = new Client({ name: 'modern-client', version: '0.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  try {
    return await client.callTool({ name: ModernTools.Greet, arguments: { name: 'tether' } });
  } finally {
    await client.close();
  }
}

describe('2026-07-28 through the gateway', () => {
  it('a pinned v2 client calls a v2 upstream through the gateway as it does directly', async () => {
    const direct = await greet(upstream.url);
    const before = upstream.requests().length;
    const through = await greet(stack.urls[0]!);
    expect(through).toEqual(direct);
    expect(JSON.stringify(through)).toContain('hello tether');
    // The upstream saw the standard headers the client sent.
    const call = upstream.requests().slice(before).find((h) => h['mcp-method'] === 'tools/call');
    expect(call).toMatchObject({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': ModernTools.Greet });
  });

  it('forwards Mcp-Param-* headers, and still no header it does not own or know', async () => {
    const before = upstream.requests().length;
    const res = await fetch(stack.urls[0]!, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/call',
        'mcp-name': ModernTools.Greet,
        'mcp-param-name': 'tether',
        cookie: 'secret=1',
        'x-internal': 'no',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: ModernTools.Greet, arguments: { name: 'tether' } } }),
    });
    await res.arrayBuffer();
    const seen = upstream.requests().slice(before)[0]!;
    expect(seen['mcp-param-name']).toBe('tether');
    expect(seen.cookie).toBeUndefined();
    expect(seen['x-internal']).toBeUndefined();
  });

  it('GET and DELETE without a session get the upstream\'s own answer (405 from a modern-only server), byte for byte', async () => {
    for (const method of ['GET', 'DELETE']) {
      const answer = async (url: string): Promise<[number, string | null, string]> => {
        const res = await fetch(url, { method, headers: { accept: 'text/event-stream', 'mcp-protocol-version': '2026-07-28' } });
        return [res.status, res.headers.get('allow'), await res.text()];
      };
      const direct = await answer(upstream.url);
      expect(direct[0]).toBe(405);
      expect(await answer(stack.urls[0]!)).toEqual(direct);
    }
  });
});
