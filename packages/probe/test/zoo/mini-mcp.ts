import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { openSse, readBody, rpcError, sendJson } from './http-out.js';
import type { JsonRpcId, SseOut } from './http-out.js';

/**
 * A deliberately small MCP Streamable HTTP server for the zoo: JSON answers
 * for initialize and tools/list, an SSE stream (priming event with `retry`,
 * progress notifications, then the result) for the one tool `count`, and a
 * `resume` hook each zoo server fills in with its own way of getting
 * resumption wrong. Real HTTP on 127.0.0.1, port 0.
 */


/** An SSE event as a zoo server keeps it. `id` undefined: sent without `id:`. */
export type { JsonRpcId, SseOut };

/** An SSE event as a zoo server keeps it. `id` undefined: sent without `id:`. */
export interface ZooEvent {
  readonly id: string | undefined;
  readonly data: string;
}

/** The events of one SSE stream, with live listeners (`undefined`: the stream ended). */
export class StreamLog {
  readonly key: string;
  readonly events: ZooEvent[] = [];
  done = false;
  readonly #listeners = new Set<(e: ZooEvent | undefined) => void>();

  constructor(key: string) {
    this.key = key;
  }

  append(e: ZooEvent): void {
    this.events.push(e);
    // A snapshot: a listener may subscribe another one, which must not see `e` too.
    for (const l of [...this.#listeners]) l(e);
  }

  finish(): void {
    this.done = true;
    for (const l of [...this.#listeners]) l(undefined);
  }

  subscribe(fn: (e: ZooEvent | undefined) => void): () => void {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }
}

/** A job's output on the session bus: `data` undefined means the job finished. */
export interface JobEvent {
  readonly job: string;
  readonly data: string | undefined;
}

/** What survives a restart and what instances behind one balancer share: sessions, job output, the "disk". */
export class Backend {
  readonly sessions = new Set<string>();
  readonly disk = new Map<string, ZooEvent[]>();
  readonly #bus = new Map<string, Set<(e: JobEvent) => void>>();

  publish(sessionId: string, e: JobEvent): void {
    for (const l of this.#bus.get(sessionId) ?? []) l(e);
  }

  subscribe(sessionId: string, fn: (e: JobEvent) => void): () => void {
    let set = this.#bus.get(sessionId);
    if (set === undefined) this.#bus.set(sessionId, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }
}

/** Process memory: lost on a restart, never shared between instances. */
export class Proc {
  readonly logs = new Map<string, StreamLog>();
  readonly streamOfId = new Map<string, string>();
  readonly counters = new Map<string, number>();
  readonly timers = new Set<NodeJS.Timeout>();
  streams = 0;
}

export interface ResumeContext {
  readonly sessionId: string;
  readonly cursor: string;
  readonly res: ServerResponse;
  openSse(): SseOut;
}

/** Arguments of the `count` tool. */
export const COUNT_TOOL = {
  name: 'count',
  description: 'Streams n progress notifications, intervalMs apart, then answers.',
  inputSchema: { type: 'object', properties: { n: { type: 'number' }, intervalMs: { type: 'number' } } },
} as const;

export abstract class MiniMcpServer {
  readonly name: string;
  readonly backend: Backend;
  proc = new Proc();
  port = 0;
  /** Ids numbered per session (unique, as the spec asks) or per stream (not unique). */
  protected idScheme: 'session' | 'stream' = 'session';
  protected retryMs = 100;
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  constructor(name: string, backend: Backend = new Backend()) {
    this.name = name;
    this.backend = backend;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  async start(): Promise<this> {
    await this.#listen(0);
    return this;
  }

  /** A crash and restart on the same port: process memory and running jobs are lost, the backend stays. */
  async restart(): Promise<void> {
    await this.#stop();
    for (const t of this.proc.timers) clearInterval(t);
    this.proc = new Proc();
    await this.#listen(this.port);
  }

  async close(): Promise<void> {
    for (const t of this.proc.timers) clearInterval(t);
    await this.#stop();
  }

  /** Answers a GET with `Last-Event-ID`: where each zoo server goes wrong. */
  protected abstract resume(ctx: ResumeContext): void;

  /** The client dropped a tool stream before its end. */
  protected onCut(_sessionId: string, _log: StreamLog): void {}

  /** Gives the next event of `log` its id and keeps it. */
  protected record(sessionId: string, log: StreamLog, data: string): ZooEvent {
    const counter = this.idScheme === 'session' ? sessionId : `${sessionId}/${log.key}`;
    const n = (this.proc.counters.get(counter) ?? 0) + 1;
    this.proc.counters.set(counter, n);
    const e = { id: String(n), data };
    this.proc.streamOfId.set(`${sessionId}\n${e.id}`, log.key);
    log.append(e);
    return e;
  }

  /** The log of the stream that sent `cursor`, if this process has it. */
  protected streamOf(sessionId: string, cursor: string): StreamLog | undefined {
    const key = this.proc.streamOfId.get(`${sessionId}\n${cursor}`);
    return key === undefined ? undefined : this.proc.logs.get(key);
  }

  /** Follows the session's job output into `log`, numbering events as this process does. */
  protected follow(sessionId: string, log: StreamLog, job: string | undefined): void {
    const off = this.backend.subscribe(sessionId, (e) => {
      if (job !== undefined && e.job !== job) return;
      if (e.data === undefined) {
        off();
        log.finish();
      } else {
        this.record(sessionId, log, e.data);
      }
    });
  }

  protected openLog(): StreamLog {
    const log = new StreamLog(`s${++this.proc.streams}`);
    this.proc.logs.set(log.key, log);
    return log;
  }

  async #listen(port: number): Promise<void> {
    const server = createServer((req, res) => {
      this.#handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(err));
      });
    });
    server.on('connection', (s) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  async #stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const header = req.headers['mcp-session-id'];
    const sid = typeof header === 'string' ? header : undefined;
    if (req.method === 'POST') return this.#post(JSON.parse(await readBody(req)) as Rpc, sid, res);
    if (sid === undefined || !this.backend.sessions.has(sid)) return sendJson(res, 404, rpcError(null, -32001, 'Session not found'));
    if (req.method === 'DELETE') {
      this.backend.sessions.delete(sid);
      return void res.writeHead(200).end();
    }
    const cursor = req.headers['last-event-id'];
    if (req.method !== 'GET' || typeof cursor !== 'string') return void res.writeHead(405).end();
    this.resume({ sessionId: sid, cursor, res, openSse: () => openSse(res, sid) });
  }

  #post(msg: Rpc, sid: string | undefined, res: ServerResponse): void {
    if (msg.method === 'initialize') {
      const id = randomUUID();
      this.backend.sessions.add(id);
      const result = {
        protocolVersion: typeof msg.params?.['protocolVersion'] === 'string' ? msg.params['protocolVersion'] : '2025-11-25',
        capabilities: { tools: {} },
        serverInfo: { name: this.name, version: '0.0.0' },
      };
      return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result }, id);
    }
    if (sid === undefined || !this.backend.sessions.has(sid)) return sendJson(res, 404, rpcError(null, -32001, 'Session not found'));
    if (msg.id === undefined) return void res.writeHead(202).end();
    if (msg.method === 'tools/list') return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result: { tools: [COUNT_TOOL] } }, sid);
    if (msg.method === 'ping') return sendJson(res, 200, { jsonrpc: '2.0', id: msg.id, result: {} }, sid);
    if (msg.method !== 'tools/call' || msg.params?.['name'] !== COUNT_TOOL.name) {
      return sendJson(res, 200, rpcError(msg.id, -32601, 'Method not found'), sid);
    }
    this.#count(sid, msg, res);
  }

