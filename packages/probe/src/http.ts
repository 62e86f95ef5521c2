import { HttpHeader, SseParser } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import type { FetchLike } from '@tether/resume-guard';
import { ProbeError, ProbeErrorCode } from './errors.js';

/** The protocol version the probe asks for: the first with priming events and `retry` (SEP-1699). */
export const PROBE_PROTOCOL_VERSION = '2025-11-25';

/** How a read of an SSE body ended. */
export type SseEnd = 'stopped' | 'eof' | 'timeout';

/** A response and the controller that cuts its connection. */
export interface Exchange {
  readonly res: Response;
  readonly abort: AbortController;
}

/**
 * A bare MCP Streamable HTTP client on raw fetch: every byte stays visible to
 * the probe, and nothing retries or resumes behind its back (which the SDK
 * client does, by design).
 */
export class McpHttp {
  readonly url: string;
  readonly #headers: Readonly<Record<string, string>>;
  readonly #fetch: FetchLike;
  sessionId: string | undefined;
  protocolVersion: string = PROBE_PROTOCOL_VERSION;

  constructor(url: string, headers: Readonly<Record<string, string>>, fetchFn: FetchLike) {
    this.url = url;
    this.#headers = headers;
    this.#fetch = fetchFn;
  }

  headers(extra: Record<string, string> = {}): Headers {
    const h = new Headers(this.#headers);
    if (this.sessionId !== undefined) {
      h.set(HttpHeader.sessionId, this.sessionId);
      h.set(HttpHeader.protocolVersion, this.protocolVersion);
    }
    for (const [k, v] of Object.entries(extra)) h.set(k, v);
    return h;
  }

  /** POSTs one JSON-RPC message. */
  async post(message: unknown): Promise<Exchange> {
    const abort = new AbortController();
    const headers = this.headers({ 'content-type': 'application/json', accept: 'application/json, text/event-stream' });
    const res = await this.#send(this.url, { method: 'POST', headers, body: JSON.stringify(message), signal: abort.signal });
    return { res, abort };
  }

  /**
   * GETs the event stream of `url` with `Last-Event-ID`. Connection failures
   * are retried for a while: a server that restarts between the cut and the
   * resume is one of the cases the probe exists for.
   */
  async resume(url: string, cursor: string, attempts = 20, delayMs = 100): Promise<Exchange> {
    for (let i = 1; ; i++) {
      const abort = new AbortController();
      const headers = this.headers({ accept: 'text/event-stream', [HttpHeader.lastEventId]: cursor });
      try {
        return { res: await this.#fetch(url, { method: 'GET', headers, signal: abort.signal }), abort };
      } catch (err) {
        if (i >= attempts) throw new ProbeError(ProbeErrorCode.unreachable, `GET ${url} failed: ${describe(err)}`, { cause: err });
        await new Promise((r) => setTimeout(r, delayMs));
      }
    }
  }

  /** Sends a request and reads its answer, JSON or SSE. Returns `result`; throws on a JSON-RPC error. */
  async request(
    id: string,
    method: string,
    params: unknown,
    timeoutMs: number,
  ): Promise<{ result: unknown; via: 'json' | 'sse'; ids: string[]; sessionId: string | null }> {
    const { res, abort } = await this.post({ jsonrpc: '2.0', id, method, params });
    if (!res.ok) {
      await res.body?.cancel();
      throw new ProbeError(ProbeErrorCode.unreachable, `${method} answered HTTP ${res.status}`);
    }
    let answer: RpcAnswer | undefined;
    const ids: string[] = [];
    if (isSse(res)) {
      await readSse(res, abort, timeoutMs, (m) => {
        if (m.id !== undefined && m.id !== '') ids.push(m.id);
        answer = answerTo(id, m.data);
        return answer !== undefined;
      });
    } else {
      answer = answerTo(id, await res.text());
    }
    if (answer === undefined) throw new ProbeError(ProbeErrorCode.unreachable, `${method} got no JSON-RPC answer`);
    if ('error' in answer) throw new ProbeError(ProbeErrorCode.unreachable, `${method} failed: ${JSON.stringify(answer.error)}`);
    return { result: answer.result, via: isSse(res) ? 'sse' : 'json', ids, sessionId: res.headers.get(HttpHeader.sessionId) };
  }

  async notify(method: string): Promise<void> {
    const { res } = await this.post({ jsonrpc: '2.0', method });
    await res.body?.cancel();
  }

  /** Ends the session; best effort. */
  async close(): Promise<void> {
    if (this.sessionId === undefined) return;
    try {
      const res = await this.#fetch(this.url, { method: 'DELETE', headers: this.headers() });
      await res.body?.cancel();
    } catch {
      // The probe's findings do not depend on it.
    }
  }

  async #send(url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.#fetch(url, init);
    } catch (err) {
      throw new ProbeError(ProbeErrorCode.unreachable, `${init.method ?? 'GET'} ${url} failed: ${describe(err)}`, { cause: err });
    }
  }
}

type RpcAnswer = { readonly result: unknown } | { readonly error: unknown };

/** The JSON-RPC answer to request `id` in `data`, if that is what it holds. */
export function answerTo(id: string, data: string): RpcAnswer | undefined {
  try {
    const msg = JSON.parse(data) as { id?: unknown; result?: unknown; error?: unknown };
    if (msg.id !== id) return undefined;
    if ('error' in msg) return { error: msg.error };
    if ('result' in msg) return { result: msg.result };
  } catch {
    // not JSON
  }
  return undefined;
}

export function isSse(res: Response): boolean {
  return (res.headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream');
}

/**
 * Reads SSE messages until `onMessage` returns true, the body ends, or
 * `timeoutMs` passes; then cuts the connection (unless it ended by itself).
 */
export async function readSse(res: Response, abort: AbortController, timeoutMs: number, onMessage: (m: SseMessage) => boolean): Promise<SseEnd> {
  if (res.body === null) return 'eof';
  const reader = res.body.getReader();
  const parser = new SseParser();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  try {
    for (;;) {
      const r = await Promise.race([reader.read(), timeout]);
      if (r === 'timeout') return cut('timeout');
      if (r.done) return 'eof';
      for (const m of parser.push(r.value)) if (onMessage(m)) return cut('stopped');
    }
  } catch {
    // The connection broke: the stream ended as far as the probe can see.
    return 'eof';
  } finally {
    clearTimeout(timer);
  }

  function cut<T extends SseEnd>(how: T): T {
    abort.abort();
    reader.cancel().catch(() => undefined);
    return how;
  }
}

export function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? ` (${err.cause.message})` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}
