import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpServer } from '@modelcontextprotocol/server';
import { z } from 'zod';
import { startModernUpstream } from '@tether/testing';
import type { ModernUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * Which `tools/call`s become tasks (issue 33 part 2). SEP-2663 makes the
 * server the sole decider, with no `tools/list` warm-up: any call from a
 * client that declared the extension and is unanswered after `--task-after`
 * becomes a task, unless the upstream's 2025-era list says `forbidden` or
 * `--no-task-tools` names the tool. Against real SDK v2 servers: one that
 * also answers the 2025 era (so its list can refine), one that speaks only
 * 2026-07-28 (`legacy: 'reject'`: no list at all).
 */

const AFTER_MS = 200;
const SLOW_MS = 700;

function server(): McpServer {
  const s = new McpServer({ name: 'eligibility', version: '0.0.0' });
  const sleepy = async ({ ms }: { ms: number }) => {
    await new Promise((r) => setTimeout(r, ms));
    return { content: [{ type: 'text' as const, text: `slept ${ms}` }] };
  };
  // No execution field: 2026-07-28 has none, and absence is no opinion.
  s.registerTool('plain', { inputSchema: z.object({ ms: z.number() }) }, sleepy);
  const forbidden = s.registerTool('forbidden', { inputSchema: z.object({ ms: z.number() }) }, sleepy);
  (forbidden as unknown as { execution: unknown }).execution = { taskSupport: 'forbidden' };
  const required = s.registerTool('required', { inputSchema: z.object({ ms: z.number() }) }, sleepy);
  (required as unknown as { execution: unknown }).execution = { taskSupport: 'required' };
  s.registerTool('excluded', { inputSchema: z.object({ ms: z.number() }) }, sleepy);
  return s;
}

const open: { teardown?(): Promise<void>; close?(): Promise<void> }[] = [];
let bothEras: ModernUpstream;
let modernOnly: ModernUpstream;
let withList: InProcessStack;
let withoutList: InProcessStack;

beforeAll(async () => {
  bothEras = await startModernUpstream({ createServer: server });
  modernOnly = await startModernUpstream({ createServer: server, handler: { legacy: 'reject' } });
  open.push(bothEras, modernOnly);
  withList = await startInProcessStack({ gateways: 1, upstreamUrl: bothEras.url, args: ['--task-after', String(AFTER_MS), '--no-task-tools', 'excluded'] });
  open.push(withList);
  withoutList = await startInProcessStack({ gateways: 1, upstreamUrl: modernOnly.url, args: ['--task-after', String(AFTER_MS)] });
  open.push(withoutList);
});
afterAll(async () => {
  for (const item of open.reverse()) await (item.teardown ?? item.close)!.call(item);
});

const TASKS = { 'io.modelcontextprotocol/tasks': {} };
const meta = (declared: boolean) => ({
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 't', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': declared ? { extensions: TASKS } : {},
});

let nextId = 1;
async function call(url: string, tool: string, ms: number, declared = true): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': tool },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name: tool, arguments: { ms }, _meta: meta(declared) } }),
  });
  const text = await res.text();
  const data = text.startsWith('{') ? JSON.parse(text) : JSON.parse(text.split('\n').find((l) => l.startsWith('data: {'))!.slice(6));
  return { status: res.status, body: data };
}

describe('which calls become tasks', () => {
  it('the first slow call to a tool the upstream says nothing about is a task: no warm-up', async () => {
    const first = await call(withList.urls[0]!, 'plain', SLOW_MS);
    expect(first.body.result, JSON.stringify(first.body)).toMatchObject({ resultType: 'task', status: 'working' });
  });

  it('in front of a 2026-07-28-only upstream (no list to read), a slow call is a task and a fast one a plain result', async () => {
    const slow = await call(withoutList.urls[0]!, 'plain', SLOW_MS);
    expect(slow.body.result, JSON.stringify(slow.body)).toMatchObject({ resultType: 'task', status: 'working' });
    const fast = await call(withoutList.urls[0]!, 'plain', 5);
    expect(fast.body.result?.content?.[0]?.text, JSON.stringify(fast.body)).toBe('slept 5');
    // The list it cannot read does not rule out even a tool the other upstream forbids: there is nobody to say so.
    const unlisted = await call(withoutList.urls[0]!, 'forbidden', SLOW_MS);
    expect(unlisted.body.result).toMatchObject({ resultType: 'task' });
  });

  it('a tool the upstream marks forbidden, or --no-task-tools names, stays a plain call however slow', async () => {
    // The list is read in the background from the first call on: wait until it is in.
    await expect.poll(async () => (await call(withList.urls[0]!, 'forbidden', SLOW_MS)).body.result?.resultType, { timeout: 10_000 }).toBe('complete');
    const forbidden = await call(withList.urls[0]!, 'forbidden', SLOW_MS);
    expect(forbidden.body.result?.content?.[0]?.text, JSON.stringify(forbidden.body)).toBe(`slept ${SLOW_MS}`);
    const excluded = await call(withList.urls[0]!, 'excluded', SLOW_MS);
    expect(excluded.body.result?.content?.[0]?.text, JSON.stringify(excluded.body)).toBe(`slept ${SLOW_MS}`);
  });

  it('a client without the extension gets plain calls, and -32021 for a tool the list says requires tasks', async () => {
    const plain = await call(withList.urls[0]!, 'plain', SLOW_MS, false);
    expect(plain.body.result?.content?.[0]?.text, JSON.stringify(plain.body)).toBe(`slept ${SLOW_MS}`);
    await expect.poll(async () => (await call(withList.urls[0]!, 'required', 5, false)).body.error?.code, { timeout: 10_000 }).toBe(-32021);
  });
});
