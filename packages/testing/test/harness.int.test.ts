import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { LoggingMessageNotificationSchema, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  connectSdkClient,
  isTestingError,
  startMcpUpstream,
  startRoundRobinProxy,
  startServiceProcess,
  TestingErrorCodes,
  UpstreamTools,
  type McpUpstream,
  type RoundRobinProxy,
  type SdkClient,
  type ServiceProcess,
} from '@tether/testing';

// Everything in-process on port 0, except the service processes. Teardown
// closes in reverse order and then checks that no target holds a connection.

const cleanups: (() => Promise<unknown>)[] = [];
function defer<T extends { close(): Promise<unknown> }>(thing: T): T {
  cleanups.push(() => thing.close());
  return thing;
}
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

interface Target {
  readonly name: string;
  readonly url: string;
  readonly server: Server;
  readonly sockets: Set<Socket>;
  close(): Promise<void>;
}

/** A tiny node:http target; `handler` defaults to one that reports the target's name and what it received. */
async function startTarget(name: string, handler?: (req: IncomingMessage, res: ServerResponse) => void): Promise<Target> {
  const sockets = new Set<Socket>();
  const server = createServer(
    handler ??
      ((req, res) => {
        let body = '';
        req.setEncoding('utf8');
        req.on('data', (chunk: string) => (body += chunk));
        req.on('end', () => {
          res.writeHead(200, { 'content-type': 'application/json', 'x-target': name });
          res.end(JSON.stringify({ name, method: req.method, url: req.url, headers: req.headers, body }));
        });
      }),
  );
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await new Promise<void>((done) => server.listen({ host: '127.0.0.1', port: 0 }, done));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  const target: Target = {
    name,
    url: `http://127.0.0.1:${address.port}`,
    server,
    sockets,
    close: () =>
      new Promise<void>((done) => {
        // The proxy must already have released every upstream connection.
        expect(sockets.size, `${name} still has open connections`).toBe(0);
        server.close(() => done());
      }),
  };
  return defer(target);
}

async function waitFor(what: string, check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((done) => setTimeout(done, 10));
  }
}

function textOf(result: CallToolResult): string {
  const first = result.content[0];
  return first?.type === 'text' ? first.text : '';
}

describe('round-robin proxy', () => {
  it('sends each request to the next target and passes method, path, query, headers and body through', async () => {
    const a = await startTarget('a');
    const b = await startTarget('b');
    const proxy = defer(await startRoundRobinProxy([a.url, b.url]));
    const names: string[] = [];
    for (let i = 0; i < 4; i += 1) {
      // One fetch agent, so these share a keep-alive connection: rotation is per request, not per connection.
      const res = await fetch(`${proxy.url}/mcp/x?i=${i}`, {
        method: 'POST',
        headers: { 'Mcp-Session-Id': 'sess-1', 'Last-Event-ID': `ev-${i}`, Authorization: 'Bearer t', Origin: 'http://localhost:1', 'content-type': 'text/plain' },
        body: `body ${i}`,
      });
      const seen = (await res.json()) as { name: string; method: string; url: string; headers: Record<string, string>; body: string };
      names.push(seen.name);
      expect(res.headers.get('x-target')).toBe(seen.name);
      expect(seen).toMatchObject({ method: 'POST', url: `/mcp/x?i=${i}`, body: `body ${i}` });
      expect(seen.headers).toMatchObject({ 'mcp-session-id': 'sess-1', 'last-event-id': `ev-${i}`, authorization: 'Bearer t', origin: 'http://localhost:1' });
    }
    expect(names).toEqual(['a', 'b', 'a', 'b']);
    expect(proxy.requests).toBe(4);
    expect(proxy.lastTargetOf((r) => r.lastEventId === 'ev-2')).toBe(a.url);
  });

  it('streams SSE event by event', async () => {
    let written = 0;
    const total = 8;
    const target = await startTarget('sse', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => {
        written += 1;
        res.write(`id: ${written}\ndata: event ${written}\n\n`);
        if (written === total) {
          clearInterval(timer);
          res.end();
        }
      }, 50);
      res.once('close', () => clearInterval(timer));
    });
    const proxy = defer(await startRoundRobinProxy([target.url]));
    const res = await fetch(`${proxy.url}/sse`);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
    const first = await reader.read();
    expect(first.value).toContain('data: event 1');
    // Received before the target wrote the last event: nothing buffered the body.
    expect(written).toBeLessThan(total);
    let rest = '';
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += chunk.value;
    expect(rest).toContain(`data: event ${total}`);
  });

  it('cutAll() breaks open streams on both sides', async () => {
    let upstreamClosed = false;
    const target = await startTarget('endless', (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: hello\n\n');
      const timer = setInterval(() => res.write(': ping\n\n'), 20);
      res.once('close', () => {
        clearInterval(timer);
        upstreamClosed = true;
      });
    });
    const proxy = defer(await startRoundRobinProxy([target.url]));
    const res = await fetch(`${proxy.url}/sse`);
    const reader = res.body!.getReader();
    await reader.read();
    expect(proxy.cutAll()).toBe(1);
    await expect((async () => {
      for (;;) if ((await reader.read()).done) return 'clean end';
    })()).rejects.toThrow();
    await waitFor('the target to see the cut', () => upstreamClosed);
  });

  it('answers 502 for a dead target and moves on; markDown() passes over it', async () => {
    const live = await startTarget('live');
    const dead = await startTarget('dead');
    await dead.close();
    cleanups.splice(cleanups.length - 1, 1);
    const proxy = defer(await startRoundRobinProxy([live.url, dead.url]));
    const statuses: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const res = await fetch(`${proxy.url}/`);
      statuses.push(res.status);
      const body = (await res.json()) as { error?: string; target?: string };
      if (res.status === 502) expect(body).toMatchObject({ error: 'bad_gateway', target: dead.url });
    }
    expect(statuses).toEqual([200, 502, 200]);
    proxy.markDown(dead.url);
    for (let i = 0; i < 2; i += 1) expect((await fetch(`${proxy.url}/`)).status).toBe(200);
    proxy.markDown(live.url);
    expect((await fetch(`${proxy.url}/`)).status).toBe(503);
  });
});

