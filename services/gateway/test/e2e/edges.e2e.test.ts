import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamTools } from '@tether/testing';
import { callTool, initialize, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack;
beforeAll(async () => {
  stack = await startStack({ gateways: 2, eventStore: true, args: ['--max-body-bytes', '65536', '--max-streams-per-session', '3'] });
});
afterAll(async () => {
  await stack?.teardown();
});

describe('security and bad input', () => {
  it('a bad Origin gets 403; a loopback Origin passes', async () => {
    const bad = await request(stack.url, { method: 'POST', headers: { origin: 'https://evil.example' }, body: { jsonrpc: '2.0', id: 1, method: 'initialize', params: {} } });
    expect(bad.status).toBe(403);
    expect(await bad.json()).toMatchObject({ error: { message: 'Forbidden: Origin not allowed' } });
    const good = await initialize(stack.url, { origin: 'http://localhost:5173' });
    expect(good).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it('oversized body 413, oversized headers 431, malformed JSON 400, malformed session id 400, unknown session 404', async () => {
    const sessionId = await initialize(stack.url);
    const big = await request(stack.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.Echo, { text: 'x'.repeat(70_000) }) });
    expect(big.status).toBe(413);
    expect(await big.json()).toMatchObject({ error: { message: expect.stringMatching(/exceeds the limit of 65536 bytes/) } });
    const huge = await fetch(stack.gateways[0]!.url, { method: 'POST', headers: { 'x-filler': 'y'.repeat(40_000) }, body: '{}' });
    expect(huge.status).toBe(431);
    expect(await huge.json()).toMatchObject({ error: { message: 'request headers exceed the limit of 16384 bytes' } });
    const notJson = await request(stack.url, { method: 'POST', sessionId, body: '{"jsonrpc": "2.0", ' });
    expect(notJson.status).toBe(400);
    expect(await notJson.json()).toMatchObject({ error: { code: -32700 } });
    const badId = await request(stack.url, { method: 'POST', sessionId: 'not a session', body: callTool(1, UpstreamTools.Echo, { text: 'x' }) });
    expect(badId.status).toBe(400);
    const unknown = await request(stack.url, { method: 'POST', sessionId: 'BBBBBBBBBBBBBBBBBBBBBB', body: callTool(1, UpstreamTools.Echo, { text: 'x' }) });
    expect(unknown.status).toBe(404);
    // Still serving, and the session still works.
    const ok = await request(stack.url, { method: 'POST', sessionId, body: callTool(2, UpstreamTools.Echo, { text: 'fine' }) });
    expect(ok.status).toBe(200);
    ok.cancel();
  });

  it('too many streams per session on one instance gets 429', async () => {
    const sessionId = await initialize(stack.url);
    const gateway = stack.gateways[0]!.url;
    const open = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await request(gateway, { method: 'POST', sessionId, body: callTool(10 + i, UpstreamTools.StreamProgress, { count: 50, delayMs: 100 }) });
      expect(res.status).toBe(200);
      open.push(res);
    }
    const refused = await request(gateway, { method: 'POST', sessionId, body: callTool(20, UpstreamTools.StreamProgress, { count: 5, delayMs: 0 }) });
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: { message: expect.stringMatching(/too many open streams/) } });
    for (const res of open) res.cancel();
  });

  it('an unreachable upstream gets 502 naming it; the gateway keeps serving', async () => {
    const { startStack: start } = await import('./stack.js');
    const broken = await start({ gateways: 1, eventStore: true });
    await broken.upstream.close();
    const res = await request(broken.url, { method: 'POST', body: { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'x', version: '0' } } } });
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: { message: expect.stringMatching(/upstream route \/mcp did not answer/) } });
    const health = await fetch(`${broken.gateways[0]!.origin}/healthz`);
    expect(health.status).toBe(200);
    await broken.teardown();
  });
});

describe('DELETE', () => {
  it('on one instance ends the session’s open streams on another and purges its log', async () => {
    const sessionId = await initialize(stack.url);
    const [a, b] = stack.gateways;
    const get = await request(a!.url, { method: 'GET', sessionId });
    expect(get.status).toBe(200);
    const ended = (async () => {
      for await (const m of get.messages) void m;
      return 'ended';
    })();
    const del = await fetch(b!.url, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
    expect(del.status).toBe(200);
    expect(await Promise.race([ended, new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000))])).toBe('ended');
    const after = await request(a!.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.Echo, { text: 'x' }) });
    expect(after.status).toBe(404);
  });
});

describe('the GET stream', () => {
  it('server notifications reach a GET client on another instance than the upstream listener; a newer GET supersedes it', async () => {
    const sessionId = await initialize(stack.url);
    const [a, b] = stack.gateways;
    const first = await request(a!.url, { method: 'GET', sessionId });
    expect(first.status).toBe(200);
    const firstMessages = first.messages;
    const prime = (await firstMessages.next()).value;
    expect(prime).toMatchObject({ data: '', retryMs: 1000 });
    // The head: initialize's prime (seq 1), then the listener's claim of stream 0 (seq 2), stamped with its writer.
    expect(prime?.id).toMatch(/-0-2-/);
    const trigger = await request(b!.url, { method: 'POST', sessionId, body: callTool(3, UpstreamTools.NotifyStandalone, { count: 5, delayMs: 10 }) });
    for await (const m of trigger.messages) void m;
    const notes: string[] = [];
    for await (const m of firstMessages) {
      if (m.data !== '') notes.push(m.data);
      if (notes.length === 5) break;
    }
    expect(notes.map((n) => JSON.parse(n).method)).toEqual(Array(5).fill('notifications/message'));
    const second = await request(b!.url, { method: 'GET', sessionId });
    expect(second.status).toBe(200);
    const done = await Promise.race([(async () => {
      for await (const m of firstMessages) void m;
      return 'superseded';
    })(), new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000))]);
    expect(done).toBe('superseded');
    second.cancel();
  });
});
