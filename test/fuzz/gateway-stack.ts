import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startMcpUpstream, startNatsServer, startServiceProcess, UpstreamTools } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const GATEWAY_MAIN = 'services/gateway/dist/main.js';
export const PROTOCOL_VERSION = '2025-11-25';

/**
 * Longest a request may take to answer (headers, and the whole body unless it
 * is an open SSE stream) before it counts as a hang: a bound on "never hangs",
 * not a latency claim (the slowest answer is printed in the summary). Generous
 * because loaded 2-core CI machines have stalled test processes for 10 s+.
 */
export const ANSWER_MS = 20_000;
/** How long an SSE answer that is still open (a GET stream never ends by itself) is read before we leave. */
export const OPEN_STREAM_READ_MS = 200;

/**
 * One real session of the gateway, seeded with streamed tool calls so the
 * log holds its events. `marker` is in the payloads of its events only
 * (the progress token and the echoed text), never in any fuzzed request.
 */
export interface SeededSession {
  readonly sessionId: string;
  readonly epoch: string;
  readonly marker: string;
  /** Every SSE id the gateway sent while seeding (primes, progress, results), in order. */
  readonly ids: readonly string[];
}

/** One fuzzed HTTP request, materialized (what goes on the wire). */
export interface WireRequest {
  readonly method: string;
  readonly path: string;
  /** Header values as `fetch` takes them (byte strings: chars <= 0xff, no CR, LF or NUL). */
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Uint8Array | undefined;
}

/** What came back, bounded. */
export interface WireResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  /** The body was cut after OPEN_STREAM_READ_MS because the stream stayed open (legitimate for SSE). */
  readonly cutOpen: boolean;
  readonly elapsedMs: number;
}

/** GET /healthz within ANSWER_MS: what both gateway stacks (with and without `--auth`) call healthy. */
export async function healthz(origin: string): Promise<{ ok: true } | { ok: false; why: string }> {
  try {
    const res = await fetch(`${origin}/healthz`, { signal: AbortSignal.timeout(ANSWER_MS) });
    await res.arrayBuffer();
    return res.status === 200 ? { ok: true } : { ok: false, why: `/healthz answered ${res.status}` };
  } catch (err) {
    return { ok: false, why: `/healthz failed: ${(err as Error).message}` };
  }
}

/** The request got no answer (headers or a complete non-stream body) within ANSWER_MS, or the connection failed. */
export class NoAnswer extends Error {
  override readonly name = 'NoAnswer';
}

export interface GatewayStack {
  readonly nats: NatsServer;
  readonly upstream: McpUpstream;
  readonly gateway: ServiceProcess;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** Sends one request; an SSE answer still open after `openStreamReadMs` (default OPEN_STREAM_READ_MS) is cut. */
  send(req: WireRequest, openStreamReadMs?: number): Promise<WireResponse>;
  /** Initializes a session through the gateway and records a batch of two tool calls (a stream of five events) in its log. */
  seed(): Promise<SeededSession>;
  /** GET /healthz answers 200 within ANSWER_MS and the process is running. */
  healthy(): Promise<{ ok: true } | { ok: false; why: string }>;
  /** Stops everything; returns the gateway's exit status. */
  stop(): Promise<{ code: number | null; signal: string | null }>;
}

export async function startGatewayStack(): Promise<GatewayStack> {
  if (!existsSync(`${ROOT}/${GATEWAY_MAIN}`)) throw new Error(`${GATEWAY_MAIN} is missing: run \`npx tsc -b\` first (npm test does)`);
  const nats = await startNatsServer();
  const upstream = await startMcpUpstream({ eventStore: true });
  let gateway: ServiceProcess;
  try {
    gateway = await startServiceProcess({
      name: 'gateway-fuzz',
      command: process.execPath,
      args: [GATEWAY_MAIN, '--port', '0', '--nats', nats.url, '--upstream', upstream.url],
      cwd: ROOT,
      readyLine: (j) => j.msg === 'listening',
    });
  } catch (err) {
    await upstream.close();
    await nats.cleanup();
    throw err;
  }
  const origin = `http://127.0.0.1:${gateway.port}`;
  let exited: string | undefined;
  void gateway.exited.then((s) => (exited = `the gateway process exited (code ${s.code}, signal ${s.signal})`));

  const send = (req: WireRequest, openStreamReadMs = OPEN_STREAM_READ_MS): Promise<WireResponse> => sendBounded(origin, req, openStreamReadMs);

  const post = async (sessionId: string | undefined, message: unknown): Promise<WireResponse> => {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL_VERSION };
    if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
    // Seeding streams end by themselves: read them whole (within ANSWER_MS).
    return send({ method: 'POST', path: '/mcp', headers, body: Buffer.from(JSON.stringify(message)) }, ANSWER_MS);
  };

  return {
    nats,
    upstream,
    gateway,
    origin,
    send,
    async seed() {
      const marker = `ZQXMARK${randomBytes(8).toString('hex').toUpperCase()}`;
      const init = await post(undefined, { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'fuzz-seed', version: '0' } } });
      const sessionId = init.headers['mcp-session-id'];
      if (init.status !== 200 || sessionId === undefined) throw new Error(`seed: initialize answered ${init.status}: ${init.body.slice(0, 300)}`);
      const ids = [...sseIds(init.body)];
      // One POST stream whose events carry the marker: progress notifications
      // (progressToken) paced 1 ms apart, then an echo of it, as one batch.
      const calls = [
        { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: UpstreamTools.StreamProgress, arguments: { count: 3, delayMs: 1 }, _meta: { progressToken: marker } } },
        { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: UpstreamTools.Echo, arguments: { text: marker } } },
      ];
      const res = await post(sessionId, calls);
      if (res.status !== 200 || res.cutOpen || !res.body.includes(`"text":"${marker}"`) || !res.body.includes('"progress":3')) {
        throw new Error(`seed: the tool calls answered ${res.status}${res.cutOpen ? ' (left open)' : ''}: ${res.body.slice(0, 300)}`);
      }
      ids.push(...sseIds(res.body));
      const epochs = new Set(ids.map((id) => id.split('-')[0]));
      const epoch = [...epochs][0];
      if (epochs.size !== 1 || epoch === undefined || ids.length < 6) throw new Error(`seed: unexpected ids ${JSON.stringify(ids)}`);
      return { sessionId, epoch, marker, ids };
    },
    async healthy() {
      if (exited !== undefined) return { ok: false, why: exited };
      return healthz(origin);
    },
    async stop() {
      const status = await gateway.stop('SIGTERM', 10_000);
      await upstream.close();
      await nats.cleanup();
      return { code: status.code, signal: status.signal };
    },
  };
}