describe('SDK upstream and client through the proxy', () => {
  async function setup(opts: { eventStore?: boolean; jsonResponse?: boolean } = {}): Promise<{ upstream: McpUpstream; proxy: RoundRobinProxy; sdk: SdkClient; responseTypes: string[] }> {
    const upstream = defer(await startMcpUpstream(opts));
    const proxy = defer(await startRoundRobinProxy([upstream.origin]));
    const responseTypes: string[] = [];
    const countingFetch: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      responseTypes.push(`${init?.method ?? 'GET'} ${res.status} ${res.headers.get('content-type') ?? '-'}`);
      return res;
    };
    const sdk = defer(await connectSdkClient(`${proxy.url}/mcp`, { fetch: countingFetch }));
    return { upstream, proxy, sdk, responseTypes };
  }

  it('stream_progress: 50 progress callbacks in order, then the result', async () => {
    const { sdk, upstream } = await setup();
    const progress: number[] = [];
    const result = (await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 50, delayMs: 0 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
    })) as CallToolResult;
    expect(textOf(result)).toBe('done 50');
    expect(progress).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(upstream.sessions()).toBe(1);
    await sdk.transport.terminateSession();
    await waitFor('the session to close', () => upstream.sessions() === 0);
  });

  it('with an event store, a cut mid-stream is resumed by GET with Last-Event-ID: every progress exactly once, then the result', async () => {
    const { sdk, proxy, upstream } = await setup({ eventStore: true });
    const progress: number[] = [];
    let cut = 0;
    const result = (await sdk.client.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 40, delayMs: 10 } }, undefined, {
      onprogress: (p) => {
        progress.push(p.progress);
        if (p.progress === 10) cut = proxy.cutAll();
      },
    })) as CallToolResult;
    expect(textOf(result)).toBe('done 40');
    expect(cut).toBeGreaterThanOrEqual(1);
    expect(progress).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    const resumes = upstream.requests().filter((r) => r.method === 'GET' && r.lastEventId !== undefined);
    expect(resumes.length).toBeGreaterThanOrEqual(1);
    expect(sdk.errors.some((e) => e.message.includes('SSE stream disconnected'))).toBe(true);
  });

  it('notify_standalone reaches the client on its GET stream', async () => {
    const { sdk, upstream } = await setup();
    const seen: unknown[] = [];
    sdk.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      seen.push(n.params.data);
    });
    // The transport opens the GET stream by itself after notifications/initialized;
    // messages sent before it is open are dropped (no event store).
    await waitFor('the standalone GET stream', () => upstream.openGetStreams() === 1);
    const result = (await sdk.client.callTool({ name: UpstreamTools.NotifyStandalone, arguments: { count: 5, delayMs: 5 } })) as CallToolResult;
    expect(textOf(result)).toBe('sent 5');
    await waitFor('5 logging messages', () => seen.length === 5);
    // Each message names its call (its JSON-RPC request id), one call here.
    const call = (seen[0] as { call?: unknown }).call;
    expect(typeof call).toBe('string');
    expect(seen).toEqual([1, 2, 3, 4, 5].map((seq) => ({ seq, of: 5, call })));
  });

  it('jsonResponse: echo comes back as JSON', async () => {
    const { sdk, responseTypes } = await setup({ jsonResponse: true });
    const result = (await sdk.client.callTool({ name: UpstreamTools.Echo, arguments: { text: 'hi' } })) as CallToolResult;
    expect(textOf(result)).toBe('hi');
    expect(responseTypes.at(-1)).toBe('POST 200 application/json');
  });
});

