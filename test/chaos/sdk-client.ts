/**
 * An official MCP SDK client behind the resume guard, the way an application
 * would run it: the SDK reconnects by itself, the guard checks every resume
 * and re-initializes lost sessions. Under the guard sits a tap that records
 * the wire (what the gateway really sent) and breaks streams on purpose.
 *
 *   Client ─▶ StreamableHTTPClientTransport ─fetch─▶ guard ─fetch─▶ tap (record, cut, slow) ─▶ balancer
 */
import { CallToolResultSchema, LoggingMessageNotificationSchema, McpError } from '@modelcontextprotocol/sdk/types.js';
import { createResumeGuard } from '@tether/resume-guard';
import { connectSdkClient } from '@tether/testing';
import type { SdkClient } from '@tether/testing';
import { MIN_DELAY_MS, SLOW_FACTOR, progressArgs, routeShape, takeSlow } from './client-context.js';
import type { ClientContext, RouteName } from './client-context.js';
import { SseRecorder, answered, recordJsonBody } from './record.js';
import type { CallOutcome, Exchange } from './record.js';
import { sleep } from './util.js';
import type { Rng } from '../shared/random.js';

const STANDALONE_CHANCE = 0.1;
const FIRST_PRIMING_CUTS = 3;

export class SdkClientRunner {
  readonly name: string;
  readonly route: RouteName;
  readonly #ctx: ClientContext;
  readonly #rng: Rng;
  #sdk: SdkClient | undefined;
  /** Per-event delay of the tap while a slow call runs. */
  #slowMs = 0;
  /** Resumes cut right after their priming event so far. */
  #primingCuts = 0;

  constructor(ctx: ClientContext, name: string, route: RouteName, rng: Rng) {
    this.#ctx = ctx;
    this.name = name;
    this.route = route;
    this.#rng = rng;
  }

