import { fileURLToPath } from 'node:url';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { SseParser } from '@tether/protocol';
import { connectSdkClient, startServiceProcess } from '@tether/testing';
import type { ServiceProcess } from '@tether/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statelessCallBody, statelessCallHeaders } from './client-context.js';
import { EVERYTHING_TOOL, V2_TOOL } from './tools.js';
import type { ProgressTool } from './tools.js';
import { meaningOf } from './util.js';

// The two real upstreams the chaos harness can add (`--upstreams
// everything,v2`), each run as the harness runs it: its own process, a
// JSON ready line with its port, and a restart on that port
// (`upstream_restart`). Each must do what the checker's description of its
// tool says: progress 1..count on the call's token, then exactly the text
// the description computes from the arguments.

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const started: ServiceProcess[] = [];

async function start(main: string, port = 0): Promise<ServiceProcess> {
  const proc = await startServiceProcess({
    name: main,
    command: process.execPath,
    args: ['--import', 'tsx', fileURLToPath(new URL(main, import.meta.url)), '--port', String(port)],
    cwd: ROOT,
    readyLine: (json) => json.msg === 'listening',
    readyTimeoutMs: 30_000,
  });
  started.push(proc);
  return proc;
}

/** One call through the official SDK client: the progress values it saw and its result's text. */
async function call(port: number, tool: ProgressTool, count: number): Promise<{ progress: number[]; text: string | undefined; args: Record<string, number> }> {
  const sdk = await connectSdkClient(`http://127.0.0.1:${port}/mcp`);
  try {
    const args = tool.args(count, 3);
    const progress: number[] = [];
    const result = await sdk.client.callTool({ name: tool.name, arguments: args }, CallToolResultSchema, { onprogress: (p) => progress.push(p.progress) });
    const first = (result.content as Array<{ type?: string; text?: string }>)[0];
    return { progress, text: first?.type === 'text' ? first.text : undefined, args };
  } finally {
    await sdk.close();
  }
}

describe.each([
  { name: 'server-everything', main: './everything-main.ts', tool: EVERYTHING_TOOL },
  { name: 'the SDK v2 createMcpHandler server', main: './v2-upstream-main.ts', tool: V2_TOOL },
])('$name as the chaos harness runs it', ({ main, tool }) => {
  // One process per server for the file (each start costs seconds of tsx); the restart test replaces it.
  let proc: ServiceProcess;
  beforeAll(async () => {
    proc = await start(main);
  });
  afterAll(async () => {
    await Promise.all(started.splice(0).map((p) => p.kill()));
  });

  it('streams progress 1..count, then the result its description computes', async () => {
    const got = await call(proc.port!, tool, 7);
    expect(got.progress).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(tool.count(got.args)).toBe(7);
    expect(got.text).toBe(tool.resultText(got.args));
  });

  it('comes back on the same port after a SIGKILL (upstream_restart)', async () => {
    const port = proc.port!;
    await proc.kill();
    proc = await start(main, port);
    expect(proc.port).toBe(port);
    const got = await call(port, tool, 3);
    expect(got.progress).toEqual([1, 2, 3]);
  });

  // The v2 server speaks the stateless era too: the raw clients send some of their calls that way (`statelessChance`).
  if (tool !== V2_TOOL) return;
  it('answers a 2026-07-28 call, as the raw clients send it, with progress 1..count on its token, then the described result', async () => {
    const args = tool.args(4, 2);
    const res = await fetch(`http://127.0.0.1:${proc.port}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...statelessCallHeaders(tool.name) },
      body: statelessCallBody('raw1', 5, tool.name, args),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const parser = new SseParser();
    const meanings = [...parser.push(await res.text()), ...parser.push('\n\n')].map((m) => meaningOf(m.data));
    expect(meanings.flatMap((m) => (m.t === 'progress' ? [`${m.token} ${m.progress}`] : []))).toEqual(['raw1.5 1', 'raw1.5 2', 'raw1.5 3', 'raw1.5 4']);
    expect(meanings.find((m) => m.t === 'response')).toMatchObject({ id: '5', ok: true, text: tool.resultText(args) });
  });
});
