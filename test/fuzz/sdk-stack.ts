import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { createDurableTasks, createSessionRouter, createWriterPresence } from '@tether/sdk';
import type { DurableTasks, SdkServer, SdkTransportClass, SessionRouter, WriterPresence } from '@tether/sdk';
import { createSubjects, SessionLog } from '@tether/session-log';
import type { Subjects } from '@tether/session-log';
import { startNatsServer, UpstreamTools } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { z } from 'zod';
import { ANSWER_MS, PROTOCOL_VERSION, sendBounded, sseIds } from './gateway-stack.js';
import type { SeededSession, WireRequest, WireResponse } from './gateway-stack.js';

/**
 * The SDK stores under fuzzing, in this process (they are libraries, not
 * services) on one real nats-server (random loopback ports, fresh store
 * dir): two "instances" of an SDK fleet, each with its own NATS connection,
 * `SessionLog` and writer presence on the same log, the durable task store
 * on a connection of its own, and a `createSessionRouter` on node:http
 * (port 0) in front of an official SDK v1 server with the test upstream's
 * tools.
 *
 * Limits are lowered so the fuzzer reaches both sides cheaply: event
 * payloads 4 KiB, task results and queued messages 2 KiB, task pages of 3.
 */
export const LIMITS = { maxPayloadBytes: 4_096, maxResultBytes: 2_048, maxQueuedMessageBytes: 2_048, listPageSize: 3, maxTtlMs: 3_600_000 } as const;
/** Every name of the log and the task streams derives from it (`TETHER_LOG_sdkfuzz`, `tether_sdkfuzz.…`). */
const NAMESPACE = 'sdkfuzz';

/** One process of the fleet, as far as the stores can tell: its connection, log and presence. */
export interface SdkInstance {
  readonly log: SessionLog;
  readonly presence: WriterPresence;
}

export interface SdkStack {
  readonly nats: NatsServer;
  readonly instances: readonly [SdkInstance, SdkInstance];
  readonly tasks: DurableTasks;
  /** For purges (what retention does to a stream) and the log's subjects. */
  readonly jsm: JetStreamManager;
  readonly subjects: Subjects;
  readonly streamName: string;
  readonly router: RouterStack;
  /** A raw connection (the presence property asks writers questions on it). */
  readonly nc: NatsConnection;
  stop(): Promise<void>;
}

export interface RouterStack {
  readonly origin: string;
  readonly router: SessionRouter;
  send(req: WireRequest, openStreamReadMs?: number): Promise<WireResponse>;
  /** Initializes a session through the router and records a batch of two tool calls (one stream, marker in its payloads). */
  seed(): Promise<SeededSession>;
}

export async function startSdkStack(): Promise<SdkStack> {
  const nats = await startNatsServer();
  const cleanups: (() => Promise<unknown>)[] = [() => nats.cleanup()];
  const stop = async (): Promise<void> => {
    for (const step of cleanups.reverse()) await step().catch(() => undefined);
  };
  try {
    const instance = async (): Promise<SdkInstance> => {
      const log = await SessionLog.create({ servers: nats.url, namespace: NAMESPACE, maxPayloadBytes: LIMITS.maxPayloadBytes });
      const presence = createWriterPresence(log);
      cleanups.push(() => log.close(), () => presence.close());
      return { log, presence };
    };
    const instances = [await instance(), await instance()] as const;
    const nc = await connect({ servers: nats.url });
    cleanups.push(() => nc.close());
    const tasks = await createDurableTasks({
      nc,
      namespace: NAMESPACE,
      maxResultBytes: LIMITS.maxResultBytes,
      maxQueuedMessageBytes: LIMITS.maxQueuedMessageBytes,
      listPageSize: LIMITS.listPageSize,
      maxTtlMs: LIMITS.maxTtlMs,
    });
    const jsm = await jetstreamManager(nc);
    const router = await startRouter(nats, cleanups);
    const { config } = instances[0].log;
    return { nats, instances, tasks, jsm, subjects: createSubjects(config.subjectPrefix), streamName: config.streamName, router, nc, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** The tools of the test upstream (`@tether/testing`), so that fuzzed tool calls reach real ones. */
function buildServer(): SdkServer {
  const server = new McpServer({ name: 'tether-sdk-fuzz', version: '0.0.0' }, { capabilities: { logging: {} } });
  const countArgs = { count: z.number().int().min(0).max(5), delayMs: z.number().int().min(0).max(5) };
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  server.registerTool(UpstreamTools.StreamProgress, { inputSchema: countArgs }, async ({ count, delayMs }, extra) => {
    const progressToken = extra._meta?.progressToken;
    for (let i = 1; i <= count; i += 1) {
      if (progressToken !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: i, total: count, message: `step ${i}` } });
      await pause(delayMs);
    }
    return { content: [{ type: 'text', text: `done ${count}` }] };
  });
  server.registerTool(UpstreamTools.NotifyStandalone, { inputSchema: countArgs }, async ({ count, delayMs }, extra) => {
    for (let i = 1; i <= count; i += 1) {
      await server.sendLoggingMessage({ level: 'info', logger: 'tether-sdk-fuzz', data: { seq: i, of: count, call: String(extra.requestId) } }, extra.sessionId);
      await pause(delayMs);
    }
    return { content: [{ type: 'text', text: `sent ${count}` }] };
  });
  server.registerTool(UpstreamTools.Echo, { inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text }] }));
  return server as unknown as SdkServer;
}

