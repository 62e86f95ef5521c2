import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { z } from 'zod';
import { createDurableTasks } from '../src/tasks/index.js';
import type { CreateDurableTasksOptions, DurableTasks, DurableTasksOptions } from '../src/tasks/index.js';

let counter = 0;
/** Stream names and a subject prefix of their own per store, so tests sharing a server never meet. */
export function isolatedTaskNames(): Pick<DurableTasksOptions, 'tasksStream' | 'messagesStream' | 'subjectPrefix'> {
  counter += 1;
  const tag = `t${process.pid}_${counter}`;
  return { tasksStream: `TASKS_${tag}`, messagesStream: `TASKMSG_${tag}`, subjectPrefix: `tt.${tag}` };
}

/** One real nats-server per test file; every connection opened through it is closed at teardown. */
export interface TasksFixture {
  readonly server: NatsServer;
  connection(): Promise<NatsConnection>;
  /** A store on a connection of its own (what another process would have). */
  open(names: ReturnType<typeof isolatedTaskNames>, options?: Omit<CreateDurableTasksOptions, 'nc'>): Promise<{ tasks: DurableTasks; nc: NatsConnection }>;
  teardown(): Promise<void>;
}

export async function startTasksFixture(): Promise<TasksFixture> {
  const server = await startNatsServer();
  const conns: NatsConnection[] = [];
  const fixture: TasksFixture = {
    server,
    async connection() {
      const nc = await connect({ servers: server.url });
      conns.push(nc);
      return nc;
    },
    async open(names, options = {}) {
      const nc = await fixture.connection();
      return { nc, tasks: await createDurableTasks({ ...options, ...names, nc }) };
    },
    async teardown() {
      for (const nc of conns) await nc.close().catch(() => undefined);
      await server.cleanup();
    },
  };
  return fixture;
}

/** Polls `probe` until it returns a value other than undefined; fails naming `what` at the deadline. */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined>, deadlineMs = 15_000, everyMs = 50): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}

/** The work behind the task tool: each call waits until the test releases it, so status is observed before the result. */
export interface Gate {
  release(): void;
  readonly opened: Promise<void>;
}
export function createGate(): Gate {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  return { release, opened };
}

export interface SdkTaskServer {
  readonly url: string;
  /** Stops accepting, closes every transport and connection: what a crash leaves behind, minus the process exit. */
  close(): Promise<void>;
}

/**
 * An official SDK v1 server (McpServer) with one task tool, `slow-echo
 * {text}`: it creates a task, returns it, and stores `echo: <text>` as the
 * result once `gate` opens. Each session's (or, stateless, each request's)
 * server gets the store of the request's principal (its Authorization value).
 */
export async function startSdkTaskServer(tasks: DurableTasks, gate: Gate, mode: 'stateful' | 'stateless'): Promise<SdkTaskServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const build = (principal: string): McpServer => {
    const { taskStore, taskMessageQueue } = tasks.forPrincipal(principal);
    const server = new McpServer(
      { name: 'tasks-test', version: '1.0.0' },
      { capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore, taskMessageQueue },
    );
    server.experimental.tasks.registerToolTask(
      'slow-echo',
      { description: 'echoes once released', inputSchema: { text: z.string() } },
      {
        async createTask({ text }, extra) {
          const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? null });
          void gate.opened.then(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `echo: ${text}` }] })).catch(() => undefined);
          return { task };
        },
        async getTask(_args, extra) {
          return extra.taskStore.getTask(extra.taskId);
        },
        async getTaskResult(_args, extra) {
          return (await extra.taskStore.getTaskResult(extra.taskId)) as { content: [] };
        },
      },
    );
    return server;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const principal = req.headers.authorization ?? '';
    const body = req.method === 'POST' ? await readJson(req) : undefined;
    if (mode === 'stateless') {
      // Stateless is spelled `sessionIdGenerator: undefined` (the SDK's own docs), which exactOptionalPropertyTypes refuses as written.
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined } as unknown as ConstructorParameters<typeof StreamableHTTPServerTransport>[0]);
      const server = build(principal);
      res.on('close', () => void transport.close().then(() => server.close()));
      await server.connect(transport);
      await transport.handleRequest(req, res, body);
      return;
    }
    const sessionId = req.headers['mcp-session-id'];
    let transport = typeof sessionId === 'string' ? transports.get(sessionId) : undefined;
    if (transport === undefined) {
      if (!isInitializeRequest(body)) {
        res.writeHead(404).end();
        return;
      }
      const fresh = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void transports.set(id, fresh) });
      transport = fresh;
      await build(principal).connect(fresh);
    }
    await transport.handleRequest(req, res, body);
  };

  const sockets = new Set<Socket>();
  const http: Server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  const address = http.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  return {
    url: `http://127.0.0.1:${address.port}/mcp`,
    async close() {
      for (const transport of transports.values()) await transport.close().catch(() => undefined);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}