/** The SSE `id:` values of a body, in order (an empty `id:` included). */
export function* sseIds(body: string): Generator<string> {
  for (const line of body.split(/\r\n|\r|\n/)) {
    if (line === 'id') yield '';
    else if (line.startsWith('id:')) yield line.slice(line.startsWith('id: ') ? 4 : 3);
  }
}

/**
 * One request with hard bounds: the answer's headers, and a whole non-stream
 * body, within ANSWER_MS (else `NoAnswer`); an SSE body still open after
 * `openStreamReadMs` is cut (`cutOpen`), since a GET stream never ends by
 * itself. Also the SDK router's stack (sdk-stack.ts), in front of an in-process router.
 */
export async function sendBounded(origin: string, req: WireRequest, openStreamReadMs = OPEN_STREAM_READ_MS): Promise<WireResponse> {
  const started = performance.now();
  const leave = new AbortController();
  const signal = AbortSignal.any([AbortSignal.timeout(ANSWER_MS), leave.signal]);
  let res: Response;
  try {
    res = await fetch(`${origin}${req.path}`, {
      method: req.method,
      headers: req.headers,
      signal,
      redirect: 'manual',
      ...(req.body === undefined ? {} : { body: req.body as Uint8Array<ArrayBuffer> }),
    });
  } catch (err) {
    throw new NoAnswer(`no answer within ${ANSWER_MS} ms: ${describe(err)}`, { cause: err });
  }
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => (headers[name] = value));
  const isSse = (headers['content-type'] ?? '').startsWith('text/event-stream');
  const chunks: Buffer[] = [];
  let cutOpen = false;
  const cut = isSse ? setTimeout(() => ((cutOpen = true), leave.abort()), openStreamReadMs) : undefined;
  try {
    if (res.body !== null) for await (const chunk of res.body) chunks.push(Buffer.from(chunk));
  } catch (err) {
    if (!cutOpen) throw new NoAnswer(`${req.method} answered ${res.status} but its body did not complete within ${ANSWER_MS} ms: ${describe(err)}`, { cause: err });
  } finally {
    clearTimeout(cut);
  }
  return { status: res.status, headers, body: Buffer.concat(chunks).toString('utf8'), cutOpen, elapsedMs: performance.now() - started };
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  return [e.message, e.cause?.code, e.cause?.message].filter((s) => s !== undefined).join(': ');
}

/**
 * Seeded sessions made ahead of need, in the background: replacing a session
 * that a fuzzed request closed (a refused resume ends the session, DESIGN
 * section 7) is the slowest step of the suite.
 */
export class SeedPool {
  readonly #seed: () => Promise<SeededSession>;
  readonly #reserve: Promise<SeededSession>[] = [];
  readonly #depth: number;
  readonly #all: SeededSession[] = [];

  constructor(seed: () => Promise<SeededSession>, depth: number) {
    this.#seed = seed;
    this.#depth = depth;
    for (let i = 0; i < depth; i += 1) this.#reserve.push(this.#start());
  }

  /** Every session this pool seeded, alive or not. */
  get all(): readonly SeededSession[] {
    return this.#all;
  }

  /** A fresh seeded session; starts seeding its replacement. */
  take(): Promise<SeededSession> {
    const next = this.#reserve.shift() ?? this.#start();
    while (this.#reserve.length < this.#depth) this.#reserve.push(this.#start());
    return next;
  }

  /** Waits for the seeds in flight (so nothing runs after the suite). */
  async drain(): Promise<void> {
    await Promise.allSettled(this.#reserve);
  }

  #start(): Promise<SeededSession> {
    const p = this.#seed().then((s) => {
      this.#all.push(s);
      return s;
    });
    // Whoever takes it sees the rejection; a seed nobody took must not be an unhandled one.
    p.catch(() => undefined);
    return p;
  }
}