async function startRouter(nats: NatsServer, cleanups: (() => Promise<unknown>)[]): Promise<RouterStack> {
  const log = await SessionLog.create({ servers: nats.url, namespace: NAMESPACE, maxPayloadBytes: LIMITS.maxPayloadBytes });
  cleanups.push(() => log.close());
  const router = createSessionRouter({
    log,
    transport: WebStandardStreamableHTTPServerTransport as unknown as SdkTransportClass,
    createServer: buildServer,
    keepAliveMs: 0,
    writerWatch: { checkMs: 100, silenceMs: 1_000 },
  });
  cleanups.push(() => router.close());
  const sockets = new Set<Socket>();
  const http: Server = createServer((req, res) => {
    router.node(req, res).catch(() => res.destroy());
  });
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });
  const origin = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const send = (req: WireRequest, openStreamReadMs?: number): Promise<WireResponse> => sendBounded(origin, req, openStreamReadMs);
  const post = (sessionId: string | undefined, message: unknown): Promise<WireResponse> => {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION };
    if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
    return send({ method: 'POST', path: '/mcp', headers, body: Buffer.from(JSON.stringify(message)) }, ANSWER_MS);
  };
  return {
    origin,
    router,
    send,
    async seed() {
      const marker = `ZQXMARK${randomBytes(8).toString('hex').toUpperCase()}`;
      const init = await post(undefined, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'fuzz-seed', version: '0' } } });
      const sessionId = init.headers['mcp-session-id'];
      if (init.status !== 200 || sessionId === undefined) throw new Error(`seed: initialize answered ${init.status}: ${init.body.slice(0, 300)}`);
      const ids = [...sseIds(init.body)].filter((id) => id !== '');
      const initialized = await post(sessionId, { jsonrpc: '2.0', method: 'notifications/initialized' });
      if (initialized.status !== 202) throw new Error(`seed: notifications/initialized answered ${initialized.status}: ${initialized.body.slice(0, 300)}`);
      const calls = [
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: UpstreamTools.StreamProgress, arguments: { count: 3, delayMs: 1 }, _meta: { progressToken: marker } } },
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: UpstreamTools.Echo, arguments: { text: marker } } },
      ];
      const res = await post(sessionId, calls);
      if (res.status !== 200 || res.cutOpen || !res.body.includes(`"text":"${marker}"`) || !res.body.includes('"progress":3')) {
        throw new Error(`seed: the tool calls answered ${res.status}${res.cutOpen ? ' (left open)' : ''}: ${res.body.slice(0, 300)}`);
      }
      ids.push(...[...sseIds(res.body)].filter((id) => id !== ''));
      const epochs = new Set(ids.map((id) => id.split('-')[0]));
      const epoch = [...epochs][0];
      if (epochs.size !== 1 || epoch === undefined || ids.length < 5) throw new Error(`seed: unexpected ids ${JSON.stringify(ids)}`);
      return { sessionId, epoch, marker, ids };
    },
  };
}