  #count(sid: string, msg: Rpc, res: ServerResponse): void {
    const args = (msg.params?.['arguments'] ?? {}) as { n?: number; intervalMs?: number };
    const meta = msg.params?.['_meta'] as { progressToken?: JsonRpcId } | undefined;
    const n = args.n ?? 40;
    const job = `${sid}/${String(msg.id)}`;
    const log = this.openLog();
    const out = openSse(res, sid);
    out.write(this.record(sid, log, ''), this.retryMs);
    const off = log.subscribe((e) => (e === undefined ? out.end() : out.write(e)));
    res.on('close', () => {
      off();
      if (!log.done) this.onCut(sid, log);
    });
    this.follow(sid, log, job);
    let i = 0;
    const timer = setInterval(() => {
      i += 1;
      const progress =
        meta?.progressToken === undefined
          ? { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `tick ${i}` } }
          : { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: meta.progressToken, progress: i, total: n } };
      this.backend.publish(sid, { job, data: JSON.stringify(progress) });
      if (i < n) return;
      clearInterval(timer);
      this.proc.timers.delete(timer);
      const result = { content: [{ type: 'text', text: `counted ${n}` }] };
      this.backend.publish(sid, { job, data: JSON.stringify({ jsonrpc: '2.0', id: msg.id, result }) });
      this.backend.publish(sid, { job, data: undefined });
    }, args.intervalMs ?? 15);
    this.proc.timers.add(timer);
  }
}

interface Rpc {
  readonly id?: JsonRpcId;
  readonly method?: string;
  readonly params?: Record<string, unknown>;
}