  async run(): Promise<void> {
    let failures = 0;
    try {
      while (Date.now() < this.#ctx.stopAt && !this.#ctx.hardStop.aborted) {
        if (this.#sdk === undefined && !(await this.#connect())) {
          failures += 1;
          await sleep(Math.min(2_000, 100 * 1.5 ** failures), this.#ctx.hardStop);
          continue;
        }
        failures = 0;
        const ok = await this.#call();
        if (!ok) await this.#disconnect();
        await sleep(this.#ctx.load.thinkMs, this.#ctx.hardStop);
      }
    } finally {
      await this.#disconnect();
    }
  }

  async #connect(): Promise<boolean> {
    const guard = createResumeGuard({
      fetch: this.#tapFetch,
      onViolation: (err) =>
        this.#ctx.recorder.violations.push({
          client: this.name,
          code: err.code,
          verdict: err.verdict,
          lastEventId: err.lastEventId,
          eventId: err.eventId,
          expectedEventId: err.expectedEventId,
          message: err.message.slice(0, 300),
          at: Date.now(),
        }),
    });
    try {
      this.#sdk = await connectSdkClient(`${this.#ctx.baseUrl}${routeShape(this.#ctx.target, this.route).path}`, {
        fetch: guard.fetch as typeof fetch,
        // Patient: a NATS leader election or a gateway restart can take seconds.
        reconnection: { initialReconnectionDelay: 100, maxReconnectionDelay: 1_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 100 },
      });
      this.#sdk.client.setNotificationHandler(LoggingMessageNotificationSchema, () => undefined);
      return true;
    } catch {
      return false;
    }
  }

  async #disconnect(): Promise<void> {
    const sdk = this.#sdk;
    this.#sdk = undefined;
    await sdk?.close().catch(() => undefined);
  }

  /** One tool call; false when the client should start over with a fresh session. */
  async #call(): Promise<boolean> {
    const sdk = this.#sdk!;
    const shape = routeShape(this.#ctx.target, this.route);
    const standalone = this.#rng.chance(shape.standalone ? STANDALONE_CHANCE : 0);
    const tool = standalone ? 'notify_standalone' : shape.tool.name;
    const pace = standalone ? { count: this.#rng.int(5, 30), delayMs: 3 } : progressArgs(this.#rng, this.#ctx.load);
    const args = standalone ? pace : shape.tool.args(pace.count, pace.delayMs);
    const slow = !standalone && takeSlow(this.#ctx, this.name);
    this.#slowMs = slow ? SLOW_FACTOR * Math.max(MIN_DELAY_MS, pace.delayMs) : 0;
    const progress: number[] = [];
    const sessionId = sdk.transport.sessionId;
    const base = { client: this.name, clientKind: 'sdk' as const, tool, count: pace.count, args, sessionId, slow };
    // The SDK numbers requests itself; the tap learns the id from the POST body.
    const rpcIdBox: { id: string; exchange?: number } = { id: '' };
    this.#pendingCall = rpcIdBox;
    try {
      const result = await sdk.client.callTool({ name: tool, arguments: args }, CallToolResultSchema, {
        timeout: this.#ctx.load.callTimeoutMs * (slow ? 3 : 1),
        resetTimeoutOnProgress: true,
        onprogress: (p) => progress.push(p.progress),
        signal: this.#ctx.hardStop,
      });
      const first = (result.content as Array<{ type?: string; text?: string }> | undefined)?.[0];
      const outcome = result.isError === true ? 'tool_error' : 'result';
      this.#ctx.recorder.call({ ...base, rpcId: rpcIdBox.id, postExchange: rpcIdBox.exchange, outcome, text: first?.type === 'text' ? first.text : undefined, progress, at: Date.now() });
      return true;
    } catch (err) {
      const outcome = classifyError(err, this.#ctx.hardStop.aborted);
      this.#ctx.recorder.call({ ...base, rpcId: rpcIdBox.id, postExchange: rpcIdBox.exchange, ...outcome, progress, at: Date.now() });
      // A guard that could not open a replacement session, or an answer the
      // SDK cannot recover from by itself: start over with a fresh client.
      return !(outcome.outcome === 'http' || outcome.outcome === 'transport' || outcome.outcome === 'unfinished' || outcome.outcome === 'gave_up');
    } finally {
      this.#slowMs = 0;
      this.#pendingCall = undefined;
    }
  }

  #pendingCall: { id: string; exchange?: number } | undefined;

  /** The tap: records every exchange at the wire, and breaks or slows SSE bodies on purpose. */
  readonly #tapFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    // A closed SDK transport keeps firing reconnection timers whose requests are
    // aborted before they leave (SDK 1.32.2): not requests, so not recorded.
    if (init?.signal?.aborted === true) return fetch(input, init);
    const isRequest = input instanceof Request;
    const method = (init?.method ?? (isRequest ? input.method : 'GET')).toUpperCase();
    const headers = new Headers(isRequest ? input.headers : undefined);
    if (init?.headers !== undefined) for (const [k, v] of new Headers(init.headers)) headers.set(k, v);
    const body = typeof init?.body === 'string' ? init.body : undefined;
    const exchange = this.#ctx.recorder.begin({
      client: this.name,
      clientKind: 'sdk',
      method,
      path: routeShape(this.#ctx.target, this.route).path,
      sessionId: headers.get('mcp-session-id') ?? undefined,
      cursor: method === 'GET' ? (headers.get('last-event-id') ?? undefined) : undefined,
      body,
      slow: this.#slowMs > 0,
    });
    if (exchange.rpc?.method === 'tools/call' && exchange.rpc.id !== undefined && this.#pendingCall !== undefined) {
      this.#pendingCall.id = exchange.rpc.id;
      this.#pendingCall.exchange = exchange.n;
    }
    let res: Response;
    try {
      res = await fetch(input, init);
    } catch (err) {
      exchange.error = String((err as Error).message ?? err).slice(0, 200);
      exchange.endedAt = Date.now();
      throw err;
    }
    answered(exchange, res);
    const sse = res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
    if (!sse || res.body === null) {
      const text = await res.text().catch(() => '');
      recordJsonBody(exchange, text);
      exchange.endedAt = Date.now();
      return new Response(res.status === 204 || res.status === 202 ? null : text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    // The first resumes of POST streams of each client (and a few more at random)
    // break right after their first event, the priming event that echoes the
    // cursor: the client must still hold its cursor afterwards.
    const postResume = exchange.cursor !== undefined && !exchange.cursor.includes('-0-');
    if (postResume && (this.#primingCuts < FIRST_PRIMING_CUTS || this.#rng.chance(0.05))) {
      this.#primingCuts += 1;
      return new Response(this.#tapBody(res.body, exchange, 1, 0, 'cut_after_priming'), { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    const cuttable = exchange.rpc?.method !== 'initialize' && this.#rng.chance(this.#ctx.load.cutChance * (this.#slowMs > 0 ? 0.25 : 0.6));
    const cutAfter = cuttable ? this.#rng.int(1, 15) : Number.POSITIVE_INFINITY;
    return new Response(this.#tapBody(res.body, exchange, cutAfter, this.#slowMs, 'client_abort'), { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  /**
   * Passes the body through chunk by chunk, recording its events. After
   * `cutAfter` events it errors the body (the SDK sees a network failure and
   * resumes with its last id) and cancels the real one, which closes the socket.
   */
  #tapBody(source: ReadableStream<Uint8Array>, exchange: Exchange, cutAfter: number, slowMs: number, cutKind: string): ReadableStream<Uint8Array> {
    const reader = source.getReader();
    const recorder = new SseRecorder(exchange);
    let seen = 0;
    const ctx = this.#ctx;
    return new ReadableStream<Uint8Array>(
      {
        async pull(controller) {
          if (seen >= cutAfter) {
            exchange.end = 'cut';
            exchange.endedAt = Date.now();
            ctx.recorder.fault(cutKind);
            controller.error(new Error(`cut by the chaos client after ${seen} events`));
            await reader.cancel('cut').catch(() => undefined);
            return;
          }
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (err) {
            if (exchange.end === 'open') exchange.end = 'broken';
            exchange.error = String((err as Error).message ?? err).slice(0, 200);
            exchange.endedAt = Date.now();
            controller.error(err);
            return;
          }
          if (chunk.done) {
            if (exchange.end === 'open') exchange.end = 'closed';
            exchange.endedAt = Date.now();
            controller.close();
            return;
          }
          const events = recorder.push(chunk.value);
          seen += events.length;
          if (slowMs > 0 && events.length > 0) await sleep(slowMs * events.length, ctx.hardStop);
          controller.enqueue(chunk.value);
        },
        cancel(reason) {
          if (exchange.end === 'open') exchange.end = 'closed';
          exchange.endedAt = Date.now();
          return reader.cancel(reason);
        },
      },
      { highWaterMark: 0 },
    );
  }
}

/** What a failed callTool means, in the checker's terms. */
function classifyError(err: unknown, stopping: boolean): Pick<CallOutcome, 'outcome' | 'code' | 'verdict' | 'detail'> {
  const message = String((err as Error)?.message ?? err).slice(0, 300);
  if (err instanceof McpError) {
    const data = err.data as { tether?: unknown; code?: unknown; verdict?: unknown; timeout?: unknown } | undefined;
    if (err.code === -32050) {
      // The guard failed the call: an explicit refusal it passed on, or a violation it caught.
      return { outcome: 'guard', code: err.code, verdict: typeof data?.verdict === 'string' ? data.verdict : undefined, detail: `${String(data?.code)}: ${message}` };
    }
    if (typeof data?.tether === 'string') return { outcome: 'rpc_error', code: err.code, verdict: data.tether, detail: message };
    // The SDK's own request timeout (-32001 too, but with `data.timeout`): the client gave up waiting.
    if (data?.timeout !== undefined) return { outcome: stopping ? 'unfinished' : 'gave_up', code: err.code, detail: message };
    if (stopping) return { outcome: 'unfinished', code: err.code, detail: message };
    return { outcome: 'rpc_error', code: err.code, detail: message };
  }
  if (stopping) return { outcome: 'unfinished', detail: message };
  const status = (err as { code?: unknown }).code;
  if (typeof status === 'number' && status >= 400) return { outcome: 'http', code: status, detail: message };
  return { outcome: 'transport', detail: message };
}
