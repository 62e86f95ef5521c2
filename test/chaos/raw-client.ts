/**
 * A hand-driven MCP client on raw fetch and the SSE parser: it calls the
 * streaming tools, cuts its own connections at random points, and resumes
 * with `Last-Event-ID` (usually its last id, sometimes an older one),
 * recording exactly what the wire delivered. It never judges what it gets;
 * the checker does.
 */
import { MIN_DELAY_MS, PROTOCOL_VERSION, SLOW_FACTOR, progressArgs, routeShape, statelessCallBody, statelessCallHeaders, takeSlow } from './client-context.js';
import type { ClientContext, RouteName, RouteShape } from './client-context.js';
import { PATIENCE_ERROR, SseRecorder, answered, recordJsonBody } from './record.js';
import type { CallOutcome, DeliveredEvent, Exchange } from './record.js';
import { digest, meaningOf, sleep, untilAborted } from './util.js';
import type { Rng } from '../shared/random.js';
import type { Meaning } from './util.js';

interface Sent {
  readonly exchange: Exchange;
  readonly res: Response | undefined;
  readonly abort: AbortController;
}

type ReadEnd = 'closed' | 'cut' | 'broken' | 'stopped' | 'patience';

interface StreamState {
  lastId: string | undefined;
  readonly ids: string[];
  response: (Meaning & { t: 'response' }) | undefined;
}

const STANDALONE_CHANCE = 0.12;
/** Bounds one request and its body, whatever happens to the stack. */
const REQUEST_TIMEOUT_MS = 60_000;

export class RawClient {
  readonly name: string;
  readonly route: RouteName;
  readonly #ctx: ClientContext;
  readonly #rng: Rng;
  #session: string | undefined;
  #nextId = 1;

  constructor(ctx: ClientContext, name: string, route: RouteName, rng: Rng) {
    this.#ctx = ctx;
    this.name = name;
    this.route = route;
    this.#rng = rng;
  }

  get #shape(): RouteShape {
    return routeShape(this.#ctx.target, this.route);
  }