describe('SDK upstream options', () => {
  it('createServer and an eventStore factory: every session gets its own server and store from them', async () => {
    const stores: InMemoryEventStore[] = [];
    const upstream = defer(
      await startMcpUpstream({
        createServer: () => new McpServer({ name: 'custom-upstream', version: '1.2.3' }),
        eventStore: () => {
          const store = new InMemoryEventStore();
          stores.push(store);
          return store;
        },
      }),
    );
    const a = defer(await connectSdkClient(upstream.url));
    const b = defer(await connectSdkClient(upstream.url));
    expect(a.client.getServerVersion()).toEqual({ name: 'custom-upstream', version: '1.2.3' });
    expect([b.client.getServerVersion()?.name, new Set(stores).size, upstream.sessions()]).toEqual(['custom-upstream', 2, 2]);
  });

  it('loopbackOnly: 403 when Host or Origin is not a loopback name; loopback names pass', async () => {
    const upstream = defer(await startMcpUpstream({ loopbackOnly: true }));
    const initialize = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } });
    // node:http, not fetch: fetch does not let a caller set Host.
    const statusOf = (headers: Record<string, string>): Promise<number> =>
      new Promise((done, fail) => {
        const req = httpRequest(upstream.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers } }, (res) => {
          res.resume();
          res.once('end', () => done(res.statusCode ?? 0));
        });
        req.once('error', fail);
        req.end(initialize);
      });
    const here = `127.0.0.1:${upstream.port}`;
    expect(await statusOf({ host: 'evil.example.com', origin: 'http://evil.example.com' })).toBe(403);
    expect(await statusOf({ host: here, origin: 'http://evil.example.com' })).toBe(403);
    expect(await statusOf({ host: 'evil.example.com' })).toBe(403);
    expect(await statusOf({ host: `localhost:${upstream.port}`, origin: `http://${here}` })).toBe(200);
    expect(await statusOf({ host: here })).toBe(200);
    expect(upstream.sessions()).toBe(2);
  });
});

describe('service process', () => {
  const script = (body: string) => ['-e', body];
  const ready = `console.log('starting'); console.log(JSON.stringify({ level: 30, msg: 'listening', port: 45678 }));`;

  it('parses the port from the ready line, keeps stdout, and stops on SIGTERM', async () => {
    const svc: ServiceProcess = await startServiceProcess({
      name: 'tiny',
      command: process.execPath,
      // Handlers before the ready line, as a real service must: a SIGTERM sent
      // right after the line would otherwise find none and kill it outright.
      args: script(`process.on('SIGTERM', () => { console.log(JSON.stringify({ msg: 'draining' })); process.exit(0); }); ${ready} setInterval(() => {}, 1000);`),
      readyLine: (o) => o.msg === 'listening',
    });
    cleanups.push(() => svc.kill());
    expect(svc.port).toBe(45678);
    expect(svc.readyJson).toMatchObject({ msg: 'listening' });
    expect(svc.stdoutLines).toEqual(['starting', '{"level":30,"msg":"listening","port":45678}']);
    const draining = svc.waitForLine((o) => o.msg === 'draining');
    expect(await svc.stop()).toEqual({ code: 0, signal: null });
    await draining;
    expect(svc.stdoutJson.map((o) => o['msg'])).toEqual(['listening', 'draining']);
  });

  it('kill() SIGKILLs; stop() escalates to SIGKILL after its timeout', async () => {
    const stubborn = `process.on('SIGTERM', () => {}); ${ready} setInterval(() => {}, 1000);`;
    const a = await startServiceProcess({ name: 'a', command: process.execPath, args: script(stubborn), readyLine: /"msg":"listening"/ });
    const b = await startServiceProcess({ name: 'b', command: process.execPath, args: script(stubborn), readyLine: /"msg":"listening"/ });
    cleanups.push(() => a.kill(), () => b.kill());
    await a.kill();
    expect(await a.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(await b.stop('SIGTERM', 200)).toEqual({ code: null, signal: 'SIGKILL' });
  });

  it('fails with the exit status and output tails when the process dies or never gets ready', async () => {
    const died = await startServiceProcess({
      name: 'dies',
      command: process.execPath,
      args: script(`console.log('about to fail'); console.error('boom: no config'); process.exit(3);`),
      readyLine: /listening/,
    }).catch((err: unknown) => err);
    expect(isTestingError(died) && died.code).toBe(TestingErrorCodes.ServiceStartFailed);
    expect(died).toMatchObject({ exitCode: 3, stdoutTail: ['about to fail'], stderrTail: ['boom: no config'] });
    expect(String(died)).toContain('boom: no config');

    const silent = await startServiceProcess({ name: 'silent', command: process.execPath, args: script('setInterval(() => {}, 1000);'), readyLine: /listening/, readyTimeoutMs: 300 }).catch((err: unknown) => err);
    expect(isTestingError(silent) && silent.code).toBe(TestingErrorCodes.ServiceReadyTimeout);
    expect(silent).toMatchObject({ exitSignal: 'SIGKILL' });
  });
});
