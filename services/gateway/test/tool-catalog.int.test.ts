import { CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, McpServer, PROTOCOL_VERSION_META_KEY } from '@modelcontextprotocol/server';
import { McpServer as V1McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { getFreePort, startMcpUpstream, startModernUpstream } from '@tether/testing';
import type { McpUpstream, ModernUpstream } from '@tether/testing';
import { ToolCatalog } from '../src/tasks/tool-catalog.js';
import type { TaskSupport, ToolCatalogOptions } from '../src/tasks/tool-catalog.js';

/**
 * ToolCatalog against real official-SDK servers: the SDK v2 `createMcpHandler`
 * (2025-era traffic answered statelessly, over SSE) and the SDK v1 stateful
 * server (sessions; SSE or JSON answers).
 */

interface ToolSpec {
  readonly name: string;
  /** A string outside the three values stands for an upstream that sends something unknown. */
  readonly taskSupport?: TaskSupport | 'sometimes';
  readonly idempotent?: boolean;
}

const TOKEN = 'Bearer catalog-test-secret';
const NO_HEADERS: Readonly<Record<string, string>> = {};

/**
 * An SDK v2 server with these tools. 2.4.0's `registerTool` takes no
 * `execution` (its config type has none, and it passes `undefined` for it),
 * yet `tools/list` emits the registered tool's `execution` field: setting it
 * on the returned `RegisteredTool` is the one way to declare task support.
 */
function modernServer(tools: readonly ToolSpec[]): McpServer {
  const server = new McpServer({ name: 'tool-catalog-modern', version: '0.0.0' });
  for (const spec of tools) {
    const tool = server.registerTool(spec.name, { description: spec.name, ...(spec.idempotent === true ? { annotations: { idempotentHint: true } } : {}) }, () => ({ content: [] }));
    if (spec.taskSupport !== undefined) tool.execution = { taskSupport: spec.taskSupport as TaskSupport };
  }
  return server;
}

/** An SDK v1 server: a task tool through the SDK's own experimental API, plain tools beside it. */
function v1Server(): V1McpServer {
  const server = new V1McpServer({ name: 'tool-catalog-v1', version: '0.0.0' });
  const never = (): never => {
    throw new Error('not called by these tests');
  };
  server.experimental.tasks.registerToolTask('v1_required', { description: 'task tool', execution: { taskSupport: 'required' } }, { createTask: never, getTask: never, getTaskResult: never });
  server.registerTool('v1_idempotent', { description: 'idempotent', annotations: { idempotentHint: true } }, () => ({ content: [] }));
  server.registerTool('v1_plain', { description: 'plain' }, () => ({ content: [] }));
  return server;
}

/** An SDK v1 server whose `tools/list` pages `pageSize` tools at a time, and never ends when `total` is Infinity. */
function pagingServer(total: number, pageSize: number): V1McpServer {
  const server = new V1McpServer({ name: 'tool-catalog-pages', version: '0.0.0' }, { capabilities: { tools: {} } });
  server.server.setRequestHandler(ListToolsRequestSchema, (request) => {
    const from = Number(request.params?.cursor ?? '0');
    const to = Math.min(from + pageSize, total);
    const tools = Array.from({ length: to - from }, (_, i) => ({ name: `tool_${from + i}`, inputSchema: { type: 'object' as const }, execution: { taskSupport: 'optional' as const } }));
    return { tools, ...(to < total ? { nextCursor: String(to) } : {}) };
  });
  return server;
}

const open: { close(): unknown }[] = [];

afterEach(async () => {
  for (const item of open.splice(0).reverse()) await item.close();
});

function track<T extends { close(): unknown }>(item: T): T {
  open.push(item);
  return item;
}

async function modern(tools: readonly ToolSpec[] | (() => McpServer)): Promise<ModernUpstream> {
  return track(await startModernUpstream({ createServer: typeof tools === 'function' ? tools : () => modernServer(tools) }));
}

function catalog(upstreamUrl: string, options: Partial<ToolCatalogOptions> = {}): { catalog: ToolCatalog; warnings: { obj: object; msg: string }[] } {
  const warnings: { obj: object; msg: string }[] = [];
  const made = new ToolCatalog({ upstreamUrl, refreshMs: 60_000, taskTools: [], logger: { warn: (obj, msg) => warnings.push({ obj, msg }) }, ...options });
  return { catalog: track(made), warnings };
}

describe('ToolCatalog against an SDK v2 upstream (stateless, SSE)', () => {
  it('reads execution.taskSupport and idempotentHint from the 2025-era list', async () => {
    const upstream = await modern([
      { name: 'opt', taskSupport: 'optional', idempotent: true },
      { name: 'req', taskSupport: 'required' },
      { name: 'forb', taskSupport: 'forbidden' },
      { name: 'absent' },
      { name: 'odd', taskSupport: 'sometimes' },
    ]);
    const { catalog: tools, warnings } = catalog(upstream.url);
    expect(await tools.lookup('opt', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: true });
    expect(await tools.lookup('req', NO_HEADERS)).toEqual({ taskSupport: 'required', idempotent: false });
    expect(await tools.lookup('forb', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: false });
    // 2025-11-25 read an absent field as forbidden; SEP-2663 removed it, so absence (or an unknown value) is no opinion.
    expect(await tools.lookup('absent', NO_HEADERS)).toEqual({ taskSupport: undefined, idempotent: false });
    expect(await tools.lookup('odd', NO_HEADERS)).toEqual({ taskSupport: undefined, idempotent: false });
    expect(await tools.lookup('missing', NO_HEADERS)).toBeUndefined();
    expect(warnings).toEqual([]);
    // Stateless: initialize and one tools/list, no session, no DELETE.
    const seen = upstream.requests();
    expect(seen).toHaveLength(2);
    expect(seen[0]!['mcp-protocol-version']).toBeUndefined();
    expect(seen[1]!['mcp-protocol-version']).toBe('2025-11-25');
    expect(seen.every((h) => h['mcp-session-id'] === undefined)).toBe(true);
  });

  it('the 2026-07-28 answer of the same server has no execution: why the catalog lists in the 2025 era', async () => {
    const upstream = await modern([{ name: 'opt', taskSupport: 'optional' }]);
    const res = await fetch(upstream.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: { _meta: { [PROTOCOL_VERSION_META_KEY]: '2026-07-28', [CLIENT_INFO_META_KEY]: { name: 'probe', version: '0' }, [CLIENT_CAPABILITIES_META_KEY]: {} } },
      }),
    });
    const answer = (await res.json()) as { result: { tools: { name: string; execution?: unknown }[] } };
    expect(answer.result.tools.map((t) => t.name)).toEqual(['opt']);
    // If an SDK release keeps the field, the catalog could list in either era.
    expect(answer.result.tools[0]!.execution).toBeUndefined();
    const { catalog: tools } = catalog(upstream.url);
    expect(await tools.lookup('opt', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
  });

  it('--task-tools makes a tool at least optional, listed or not, and keeps required and idempotent', async () => {
    const upstream = await modern([
      { name: 'forb', taskSupport: 'forbidden', idempotent: true },
      { name: 'absent' },
      { name: 'req', taskSupport: 'required' },
    ]);
    const { catalog: tools } = catalog(upstream.url, { taskTools: ['forb', 'absent', 'req', 'unlisted'] });
    expect(await tools.lookup('forb', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: true });
    expect(await tools.lookup('absent', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    expect(await tools.lookup('req', NO_HEADERS)).toEqual({ taskSupport: 'required', idempotent: false });
    expect(await tools.lookup('unlisted', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
  });

  it('sends the caller\'s Authorization on every listing request, and its own protocol headers instead of the caller\'s', async () => {
    const upstream = await modern([{ name: 'opt', taskSupport: 'optional' }]);
    const { catalog: tools, warnings } = catalog(upstream.url);
    const headers = { Authorization: TOKEN, 'Mcp-Session-Id': 'the-callers-session', 'MCP-Protocol-Version': '2026-07-28' };
    expect(await tools.lookup('opt', headers)).toEqual({ taskSupport: 'optional', idempotent: false });
    const seen = upstream.requests();
    expect(seen).toHaveLength(2);
    for (const request of seen) {
      expect(request.authorization).toBe(TOKEN);
      expect(request['mcp-session-id']).toBeUndefined();
    }
    expect(seen[1]!['mcp-protocol-version']).toBe('2025-11-25');
    expect(warnings).toEqual([]);
  });

  it('concurrent lookups share one listing', async () => {
    const upstream = await modern([{ name: 'opt', taskSupport: 'optional' }]);
    const { catalog: tools } = catalog(upstream.url);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => tools.lookup(i % 2 === 0 ? 'opt' : 'missing', NO_HEADERS)));
    expect(answers.filter((a) => a?.taskSupport === 'optional')).toHaveLength(10);
    expect(answers.filter((a) => a === undefined)).toHaveLength(10);
    // One listing: initialize + tools/list. The misses did not refetch either
    // (the listing had just been made).
    expect(upstream.requests()).toHaveLength(2);
  });

  it('refetches after invalidate(), and an unknown name refetches at most once per 5 s', async () => {
    let withLateTool = false;
    const upstream = await modern(() => modernServer(withLateTool ? [{ name: 'early' }, { name: 'late', taskSupport: 'required' }] : [{ name: 'early' }]));
    const { catalog: tools } = catalog(upstream.url);
    expect(await tools.lookup('late', NO_HEADERS)).toBeUndefined();
    const afterFirst = upstream.requests().length;
    withLateTool = true;
    // Listed under a second ago: a miss answers from the list.
    expect(await tools.lookup('late', NO_HEADERS)).toBeUndefined();
    expect(upstream.requests()).toHaveLength(afterFirst);
    tools.invalidate();
    expect(await tools.lookup('late', NO_HEADERS)).toEqual({ taskSupport: 'required', idempotent: false });
    expect(upstream.requests()).toHaveLength(afterFirst * 2);
  });

  it('answers from the old list while a stale one refreshes in the background', async () => {
    let support: TaskSupport = 'optional';
    const upstream = await modern(() => modernServer([{ name: 'tool', taskSupport: support }]));
    const { catalog: tools } = catalog(upstream.url, { refreshMs: 100 });
    expect(await tools.lookup('tool', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    support = 'required';
    await new Promise((done) => setTimeout(done, 150));
    // Stale: this answer is the old list's, and it starts the refresh.
    expect(await tools.lookup('tool', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    await vi.waitFor(async () => expect(await tools.lookup('tool', NO_HEADERS)).toEqual({ taskSupport: 'required', idempotent: false }));
  });

  it('peek answers at once from what is known, and starts the listing in the background', async () => {
    const upstream = await modern([{ name: 'forb', taskSupport: 'forbidden' }, { name: 'opt', taskSupport: 'optional', idempotent: true }]);
    const { catalog: tools, warnings } = catalog(upstream.url);
    // Nothing listed yet: no opinion, and the caller is not held.
    expect(tools.peek('forb', NO_HEADERS)).toBeUndefined();
    await vi.waitFor(() => expect(tools.peek('forb', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: false }));
    expect(tools.peek('opt', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: true });
    expect(upstream.requests()).toHaveLength(2);
    expect(warnings).toEqual([]);
  });

  it('--no-task-tools rules a tool out whatever the list says; --task-tools rules one in', async () => {
    const upstream = await modern([{ name: 'opt', taskSupport: 'optional', idempotent: true }, { name: 'forb', taskSupport: 'forbidden' }]);
    const { catalog: tools } = catalog(upstream.url, { noTaskTools: ['opt', 'unlisted'], taskTools: ['forb'] });
    expect(await tools.lookup('opt', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: true });
    expect(await tools.lookup('unlisted', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: false });
    expect(await tools.lookup('forb', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
  });

  it('--task-tool-list off never asks the upstream; only the flags refine', async () => {
    const upstream = await modern([{ name: 'forb', taskSupport: 'forbidden' }]);
    const { catalog: tools, warnings } = catalog(upstream.url, { listing: false, noTaskTools: ['never'] });
    expect(await tools.lookup('forb', NO_HEADERS)).toBeUndefined();
    expect(tools.peek('never', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: false });
    expect(upstream.requests()).toHaveLength(0);
    expect(warnings).toEqual([]);
  });

  it('after close() a lookup answers from memory and sends nothing', async () => {
    const upstream = await modern([{ name: 'opt', taskSupport: 'optional' }]);
    const { catalog: tools, warnings } = catalog(upstream.url, { taskTools: ['forced'] });
    tools.close();
    expect(await tools.lookup('opt', NO_HEADERS)).toBeUndefined();
    expect(await tools.lookup('forced', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    expect(upstream.requests()).toHaveLength(0);
    expect(warnings).toEqual([]);
  });
});

describe('ToolCatalog against an SDK v1 upstream (sessions)', () => {
  async function v1(options: { jsonResponse?: boolean; createServer?: () => V1McpServer } = {}): Promise<McpUpstream> {
    return track(await startMcpUpstream({ createServer: options.createServer ?? v1Server, jsonResponse: options.jsonResponse ?? false }));
  }

  for (const jsonResponse of [false, true]) {
    it(`reads the list in a session and ends it (${jsonResponse ? 'JSON' : 'SSE'} answers)`, async () => {
      const upstream = await v1({ jsonResponse });
      const { catalog: tools, warnings } = catalog(upstream.url);
      expect(await tools.lookup('v1_required', { authorization: TOKEN })).toEqual({ taskSupport: 'required', idempotent: false });
      // SDK v1 writes `execution: {taskSupport: 'forbidden'}` out for every plain tool: an explicit no, kept.
      expect(await tools.lookup('v1_idempotent', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: true });
      expect(await tools.lookup('v1_plain', NO_HEADERS)).toEqual({ taskSupport: 'forbidden', idempotent: false });
      expect(warnings).toEqual([]);
      // initialize, notifications/initialized, tools/list, DELETE.
      const seen = upstream.requests();
      expect(seen.map((r) => r.method)).toEqual(['POST', 'POST', 'POST', 'DELETE']);
      expect(seen[0]!.sessionId).toBeUndefined();
      const sessionId = seen[1]!.sessionId;
      expect(sessionId).toBeDefined();
      expect(seen.slice(1).every((r) => r.sessionId === sessionId)).toBe(true);
      expect(upstream.sessions()).toBe(0);
    });
  }

  it('follows nextCursor across pages in one session', async () => {
    const upstream = await v1({ createServer: () => pagingServer(25, 10) });
    const { catalog: tools, warnings } = catalog(upstream.url);
    expect(await tools.lookup('tool_24', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    expect(await tools.lookup('tool_0', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    expect(await tools.lookup('tool_25', NO_HEADERS)).toBeUndefined();
    // initialize, initialized, three pages, DELETE.
    expect(upstream.requests().map((r) => r.method)).toEqual(['POST', 'POST', 'POST', 'POST', 'POST', 'DELETE']);
    expect(warnings).toEqual([]);
  });

  it('stops at 50 pages of a list that never ends, keeps what it read and warns', async () => {
    const upstream = await v1({ createServer: () => pagingServer(Number.POSITIVE_INFINITY, 2) });
    const { catalog: tools, warnings } = catalog(upstream.url);
    expect(await tools.lookup('tool_99', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: false });
    expect(await tools.lookup('tool_100', NO_HEADERS)).toBeUndefined();
    expect(upstream.requests().filter((r) => r.method === 'POST')).toHaveLength(2 + 50);
    expect(warnings.map((w) => w.msg)).toEqual(['tool list truncated']);
    expect(upstream.sessions()).toBe(0);
  });
});

describe('ToolCatalog when the upstream cannot answer', () => {
  it('an unreachable upstream gives undefined (or the --task-tools answer) and a warning without secrets, never a throw', async () => {
    const port = await getFreePort();
    const { catalog: tools, warnings } = catalog(`http://127.0.0.1:${port}/mcp?key=url-secret`, { taskTools: ['forced'], timeoutMs: 1_000 });
    expect(await tools.lookup('anything', { authorization: TOKEN })).toBeUndefined();
    expect(await tools.lookup('forced', { authorization: TOKEN })).toEqual({ taskSupport: 'optional', idempotent: false });
    // One attempt: the second lookup came within the retry interval.
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.msg).toBe('tool list failed');
    expect(warnings[0]!.obj).toMatchObject({ reason: 'upstream_unreachable', upstream: `http://127.0.0.1:${port}/mcp`, hasList: false });
    const logged = JSON.stringify(warnings);
    expect(logged).not.toContain('catalog-test-secret');
    expect(logged).not.toContain('url-secret');
  });

  it('an upstream that refuses every listing is warned about once per reason, not at every retry', async () => {
    const port = await getFreePort();
    const { catalog: tools, warnings } = catalog(`http://127.0.0.1:${port}/mcp`, { timeoutMs: 1_000 });
    for (let i = 0; i < 3; i += 1) {
      tools.invalidate(); // as a list_changed would: each lookup tries again
      expect(await tools.lookup('anything', NO_HEADERS)).toBeUndefined();
    }
    expect(warnings.map((w) => (w.obj as { reason: string }).reason)).toEqual(['upstream_unreachable']);
  });

  it('a failed refresh keeps answering from the last good list', async () => {
    const upstream = await startModernUpstream({ createServer: () => modernServer([{ name: 'opt', taskSupport: 'optional', idempotent: true }]) });
    const { catalog: tools, warnings } = catalog(upstream.url);
    expect(await tools.lookup('opt', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: true });
    await upstream.close();
    tools.invalidate();
    expect(await tools.lookup('opt', NO_HEADERS)).toEqual({ taskSupport: 'optional', idempotent: true });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.obj).toMatchObject({ reason: 'upstream_unreachable', hasList: true });
  });
});
