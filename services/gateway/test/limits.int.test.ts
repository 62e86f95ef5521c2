import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

// Two gateways sharing one log: the limit is per principal across instances.
let stack: InProcessStack;
beforeAll(async () => {
  stack = await startInProcessStack({ gateways: 2, args: ['--max-sessions-per-principal', '2'] });
});
afterAll(async () => {
  await stack.teardown();
});

const VERSION = '2025-06-18';
const init = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } } };

async function initialize(url: string, authorization: string): Promise<Response> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization },
    body: JSON.stringify(init),
  });
  return res;
}

async function sessionOf(res: Response): Promise<string> {
  expect(res.status).toBe(200);
  await res.body?.cancel();
  return res.headers.get('mcp-session-id')!;
}

async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  for (const started = Date.now(); Date.now() - started < timeoutMs; await new Promise((r) => setTimeout(r, 20))) if (check()) return true;
  return check();
}

describe('--max-sessions-per-principal', () => {
  it('refuses a principal its third session on either gateway with 429 and a JSON-RPC error, and ends the upstream session it had opened', async () => {
    const [a, b] = stack.urls as [string, string];
    const first = await sessionOf(await initialize(a, 'Bearer alice'));
    await sessionOf(await initialize(b, 'Bearer alice'));
    const upstreamBefore = stack.upstream.sessions();

    const refused = await initialize(a, 'Bearer alice');
    expect(refused.status).toBe(429);
    expect(refused.headers.get('mcp-session-id')).toBeNull();
    expect(await refused.json()).toEqual({
      jsonrpc: '2.0',
      id: null,
      error: { code: -32005, message: 'too many sessions: this principal already has 2 open sessions; the limit is 2; close one (DELETE) or let one idle out', data: { open: 2, limit: 2 } },
    });
    // The upstream had initialized a session for the refused request: the gateway deleted it.
    expect(await until(() => stack.upstream.sessions() === upstreamBefore, 5_000)).toBe(true);
    expect((await initialize(b, 'Bearer alice')).status).toBe(429);

    // Another principal has its own places.
    await sessionOf(await initialize(b, 'Bearer bob'));

    // DELETE on the other gateway gives a place back.
    const deleted = await fetch(b, { method: 'DELETE', headers: { 'mcp-session-id': first, authorization: 'Bearer alice' } });
    expect(deleted.status).toBe(200);
    await sessionOf(await initialize(a, 'Bearer alice'));
    expect((await initialize(a, 'Bearer alice')).status).toBe(429);
  });

  it('refuses a bad value at startup, naming the flag', async () => {
    const { parseConfig } = await import('@tether/gateway');
    expect(() => parseConfig(['--upstream', 'http://127.0.0.1:9/mcp', '--max-sessions-per-principal', '-3'], {})).toThrow(/max-sessions-per-principal/);
    expect(() => parseConfig(['--upstream', 'http://127.0.0.1:9/mcp', '--max-sessions-per-principal', '10001'], {})).toThrow(/max-sessions-per-principal.*10000/);
  });
});
