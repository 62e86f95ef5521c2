/**
 * What the clients saw, recorded at the wire: every HTTP exchange with the
 * balancer (request facts, status, `Tether-Resume`, and each SSE event's id
 * and payload digest), and every tool call's outcome as the client
 * application saw it. The checker works only from these records and the log.
 */
import { SseParser, isResumeAck, parseResumeAck } from '@tether/protocol';
import type { DecodeResult, ResumeAck, SseMessage } from '@tether/protocol';
import { numericArgs } from './tools.js';
import type { NumericArgs } from './tools.js';
import { digest, meaningOf } from './util.js';
import type { Meaning } from './util.js';

export type ClientKind = 'raw' | 'sdk';

/** The error of a read that the client's own patience ended (the checker looks for it). */
export const PATIENCE_ERROR = 'the client gave up: its patience ran out';

/** One SSE event as delivered to a client. */
export interface DeliveredEvent {
  readonly id: string | undefined;
  readonly hasData: boolean;
  readonly digest: string;
  readonly meaning: Meaning;
  /** On a resume acknowledgment (`event: resume`): its data, parsed. */
  readonly ack?: DecodeResult<ResumeAck>;
}

/** Facts of a POST body. */
export interface RpcFacts {
  readonly method: string | undefined;
  /** JSON-encoded request id, when it is a request. */
  readonly id: string | undefined;
  readonly tool: string | undefined;
  readonly count: number | undefined;
  /** The call's numeric arguments (what the checker's tool descriptions read; no other part of the body is kept). */
  readonly args?: NumericArgs | undefined;
  readonly token: string | undefined;
}

/** How a response body ended, as far as the client knows. */
export type BodyEnd = 'open' | 'closed' | 'cut' | 'broken' | 'none';

/** One request through the balancer and what came back. */
export interface Exchange {
  readonly n: number;
  readonly client: string;
  readonly clientKind: ClientKind;
  readonly method: string;
  readonly path: string;
  readonly sessionId: string | undefined;
  readonly cursor: string | undefined;
  readonly rpc: RpcFacts | undefined;
  readonly startedAt: number;
  endedAt: number | undefined;
  status: number | undefined;
  /** `Mcp-Session-Id` of the answer. */
  answeredSession: string | undefined;
  /** `Tether-Resume` of the answer. */
  verdict: string | undefined;
  contentType: string | undefined;
  /** JSON-RPC error of a JSON answer (refusals carry the verdict in `data`). */
  bodyError: { readonly code: number | undefined; readonly verdict: string | undefined; readonly message: string } | undefined;
  events: DeliveredEvent[];
  end: BodyEnd;
  /** Why the request or body failed (fetch error message), if it did. */
  error: string | undefined;
  /** Consumed at 1/20 of the producer's rate. */
  slow: boolean;
  /** When its last event arrived (ms since epoch). */
  lastEventAt?: number | undefined;
}

/** A tool call's outcome as the client application saw it. */
export interface CallOutcome {
  readonly client: string;
  readonly clientKind: ClientKind;
  readonly tool: string;
  /** The progress events the call asked for. */
  readonly count: number;
  /** The tool's arguments (numbers), as sent. */
  readonly args?: NumericArgs | undefined;
  /** JSON-encoded request id. */
  readonly rpcId: string;
  readonly sessionId: string | undefined;
  /**
   * `result`: answered; `tool_error`: answered with an `isError` result (the tool failed, explicitly);
   * `rpc_error`: a JSON-RPC error (code, `tether` reason);
   * `refused`: a resume got an explicit verdict; `guard`: the resume guard
   * failed the call (its violation code and verdict); `http`: a non-2xx answer
   * before any stream; `transport`: the request never got an answer;
   * `lost_before_id`: the stream broke before its first id; `gave_up`: resumes
   * kept failing until the client's patience ran out; `unfinished`: the run ended first.
   */
  readonly outcome: 'result' | 'tool_error' | 'rpc_error' | 'refused' | 'guard' | 'http' | 'transport' | 'lost_before_id' | 'gave_up' | 'ended_without_response' | 'unfinished';
  readonly code?: number | undefined;
  readonly verdict?: string | undefined;
  readonly detail?: string | undefined;
  /** Result text (`done <count>`). */
  readonly text?: string | undefined;
  /** A 2026-07-28 call (no session, passed through, not logged): judged by what its one response delivered. */
  readonly stateless?: true;
  /** Progress values the application received, in order (SDK clients). */
  readonly progress?: readonly number[];
  readonly slow: boolean;
  readonly at: number;
  /** The exchange number of the call's (last) POST: links the call to its stream. */
  readonly postExchange?: number | undefined;
}

