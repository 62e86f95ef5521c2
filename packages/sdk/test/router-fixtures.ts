import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport as TransportV1 } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { Client as ClientV1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as ClientTransportV1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer as McpServerV2, WebStandardStreamableHTTPServerTransport as TransportV2 } from '@modelcontextprotocol/server';
import { Client as ClientV2, StreamableHTTPClientTransport as ClientTransportV2 } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { SessionLog } from '@tether/session-log';
import type { SessionLogOptions } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { createSessionRouter } from '@tether/sdk';
import type { SdkServer, SdkTransportClass, SessionRouter } from '@tether/sdk';

export type SdkMajor = 'v1' | 'v2';

let counter = 0;
/** Names of one log, unique per test file and call, so logs sharing a server never meet. */
export function isolatedNames(): Pick<SessionLogOptions, 'streamName' | 'subjectPrefix' | 'sessionsBucket' | 'leasesBucket' | 'principalsBucket'> {
  counter += 1;
  const tag = `sdk${process.pid}_${counter}`;
  return { streamName: `LOG_${tag}`, subjectPrefix: `ts.${tag}`, sessionsBucket: `sessions_${tag}`, leasesBucket: `leases_${tag}`, principalsBucket: `principals_${tag}` };
}

/** What a test's tool does while its instance is "killed": nothing, ever (a dead process sends nothing). */
const never = new Promise<never>(() => undefined);

/** The tools every test server has: `stream {count, delayMs}` (progress 1..count on the request's token, then `streamed <count>`) and `ping`. */
export function buildServer(major: SdkMajor, dead: () => boolean): SdkServer {
  const run = async (count: number, delayMs: number, notify: (i: number) => Promise<void>): Promise<{ content: { type: 'text'; text: string }[] }> => {
    for (let i = 1; i <= count; i += 1) {
      if (dead()) await never;
      await notify(i);
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
    if (dead()) await never;
    return { content: [{ type: 'text', text: `streamed ${count}` }] };
  };
  if (major === 'v1') {
    const server = new McpServerV1({ name: 'tether-sdk-test', version: '1.0.0' });
    server.registerTool('stream', { inputSchema: { count: z.number().int(), delayMs: z.number().int() } }, async ({ count, delayMs }, extra) => {
      const progressToken = extra._meta?.progressToken;
      return run(count, delayMs, async (i) => {
        if (progressToken !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: i, total: count } });
      });
    });
    server.registerTool('ping', {}, () => ({ content: [{ type: 'text', text: 'pong' }] }));
    return server;
  }
  const server = new McpServerV2({ name: 'tether-sdk-test', version: '2.0.0' });
  server.registerTool('stream', { inputSchema: z.object({ count: z.number().int(), delayMs: z.number().int() }) }, async ({ count, delayMs }, ctx) => {
    const progressToken = ctx.mcpReq._meta?.progressToken;
    return run(count, delayMs, async (i) => {
      if (progressToken !== undefined) await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken, progress: i, total: count } });
    });
  });
  server.registerTool('ping', {}, () => ({ content: [{ type: 'text', text: 'pong' }] }));
  return server;
}

export function transportClass(major: SdkMajor): SdkTransportClass {
  return (major === 'v1' ? TransportV1 : TransportV2) as unknown as SdkTransportClass;
}

/** One SDK server process, in-process: its own NATS connection (its presence dies with it), its own router and HTTP server. */
export interface Instance {
  readonly url: string;
  readonly log: SessionLog;
  readonly router: SessionRouter;
  /** What SIGKILL does as far as NATS and clients can tell: sockets destroyed, the NATS connection gone, tools frozen. */
  kill(): Promise<void>;
  readonly dead: boolean;
  close(): Promise<void>;
}

