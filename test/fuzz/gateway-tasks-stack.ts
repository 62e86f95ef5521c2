import type { DestinationStream } from 'pino';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { createRootLogger } from '@tether/telemetry';
import { startNatsServer, startTaskUpstream } from '@tether/testing';
import type { NatsServer, TaskUpstream } from '@tether/testing';
import { healthz, OPEN_STREAM_READ_MS, sendBounded } from './gateway-stack.js';
import type { WireRequest, WireResponse } from './gateway-stack.js';

/** The revision whose requests the gateway turns into tasks. */
export const TASKS_VERSION = '2026-07-28';
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';
export const CAPABILITIES_META = 'io.modelcontextprotocol/clientCapabilities';

/** A correct 2026-07-28 `_meta` envelope that declares the Tasks extension. */
export const DECLARED_META = {
  'io.modelcontextprotocol/protocolVersion': TASKS_VERSION,
  'io.modelcontextprotocol/clientInfo': { name: 'fuzz-tasks', version: '0' },
  [CAPABILITIES_META]: { extensions: { [TASKS_EXTENSION]: {} } },
} as const;

/**
 * Two gateways in this process (one deployment: one nats-server, one task
 * stream) in front of `startTaskUpstream()`, the SDK v2 server whose tools
 * declare `execution.taskSupport` and know nothing of tasks. In process so
 * that every line either gateway logs (root logger at `trace`) is read: no
 * line may hold a task id whole, or a credential a request sent.
 */
export interface TaskGatewayStack {
  readonly nats: NatsServer;
  readonly upstream: TaskUpstream;
  readonly gateways: readonly Gateway[];
  /** `http://127.0.0.1:<port>` of each gateway. */
  readonly origins: readonly string[];
  /** Every line both gateways logged, oldest first (pino JSON, level trace and up). */
  readonly logLines: readonly string[];
  /** Sends one request to gateway `index`; an SSE answer still open after `openStreamReadMs` is cut. */
  send(index: number, req: WireRequest, openStreamReadMs?: number): Promise<WireResponse>;
  /** Both gateways answer /healthz 200 within ANSWER_MS and still listen. */
  healthy(): Promise<{ ok: true } | { ok: false; why: string }>;
  /** Drains both gateways (throws if a drain fails), then stops the rest. */
  stop(): Promise<void>;
}

export async function startTaskGatewayStack(count = 2): Promise<TaskGatewayStack> {
  const nats = await startNatsServer();
  const upstream = await startTaskUpstream();
  const logLines: string[] = [];
  const destination: DestinationStream = { write: (line: string) => void logLines.push(line) };
  const gateways: Gateway[] = [];
  const origins: string[] = [];
  try {
    for (let i = 0; i < count; i += 1) {
      // Defaults for every task setting (--task-after 250 ms, --task-ttl 1h): what a deployment runs.
      const config = parseConfig(['--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', `fuzz-tasks-${i}`], {});
      const gateway = createGateway(config, await openLog(config), createRootLogger('tether-gateway', { level: 'trace', pretty: false, destination }));
      gateways.push(gateway);
      origins.push(`http://127.0.0.1:${await gateway.listen()}`);
    }
  } catch (err) {
    await Promise.allSettled(gateways.map((g) => g.close()));
    await upstream.close();
    await nats.cleanup();
    throw err;
  }
  return {
    nats,
    upstream,
    gateways,
    origins,
    logLines,
    send: (index, req, openStreamReadMs = OPEN_STREAM_READ_MS) => sendBounded(origins[index]!, req, openStreamReadMs),
    async healthy() {
      for (const [i, gateway] of gateways.entries()) {
        if (!gateway.server.listening) return { ok: false, why: `gateway ${i} stopped listening` };
        const health = await healthz(origins[i]!);
        if (!health.ok) return { ok: false, why: `gateway ${i}: ${health.why}` };
      }
      return { ok: true };
    },
    async stop() {
      try {
        for (const gateway of gateways) await gateway.drain();
      } finally {
        await upstream.close();
        await nats.cleanup();
      }
    },
  };
}

/** Headers of a 2026-07-28 POST (no session) naming `method` and, when given, `name`. */
export function modernHeaders(method: string | undefined, name: string | undefined, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  return {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': TASKS_VERSION,
    ...(method === undefined ? {} : { 'mcp-method': method }),
    ...(name === undefined ? {} : { 'mcp-name': name }),
    ...extra,
  };
}

/** The JSON-RPC messages of an answer: the body itself (JSON), or each SSE `data:` line; undefined for what is neither. */
export function messagesOf(res: WireResponse): unknown[] | undefined {
  const type = (res.headers['content-type'] ?? '').toLowerCase();
  try {
    if (type.startsWith('text/event-stream')) {
      return res.body
        .split(/\r\n|\r|\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => JSON.parse(l.slice(l.startsWith('data: ') ? 6 : 5)) as unknown);
    }
    if (res.body === '') return [];
    const value = JSON.parse(res.body) as unknown;
    return Array.isArray(value) ? value : [value];
  } catch {
    return undefined;
  }
}

/** `_meta` that declares the Tasks extension and form elicitation (what the multi-round-trip tools ask for). */
export const ELICITING_META = { ...DECLARED_META, [CAPABILITIES_META]: { extensions: { [TASKS_EXTENSION]: {} }, elicitation: { form: {} } } } as const;

/** One JSON-RPC request to gateway `index`, as a 2026-07-28 client sends it (routing headers right, `_meta` declaring tasks). */
export async function rpc(
  stack: TaskGatewayStack,
  index: number,
  method: string,
  params: Record<string, unknown>,
  opts: { readonly id?: number | string; readonly name?: string; readonly authorization?: string; readonly openStreamReadMs?: number } = {},
): Promise<{ req: WireRequest; res: WireResponse; sentAt: number; receivedAt: number }> {
  const req: WireRequest = {
    method: 'POST',
    path: '/mcp',
    headers: modernHeaders(method, opts.name, opts.authorization === undefined ? {} : { authorization: opts.authorization }),
    body: Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: opts.id ?? 1, method, params: { _meta: ELICITING_META, ...params } })),
  };
  const sentAt = performance.now();
  const res = await stack.send(index, req, opts.openStreamReadMs);
  return { req, res, sentAt, receivedAt: performance.now() };
}
