import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { SseParser } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { namespaceNames } from '@tether/session-log';
import { startMcpUpstream, startNatsServer } from '@tether/testing';
import type { McpUpstream, NatsServer } from '@tether/testing';

/** Real gateways in this process on one namespace of a real nats-server, a real SDK upstream. */
export interface AdminStack {
  readonly nats: NatsServer;
  readonly upstream: McpUpstream;
  readonly namespace: string;
  readonly names: ReturnType<typeof namespaceNames>;
  /** By instance id. */
  readonly gateways: Map<string, Gateway>;
  readonly urls: Map<string, string>;
  teardown(): Promise<void>;
}

let counter = 0;

/** `partitions`: the log's partition count (default 1, the unpartitioned layout). */
export async function startAdminStack(instances: readonly string[], extraArgs: readonly string[] = [], options: { readonly partitions?: number } = {}): Promise<AdminStack> {
  const nats = await startNatsServer();
  const upstream = await startMcpUpstream({ eventStore: true });
  counter += 1;
  const namespace = `adm${process.pid}x${counter}`;
  const names = namespaceNames(namespace);
  const gateways = new Map<string, Gateway>();
  const urls = new Map<string, string>();
  for (const id of instances) {
    const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', id, '--heartbeat', '1s', '--namespace', namespace, ...extraArgs], {});
    const log = await createLocalLog({ servers: nats.url, namespace, streamName: config.logStream, maxAgeMs: config.logMaxAgeMs, ...(options.partitions === undefined ? {} : { partitions: options.partitions }) });
    const gateway = createGateway(config, log, pino({ level: process.env.TETHER_TEST_LOG ?? 'silent' }));
    const port = await gateway.listen();
    gateways.set(id, gateway);
    urls.set(id, `http://127.0.0.1:${port}/mcp`);
  }
  return {
    nats,
    upstream,
    namespace,
    names,
    gateways,
    urls,
    async teardown() {
      for (const g of gateways.values()) await g.close().catch(() => undefined);
      await upstream.close();
      await nats.cleanup();
    },
  };
}

export const VERSION = '2025-11-25';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': VERSION };

export async function initialize(url: string): Promise<string> {
  const res = await fetch(url, { method: 'POST', headers: HEADERS, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: VERSION, capabilities: {}, clientInfo: { name: 'admin-test', version: '0' } } }) });
  const sessionId = res.headers.get('mcp-session-id');
  await res.arrayBuffer();
  if (sessionId === null) throw new Error(`initialize answered ${res.status} without a session`);
  await post(url, sessionId, { jsonrpc: '2.0', method: 'notifications/initialized' }).then((r) => r.arrayBuffer());
  return sessionId;
}

export function post(url: string, sessionId: string, body: unknown): Promise<Response> {
  return fetch(url, { method: 'POST', headers: { ...HEADERS, 'mcp-session-id': sessionId }, body: JSON.stringify(body) });
}

export function callProgress(url: string, sessionId: string, count: number, delayMs: number, signal?: AbortSignal): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { ...HEADERS, 'mcp-session-id': sessionId },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'stream_progress', arguments: { count, delayMs }, _meta: { progressToken: 'p' } } }),
    ...(signal === undefined ? {} : { signal }),
  });
}

export function resume(url: string, sessionId: string, lastEventId: string, signal?: AbortSignal): Promise<Response> {
  return fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': VERSION, 'last-event-id': lastEventId }, ...(signal === undefined ? {} : { signal }) });
}

/** SSE messages with data (events, not primes or resume frames), until `stop` says so or the body ends. */
export async function readEvents(res: Response, stop: (messages: SseMessage[]) => boolean = () => false): Promise<SseMessage[]> {
  const parser = new SseParser();
  const out: SseMessage[] = [];
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      for (const m of parser.push(value)) if (m.data !== '' && m.event !== 'resume') out.push(m);
      if (stop(out)) break;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return out;
}

const BIN = fileURLToPath(new URL('../bin/tether-admin.js', import.meta.url));

/** Runs the committed bin (dist built by `tsc -b`) as a process; `env` over a clean TETHER_* environment. */
export function admin(args: readonly string[], env: Readonly<Record<string, string>> = {}): Promise<{ status: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { timeout: 20_000, env: { ...process.env, TETHER_NATS_URL: '', TETHER_NAMESPACE: '', TETHER_LOG_PARTITIONS: '', ...env } }, (err, stdout, stderr) => {
      const status = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 99;
      resolve({ status, stdout, stderr });
    });
  });
}

export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** What `runScenario` made: session A with a cross-instance resume, session B with a refused one (closed by it). */
export interface Scenario {
  readonly a: string;
  readonly b: string;
  /** A's POST stream, and the cursor it was resumed from on gw-b. */
  readonly stream: string;
  readonly cursor: { readonly seq: number; readonly pos: number };
}

/**
 * On gateways gw-a and gw-b: A is initialized on gw-a, a tool call streams
 * there and its client is cut after 2 events; it resumes on gw-b. A fresh
 * GET of A on gw-b is opened and left. B is initialized on gw-b, streams a
 * call, then resumes on gw-a with a cursor of another epoch: refused
 * `epoch_mismatch`, and B is closed.
 */
export async function runScenario(stack: AdminStack): Promise<Scenario> {
  const urlA = stack.urls.get('gw-a')!;
  const urlB = stack.urls.get('gw-b')!;
  const a = await initialize(urlA);
  const cut = new AbortController();
  const first = await readEvents(await callProgress(urlA, a, 6, 100, cut.signal), (m) => m.length >= 2);
  cut.abort();
  const lastId = first[1]!.id!;
  const [, stream, seq, pos] = lastId.split('-');
  const resumed = await resume(urlB, a, lastId);
  if (resumed.status !== 200) throw new Error(`cross-instance resume answered ${resumed.status}`);
  await readEvents(resumed);
  const get = new AbortController();
  const fresh = await fetch(urlB, { headers: { accept: 'text/event-stream', 'mcp-session-id': a, 'mcp-protocol-version': VERSION }, signal: get.signal });
  if (fresh.status !== 200) throw new Error(`fresh GET answered ${fresh.status}`);
  get.abort();

  const b = await initialize(urlB);
  const events = await readEvents(await callProgress(urlB, b, 2, 0));
  const [, bStream, bSeq, bPos] = events[events.length - 1]!.id!.split('-');
  const refused = await resume(urlA, b, `aaaaaaaaaa-${bStream}-${bSeq}-${bPos}`);
  await refused.arrayBuffer();
  if (refused.status !== 404) throw new Error(`the forged cursor was answered ${refused.status}`);
  return { a, b, stream: stream!, cursor: { seq: Number(seq), pos: Number(pos) } };
}