export async function startInstance(nats: NatsServer, names: ReturnType<typeof isolatedNames>, major: SdkMajor, partitions = 1): Promise<Instance> {
  const log = await SessionLog.create({ servers: nats.url, ...names, partitions });
  let dead = false;
  const router = createSessionRouter({
    log,
    transport: transportClass(major),
    createServer: () => buildServer(major, () => dead),
    principalOf: (request) => request.headers.get('authorization') ?? '',
    retryIntervalMs: 20,
    writerWatch: { checkMs: 100, silenceMs: 1_000 },
  });
  const sockets = new Set<Socket>();
  const http: Server = createServer((req, res) => {
    router.node(req, res).catch(() => res.destroy());
  });
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const { port } = http.address() as AddressInfo;
  let closed = false;
  const stopHttp = async (): Promise<void> => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  };
  return {
    url: `http://127.0.0.1:${port}`,
    log,
    router,
    get dead() {
      return dead;
    },
    async kill() {
      dead = true;
      await stopHttp();
      // Closing the connection drops the presence subscription: probes now get "no responders", as after SIGKILL.
      await log.connection.close();
    },
    async close() {
      if (closed) return;
      closed = true;
      if (!dead) {
        await router.close();
        await stopHttp();
        await log.close();
      }
    },
  };
}

export interface Fleet {
  readonly nats: NatsServer;
  /** `count` instances on a log of their own, on `partitions` partitions (default 1). */
  start(major: SdkMajor, count: number, partitions?: number): Promise<Instance[]>;
  teardown(): Promise<void>;
}

/** One nats-server per test file (random loopback ports, fresh store dir), and the instances tests start on it. */
export async function startFleet(): Promise<Fleet> {
  const nats = await startNatsServer();
  const all: Instance[] = [];
  return {
    nats,
    async start(major, count, partitions = 1) {
      const names = isolatedNames();
      const started: Instance[] = [];
      for (let i = 0; i < count; i += 1) started.push(await startInstance(nats, names, major, partitions));
      all.push(...started);
      return started;
    },
    async teardown() {
      for (const instance of all) await instance.close().catch(() => undefined);
      await nats.cleanup();
    },
  };
}

/** A connected official SDK client of either major version, with the calls the tests make. */
export interface TestClient {
  callStream(count: number, delayMs: number, onProgress: (progress: number) => void): Promise<string>;
  ping(): Promise<string>;
  readonly sessionId: string | undefined;
  close(): Promise<void>;
}

export async function connectClient(major: SdkMajor, url: string, authorization: string): Promise<TestClient> {
  const headers = { authorization };
  // The default reconnection gives up after 2 failed attempts in a row; cuts are separate disconnects, each reset to 0.
  const reconnectionOptions = { initialReconnectionDelay: 20, maxReconnectionDelay: 200, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 };
  const text = (result: unknown): string => {
    const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
    return content.map((c) => c.text ?? '').join('');
  };
  if (major === 'v1') {
    const transport = new ClientTransportV1(new URL(url), { requestInit: { headers }, reconnectionOptions });
    const client = new ClientV1({ name: 'tether-sdk-test-client', version: '1.0.0' });
    await client.connect(transport);
    return {
      get sessionId() {
        return transport.sessionId;
      },
      async callStream(count, delayMs, onProgress) {
        const result = await client.callTool({ name: 'stream', arguments: { count, delayMs } }, undefined, { onprogress: (p) => onProgress(p.progress), timeout: 120_000 });
        return text(result);
      },
      async ping() {
        return text(await client.callTool({ name: 'ping', arguments: {} }));
      },
      close: () => client.close(),
    };
  }
  const transport = new ClientTransportV2(new URL(url), { requestInit: { headers }, reconnectionOptions });
  const client = new ClientV2({ name: 'tether-sdk-test-client', version: '2.0.0' });
  await client.connect(transport);
  return {
    get sessionId() {
      return transport.sessionId;
    },
    async callStream(count, delayMs, onProgress) {
      const result = await client.callTool({ name: 'stream', arguments: { count, delayMs } }, { onprogress: (p: { progress: number }) => onProgress(p.progress), timeout: 120_000 });
      return text(result);
    },
    async ping() {
      return text(await client.callTool({ name: 'ping', arguments: {} }));
    },
    close: () => client.close(),
  };
}

/** Resolves once `predicate` holds, checked on every call of the returned `poke` (event-driven, no timers). */
export function whenTrue(predicate: () => boolean): { poke(): void; reached: Promise<void> } {
  let resolve!: () => void;
  const reached = new Promise<void>((r) => (resolve = r));
  return {
    poke() {
      if (predicate()) resolve();
    },
    reached,
  };
}