/** A resume-guard violation, as reported to `onViolation`. */
export interface GuardViolation {
  readonly client: string;
  readonly code: string;
  readonly verdict: string | undefined;
  readonly lastEventId: string | undefined;
  readonly eventId: string | undefined;
  readonly expectedEventId: string | undefined;
  readonly message: string;
  readonly at: number;
}

/** Everything every client saw. */
export class Recorder {
  readonly exchanges: Exchange[] = [];
  readonly calls: CallOutcome[] = [];
  readonly violations: GuardViolation[] = [];
  /** Fault counters the clients bump themselves (per-client aborts, slow streams). */
  readonly clientFaults: Record<string, number> = {};
  #n = 0;

  begin(init: { client: string; clientKind: ClientKind; method: string; path: string; sessionId: string | undefined; cursor: string | undefined; body: string | undefined; slow?: boolean }): Exchange {
    const exchange: Exchange = {
      n: ++this.#n,
      client: init.client,
      clientKind: init.clientKind,
      method: init.method,
      path: init.path,
      sessionId: init.sessionId,
      cursor: init.cursor,
      rpc: init.body === undefined ? undefined : rpcFacts(init.body),
      startedAt: Date.now(),
      endedAt: undefined,
      status: undefined,
      answeredSession: undefined,
      verdict: undefined,
      contentType: undefined,
      bodyError: undefined,
      events: [],
      end: 'none',
      error: undefined,
      slow: init.slow ?? false,
    };
    this.exchanges.push(exchange);
    return exchange;
  }

  call(outcome: CallOutcome): void {
    this.calls.push(outcome);
  }

  fault(kind: string): void {
    this.clientFaults[kind] = (this.clientFaults[kind] ?? 0) + 1;
  }
}

/** Fills the response facts of an exchange (status and headers). */
export function answered(exchange: Exchange, res: Response): void {
  exchange.status = res.status;
  exchange.answeredSession = res.headers.get('mcp-session-id') ?? undefined;
  exchange.verdict = res.headers.get('tether-resume') ?? undefined;
  exchange.contentType = res.headers.get('content-type') ?? undefined;
}

/** Records a JSON error body's code and verdict. */
export function recordJsonBody(exchange: Exchange, text: string): void {
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; data?: { verdict?: unknown } } };
    if (body.error === undefined) return;
    exchange.bodyError = {
      code: typeof body.error.code === 'number' ? body.error.code : undefined,
      verdict: typeof body.error.data?.verdict === 'string' ? body.error.data.verdict : undefined,
      message: String(body.error.message ?? '').slice(0, 200),
    };
  } catch {
    // Not JSON: nothing to record.
  }
}

/** Turns parsed SSE messages into delivered events; blocks with neither id nor data (a bare `retry:`) carry nothing. */
export function toDelivered(msg: SseMessage): DeliveredEvent | undefined {
  if (msg.id === undefined && !msg.hasData) return undefined;
  const event = { id: msg.id, hasData: msg.hasData, digest: digest(msg.data), meaning: meaningOf(msg.data) };
  return isResumeAck(msg) ? { ...event, ack: parseResumeAck(msg.data) } : event;
}

/** An incremental SSE recorder for one response body. */
export class SseRecorder {
  readonly #parser = new SseParser();
  readonly #exchange: Exchange;

  constructor(exchange: Exchange) {
    this.#exchange = exchange;
    exchange.end = 'open';
  }

  /** Parses a chunk and records the complete events in it; returns them. */
  push(chunk: Uint8Array): DeliveredEvent[] {
    const out: DeliveredEvent[] = [];
    for (const msg of this.#parser.push(chunk)) {
      const event = toDelivered(msg);
      if (event === undefined) continue;
      this.#exchange.events.push(event);
      this.#exchange.lastEventAt = Date.now();
      out.push(event);
    }
    return out;
  }
}

function rpcFacts(body: string): RpcFacts | undefined {
  try {
    const m = JSON.parse(body) as { method?: unknown; id?: unknown; params?: { name?: unknown; arguments?: { count?: unknown }; _meta?: { progressToken?: unknown } } };
    if (typeof m !== 'object' || m === null || Array.isArray(m)) return undefined;
    const args = numericArgs(m.params?.arguments);
    return {
      method: typeof m.method === 'string' ? m.method : undefined,
      id: m.id === undefined ? undefined : JSON.stringify(m.id),
      tool: typeof m.params?.name === 'string' ? m.params.name : undefined,
      count: typeof m.params?.arguments?.count === 'number' ? m.params.arguments.count : undefined,
      ...(args === undefined ? {} : { args }),
      token: m.params?._meta?.progressToken === undefined ? undefined : String(m.params._meta.progressToken),
    };
  } catch {
    return undefined;
  }
}