  get #url(): string {
    return `${this.#ctx.baseUrl}${this.#shape.path}`;
  }

  /** Calls tools until the run's stop time; in-flight calls finish (or give up) after it. */
  async run(): Promise<void> {
    let failures = 0;
    while (Date.now() < this.#ctx.stopAt && !this.#ctx.hardStop.aborted) {
      if (!(await this.#ensureSession())) {
        failures += 1;
        await sleep(Math.min(2_000, 100 * 1.5 ** failures), this.#ctx.hardStop);
        continue;
      }
      failures = 0;
      const stateless = this.#shape.statelessChance;
      if (this.#rng.chance(this.#shape.standalone ? STANDALONE_CHANCE : 0)) await this.#standalone();
      // Drawn only on a route that has them: a run without such a route makes the same draws as before.
      else if (stateless !== undefined && this.#rng.chance(stateless)) await this.#statelessCall(progressArgs(this.#rng, this.#ctx.load));
      else {
        const pace = progressArgs(this.#rng, this.#ctx.load);
        await this.#call(this.#shape.tool.name, pace, this.#shape.tool.args(pace.count, pace.delayMs));
      }
      await sleep(this.#ctx.load.thinkMs, this.#ctx.hardStop);
    }
  }

  async #ensureSession(): Promise<boolean> {
    if (this.#session !== undefined) return true;
    const id = this.#nextId++;
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: this.name, version: '0' } } });
    const init = await this.#send('POST', { body, session: undefined });
    const sessionId = init.exchange.answeredSession;
    if (init.res === undefined || init.res.status !== 200 || sessionId === undefined) return false;
    if (isSse(init.res)) {
      // The initialize answer is a logged stream like any other; read it whole.
      const state: StreamState = { lastId: undefined, ids: [], response: undefined };
      await this.#read(init, { cutAfter: Infinity, cutAtMs: Infinity, slowMs: 0 }, (ev) => track(state, ev, JSON.stringify(id)));
      if (state.response === undefined) return false;
    }
    const ack = await this.#send('POST', { body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }), session: sessionId });
    if (ack.res === undefined || ack.res.status !== 202) return false;
    this.#session = sessionId;
    return true;
  }

  /**
   * One tool call: POST, read its stream with random cuts, resume after each
   * break until the response arrived and the stream closed, or an explicit
   * verdict, or the call's patience ran out. `pace`: the progress events
   * the call asks for and their spacing; `args`: the tool's own arguments
   * for them.
   */
  async #call(tool: string, pace: { count: number; delayMs: number }, args: Record<string, number>, slowAllowed = true): Promise<void> {
    const slow = slowAllowed && takeSlow(this.#ctx, this.name);
    const id = this.#nextId++;
    const rpcId = JSON.stringify(id);
    const body = JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args, _meta: { progressToken: `${this.name}.${id}` } } });
    const sessionId = this.#session;
    const startedAt = Date.now();
    const deadline = startedAt + this.#ctx.load.callTimeoutMs * (slow ? 3 : 1);
    const slowMs = slow ? SLOW_FACTOR * Math.max(MIN_DELAY_MS, pace.delayMs) : 0;
    let postExchange: number | undefined;
    const outcome = (o: Pick<CallOutcome, 'outcome'> & Partial<CallOutcome>): void =>
      this.#ctx.recorder.call({ client: this.name, clientKind: 'raw', tool, count: pace.count, args, rpcId, sessionId, slow, at: Date.now(), postExchange, ...o });

    const first = await this.#send('POST', { body, session: sessionId, slow });
    postExchange = first.exchange.n;
    if (first.res === undefined) return outcome({ outcome: 'transport', detail: first.exchange.error });
    // 404: the session is gone. 400 too: server-everything answers an id it
    // does not know (after its restart) with 400, never 404, and so does the
    // gateway in front of it; an application starts over either way.
    if (first.res.status === 404 || first.res.status === 400) this.#session = undefined;
    if (!isSse(first.res)) return outcome({ outcome: 'http', code: first.res.status, detail: first.exchange.bodyError?.message });

    const state: StreamState = { lastId: undefined, ids: [], response: undefined };
    let end = await this.#read(first, this.#plan(slowMs), (ev) => track(state, ev, rpcId), deadline);
    let failures = 0;
    for (;;) {
      if (state.response !== undefined && end === 'closed') break;
      if (this.#ctx.hardStop.aborted) return outcome({ outcome: 'unfinished' });
      if (state.lastId === undefined) return outcome({ outcome: 'lost_before_id', detail: end });
      if (Date.now() > deadline || end === 'patience') return outcome({ outcome: 'gave_up', detail: `last ${state.lastId}${end === 'patience' ? ', the response sent nothing more' : ''}` });
      const older = state.ids.length > 2 && this.#rng.chance(this.#ctx.load.olderCursorChance);
      const cursor = older ? state.ids[this.#rng.int(Math.max(0, state.ids.length - 20), state.ids.length - 2)]! : state.lastId;
      const resumed = await this.#send('GET', { cursor, session: sessionId, slow });
      const status = resumed.res?.status;
      if (resumed.res === undefined || status === undefined || status >= 500 || status === 429 || status === 409) {
        failures += 1;
        end = 'broken';
        await sleep(Math.min(1_000, 50 * 1.5 ** failures), this.#ctx.hardStop);
        continue;
      }
      failures = 0;
      if (status === 204) {
        if (state.response !== undefined) break;
        return outcome({ outcome: 'ended_without_response', detail: `204 at ${cursor}` });
      }
      if (status !== 200 || !isSse(resumed.res)) {
        const verdict = resumed.exchange.verdict ?? resumed.exchange.bodyError?.verdict;
        // Every refusal but `malformed` ended the session on the server.
        if (verdict !== 'malformed') this.#session = undefined;
        return outcome({ outcome: 'refused', code: status, verdict, detail: resumed.exchange.bodyError?.message });
      }
      end = await this.#read(resumed, this.#plan(slowMs), (ev) => track(state, ev, rpcId), deadline);
    }
    const response = state.response!;
    if (response.ok) return outcome({ outcome: 'result', text: response.text });
    if (response.toolError === true) return outcome({ outcome: 'tool_error', text: response.text });
    return outcome({ outcome: 'rpc_error', code: response.code, verdict: response.tether });
  }

  /**
   * A 2026-07-28 call: no session (the gateways pass it through, nothing
   * logged), its version, client and progress token in `_meta`, its method
   * and tool in the routing headers. Read whole: a stream of this era has
   * no cursor to resume from, so a break is the call's end, which the
   * client knows (`transport`).
   */
  async #statelessCall(pace: { count: number; delayMs: number }): Promise<void> {
    const tool = this.#shape.tool;
    const args = tool.args(pace.count, pace.delayMs);
    const id = this.#nextId++;
    const rpcId = JSON.stringify(id);
    const body = statelessCallBody(this.name, id, tool.name, args);
    const sent = await this.#send('POST', { body, session: undefined, stateless: tool.name });
    const outcome = (o: Pick<CallOutcome, 'outcome'> & Partial<CallOutcome>): void =>
      this.#ctx.recorder.call({ client: this.name, clientKind: 'raw', tool: tool.name, count: pace.count, args, rpcId, sessionId: undefined, slow: false, stateless: true, at: Date.now(), postExchange: sent.exchange.n, ...o });
    if (sent.res === undefined) return outcome({ outcome: 'transport', detail: sent.exchange.error });
    let response: (Meaning & { t: 'response' }) | undefined;
    if (isSse(sent.res)) {
      const state: StreamState = { lastId: undefined, ids: [], response: undefined };
      const end = await this.#read(sent, { cutAfter: Number.POSITIVE_INFINITY, cutAtMs: Number.POSITIVE_INFINITY, slowMs: 0 }, (ev) => track(state, ev, rpcId), Date.now() + this.#ctx.load.callTimeoutMs);
      response = state.response;
      if (response === undefined) return outcome(this.#ctx.hardStop.aborted ? { outcome: 'unfinished' } : end === 'patience' ? { outcome: 'gave_up', detail: end } : { outcome: 'transport', detail: `the response ${end} before its answer` });
    } else if (sent.res.status !== 200) {
      return outcome({ outcome: 'http', code: sent.res.status, detail: sent.exchange.bodyError?.message });
    } else {
      response = sent.exchange.events.map((e) => e.meaning).find((m): m is Meaning & { t: 'response' } => m.t === 'response' && m.id === rpcId);
      if (response === undefined) return outcome({ outcome: 'transport', detail: 'a JSON answer without its response' });
    }
    if (response.ok) return outcome({ outcome: 'result', text: response.text });
    if (response.toolError === true) return outcome({ outcome: 'tool_error', text: response.text });
    return outcome({ outcome: 'rpc_error', code: response.code, verdict: response.tether });
  }

  /**
   * The standalone GET stream (`0`): open it, ask the upstream for logging
   * messages on it, and read them with the same random cuts and resumes.
   */
  async #standalone(): Promise<void> {
    const count = this.#rng.int(10, 40);
    const sessionId = this.#session;
    const opened = await this.#send('GET', { session: sessionId });
    if (opened.res === undefined || !isSse(opened.res)) {
      if (opened.res?.status === 404) this.#session = undefined;
      return;
    }
    const seen = new Set<number>();
    let stopAt = Number.POSITIVE_INFINITY;
    const stopWhen = (): boolean => seen.size >= count || Date.now() > stopAt || this.#ctx.hardStop.aborted;
    const state: StreamState = { lastId: undefined, ids: [], response: undefined };
    const onEvent = (ev: DeliveredEvent): boolean => {
      track(state, ev, undefined);
      if (ev.meaning.t === 'log') seen.add(ev.meaning.seq);
      return stopWhen();
    };
    // The read open now: ended by a timer once the client is done waiting, if no event comes to end it.
    let current: Sent = opened;
    const reading = (async () => {
      let end = await this.#read(opened, this.#plan(0), onEvent);
      let failures = 0;
      while (!stopWhen() && end !== 'stopped') {
        if (state.lastId === undefined) return;
        const resumed = await this.#send('GET', { cursor: state.lastId, session: sessionId });
        const status = resumed.res?.status;
        if (resumed.res === undefined || status === undefined || status >= 500 || status === 429) {
          failures += 1;
          await sleep(Math.min(1_000, 50 * 1.5 ** failures), this.#ctx.hardStop);
          continue;
        }
        failures = 0;
        if (status !== 200 || !isSse(resumed.res)) {
          if (status === 404) this.#session = undefined;
          return;
        }
        current = resumed;
        end = await this.#read(resumed, this.#plan(0), onEvent);
      }
    })();
    await this.#call('notify_standalone', { count, delayMs: 3 }, { count, delayMs: 3 }, false);
    // Messages may still be on their way through the log.
    stopAt = Date.now() + 2_000;
    // The stop is checked on each event; a stream that sends none is closed here (it used to wait for the hard stop).
    const timer = setTimeout(() => current.abort.abort(), 2_100);
    await reading;
    clearTimeout(timer);
  }

  #plan(slowMs: number): { cutAfter: number; cutAtMs: number; slowMs: number } {
    const load = this.#ctx.load;
    const cut = this.#rng.chance(slowMs > 0 ? load.cutChance / 4 : load.cutChance);
    return {
      cutAfter: cut ? this.#rng.int(1, 12) : Number.POSITIVE_INFINITY,
      // Some cuts happen at a random time instead, wherever the stream is.
      cutAtMs: cut && this.#rng.chance(0.25) ? this.#rng.int(5, 400) : Number.POSITIVE_INFINITY,
      slowMs,
    };
  }

  /** `stateless`: a 2026-07-28 `tools/call` of that tool (its version and routing headers, no session). */
  async #send(method: 'GET' | 'POST', opts: { body?: string; session: string | undefined; cursor?: string; slow?: boolean; stateless?: string }): Promise<Sent> {
    const abort = new AbortController();
    const headers: Record<string, string> = {
      accept: method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
      ...(opts.stateless === undefined ? { 'mcp-protocol-version': PROTOCOL_VERSION } : statelessCallHeaders(opts.stateless)),
    };
    if (opts.body !== undefined) headers['content-type'] = 'application/json';
    if (opts.session !== undefined) headers['mcp-session-id'] = opts.session;
    if (opts.cursor !== undefined) headers['last-event-id'] = opts.cursor;
    const exchange = this.#ctx.recorder.begin({
      client: this.name,
      clientKind: 'raw',
      method,
      path: this.#shape.path,
      sessionId: opts.session,
      cursor: opts.cursor,
      body: opts.body,
      slow: opts.slow ?? false,
    });
    let res: Response;
    try {
      const signal = AbortSignal.any([abort.signal, this.#ctx.hardStop, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]);
      res = await fetch(this.#url, { method, headers, signal, ...(opts.body === undefined ? {} : { body: opts.body }) });
    } catch (err) {
      exchange.error = errorText(err);
      exchange.endedAt = Date.now();
      return { exchange, res: undefined, abort };
    }
    answered(exchange, res);
    if (!isSse(res)) {
      try {
        const text = await res.text();
        recordJsonBody(exchange, text);
        // A 2026-07-28 call answered in JSON: its one message is what it delivered.
        if (opts.stateless !== undefined && res.status === 200) exchange.events.push({ id: undefined, hasData: true, digest: digest(text), meaning: meaningOf(text) });
      } catch (err) {
        exchange.error = errorText(err);
      }
      exchange.endedAt = Date.now();
    }
    return { exchange, res, abort };
  }

  /** Reads an SSE answer, cutting it per `plan`; `onEvent` returning true stops reading (the client is done). */
  /** `deadline`: the call's patience; a response still open then is abandoned (`patience`), as an SDK client's request timeout would. */
  async #read(sent: Sent, plan: { cutAfter: number; cutAtMs: number; slowMs: number }, onEvent: (ev: DeliveredEvent) => boolean | void, deadline = Number.POSITIVE_INFINITY): Promise<ReadEnd> {
    const { exchange, res, abort } = sent;
    if (res?.body === null || res === undefined) return 'broken';
    const recorder = new SseRecorder(exchange);
    let cut = false;
    let stopped = false;
    let outOfPatience = false;
    const patience = Number.isFinite(deadline)
      ? setTimeout(() => {
          outOfPatience = true;
          abort.abort();
        }, Math.max(0, deadline - Date.now()))
      : undefined;
    // A cut at a random time, counted from the first event: before it the client has no cursor.
    let timer: NodeJS.Timeout | undefined;
    const armTimer = (): void => {
      if (timer !== undefined || !Number.isFinite(plan.cutAtMs)) return;
      timer = setTimeout(() => {
        cut = true;
        abort.abort();
      }, plan.cutAtMs);
    };
    let n = 0;
    try {
      // Not only fetch's signal: undici can lose it once the Request is
      // garbage-collected (nodejs/node#55428), and a slow read then waited
      // forever past the run's hard stop (a 900 s run hung that way).
      for await (const chunk of untilAborted(res.body as unknown as AsyncIterable<Uint8Array>, [abort.signal, this.#ctx.hardStop])) {
        for (const event of recorder.push(chunk)) {
          n += 1;
          armTimer();
          if (onEvent(event) === true) stopped = true;
          if (plan.slowMs > 0) await sleep(plan.slowMs, this.#ctx.hardStop);
        }
        if (stopped || n >= plan.cutAfter) {
          cut = !stopped;
          abort.abort();
          break;
        }
      }
      if (stopped) {
        exchange.end = 'closed';
        return 'stopped';
      }
      if (cut) {
        exchange.end = 'cut';
        this.#ctx.recorder.fault('client_abort');
        return 'cut';
      }
      exchange.end = 'closed';
      return 'closed';
    } catch (err) {
      if (outOfPatience && !cut) {
        exchange.end = 'broken';
        exchange.error = PATIENCE_ERROR;
        return 'patience';
      }
      if (cut) {
        exchange.end = 'cut';
        this.#ctx.recorder.fault('client_abort');
        return 'cut';
      }
      exchange.end = 'broken';
      exchange.error = errorText(err);
      return this.#ctx.hardStop.aborted ? 'stopped' : 'broken';
    } finally {
      clearTimeout(timer);
      clearTimeout(patience);
      exchange.endedAt = Date.now();
    }
  }
}

function track(state: StreamState, ev: DeliveredEvent, rpcId: string | undefined): void {
  if (ev.id !== undefined) {
    state.lastId = ev.id;
    state.ids.push(ev.id);
  }
  if (rpcId !== undefined && ev.meaning.t === 'response' && ev.meaning.id === rpcId) state.response = ev.meaning;
}

function isSse(res: Response): boolean {
  return res.status === 200 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream');
}

function errorText(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  return `${e.name ?? 'Error'}: ${e.message ?? String(err)}${e.cause?.code === undefined ? '' : ` (${e.cause.code})`}`.slice(0, 200);
}
