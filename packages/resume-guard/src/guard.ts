import { HttpHeader, ResumeVerdict, encodeSseEvent } from '@tether/protocol';
import { guardBody } from './body.js';
import { StreamCheck } from './check.js';
import type { StreamFinding } from './check.js';
import { ResumeGuardErrorCode, ResumeViolationCode, ResumeViolationError } from './errors.js';
import { initHeaders, openSession } from './reinit.js';
import { inspectRpcBody } from './rpc.js';
import type { JsonRpcId } from './rpc.js';
import { SessionTable } from './sessions.js';
import type { SessionState, StreamEntry } from './sessions.js';
import { MAX_REFUSAL_BODY_BYTES, MediaType, REFUSAL_STATUSES, RESUME_VIOLATION_RPC_CODE, mediaTypeOf } from './wire.js';

/** The fetch signature the guard takes and returns; the MCP SDK's `FetchLike` accepts it. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Told to `onReinitialize`: the client now talks to a new session. */
export interface ReinitializeEvent {
  readonly previousSessionId: string;
  readonly sessionId: string;
  /** `session_not_found`: the server answered 404 to the session; `violation`: a resume broke integrity. */
  readonly reason: 'session_not_found' | 'violation';
  readonly violation?: ResumeViolationError;
}

/** Options of `createResumeGuard`. */
export interface ResumeGuardOptions {
  /** The fetch to wrap. Default `globalThis.fetch`. */
  fetch?: FetchLike;
  /** Called once per violation, before the client sees the failure. Exceptions are swallowed. */
  onViolation?: (err: ResumeViolationError) => void;
  /**
   * Open a new session (same `initialize` body and headers) when a resume is
   * violated or refused, or when the server answers 404 to a session. Pending
   * requests of the broken stream fail; later requests go to the new session.
   * Default true.
   */
  autoReinitialize?: boolean;
  /** Called after a new session is open, so the caller can re-list tools and re-subscribe. Exceptions are swallowed. */
  onReinitialize?: (event: ReinitializeEvent) => void;
  /** Treat id-less SSE answers after JSON answers or id-carrying streams on the same session as a silent fallback. Default true. */
  strictFraming?: boolean;
  /** Event ids remembered per session (and per stream) for the replay and fork checks. Default 10 000. */
  maxTrackedIds?: number;
  /** Deadline of a re-initialization. Default 10 000 ms. */
  reinitializeTimeoutMs?: number;
}

/** A guard: its `fetch` goes into `new StreamableHTTPClientTransport(url, { fetch: guard.fetch })`. */
export interface ResumeGuard {
  readonly fetch: FetchLike;
  /** Violations seen so far, oldest first (the last 100). */
  violations(): readonly ResumeViolationError[];
  /** The session that `sessionId` stands for now, after any re-initializations. */
  currentSessionId(sessionId: string): string;
}

const MAX_KEPT_VIOLATIONS = 100;
/** How long a resume refused 401 waits for the client's re-authenticated retry. */
const AUTH_RETRY_WINDOW_MS = 60_000;

/**
 * Creates a resume guard: a fetch wrapper that tracks, per session and
 * stream, the last event id the client consumed, and checks every resumed
 * stream before its first event reaches the client (DESIGN §1). On a
 * violation it aborts the stream without delivering anything from it, fails
 * the stream's pending JSON-RPC requests with code `RESUME_VIOLATION_RPC_CODE`
 * (or errors the body with the `ResumeViolationError` when it knows none),
 * calls `onViolation`, and by default opens a new session.
 *
 * Violation codes: `replay_from_zero`, `gap`, `fork`, `silent_fallback`,
 * `explicit_refusal` (see `ResumeViolationCode`).
 */
export function createResumeGuard(options: ResumeGuardOptions = {}): ResumeGuard {
  const base: FetchLike = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  const auto = options.autoReinitialize ?? true;
  const strict = options.strictFraming ?? true;
  const reinitTimeoutMs = options.reinitializeTimeoutMs ?? 10_000;
  const table = new SessionTable(options.maxTrackedIds === undefined ? {} : { maxTrackedIds: options.maxTrackedIds });
  const seen: ResumeViolationError[] = [];
  let reinitCount = 0;

  const report = (err: ResumeViolationError): void => {
    seen.push(err);
    if (seen.length > MAX_KEPT_VIOLATIONS) seen.shift();
    try {
      options.onViolation?.(err);
    } catch {
      // A hook must not break the client's stream handling.
    }
  };

  const reinitialize = (session: SessionState, violation?: ResumeViolationError): Promise<string | undefined> => {
    session.replacement ??= (async () => {
      if (session.init === undefined) return undefined;
      try {
        const sessionId = await openSession(base, session.init, `resume-guard-${++reinitCount}`, reinitTimeoutMs);
        table.open(sessionId, session.init);
        table.retire(session.id, sessionId);
        try {
          options.onReinitialize?.({
            previousSessionId: session.id,
            sessionId,
            reason: violation === undefined ? 'session_not_found' : 'violation',
            ...(violation === undefined ? {} : { violation }),
          });
        } catch {
          // As above.
        }
        return sessionId;
      } catch {
        table.retire(session.id);
        return undefined;
      }
    })();
    return session.replacement;
  };

  const violate = async (err: ResumeViolationError, session: SessionState, entry: StreamEntry) => {
    entry.dead = true;
    report(err);
    if (auto) await reinitialize(session, err);
    const replacement = entry.requestIds.length > 0 ? errorEvents(entry.requestIds, err.message, err.toJSON(), entry.history.lastId ?? err.lastEventId) : undefined;
    if (replacement !== undefined) entry.failed = true;
    return { replacement, error: err };
  };

  const guardStream = (res: Response, session: SessionState, entry: StreamEntry, check: StreamCheck, url: string, cursor?: string) => {
    const body = guardBody(res.body as ReadableStream<Uint8Array>, check, {
      delivered: (ids) => session.indexIds(entry, ids),
      violated: (f) => violate(findingError(f, { sessionId: session.id, lastEventId: cursor, url, status: res.status }), session, entry),
    }, cursor);
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };

  const onResume = async (res: Response, session: SessionState, cursor: string, url: string): Promise<Response> => {
    let entry = session.streamOf(cursor);
    if (entry === undefined) {
      // A cursor the guard never saw (it joined late): check against the cursor alone.
      entry = session.newStream([]);
      session.indexIds(entry, [cursor]);
    }
    const header = res.headers.get(HttpHeader.tetherResume) ?? undefined;
    // 409, 429, 5xx: may pass on a retry, which the client does itself.
    if (!res.ok && !REFUSAL_STATUSES.has(res.status)) return res;
    if (REFUSAL_STATUSES.has(res.status) || (header !== undefined && header !== ResumeVerdict.resumed)) {
      const body = await readRefusal(res);
      const verdict = header ?? body.verdict;
      const err = new ResumeViolationError(
        ResumeViolationCode.explicitRefusal,
        `explicit_refusal resuming from ${cursor}: HTTP ${res.status}${verdict === undefined ? '' : ` (${verdict})`}${body.message === undefined ? '' : `: ${body.message}`}`,
        { sessionId: session.id, lastEventId: cursor, verdict, status: res.status, url },
      );
      const { replacement } = await violate(err, session, entry);
      if (replacement !== undefined) return sseResponse(replacement, table.resolve(session.id));
      return new Response(body.text, { status: res.status, statusText: res.statusText, headers: res.headers });
    }
    if (mediaTypeOf(res.headers.get('content-type')) !== MediaType.sse || res.body === null) {
      await res.body?.cancel();
      const err = new ResumeViolationError(
        ResumeViolationCode.silentFallback,
        `silent_fallback resuming from ${cursor}: HTTP ${res.status} answered with ${res.headers.get('content-type') ?? 'no content type'}, not an event stream`,
        { sessionId: session.id, lastEventId: cursor, status: res.status, url, position: 'first' },
      );
      const { replacement } = await violate(err, session, entry);
      return replacement !== undefined ? sseResponse(replacement, table.resolve(session.id)) : failingSse(err);
    }
    return guardStream(res, session, entry, new StreamCheck(entry.history, { cursor }), url, cursor);
  };

  /**
   * A resume that must not reach the server: its stream failed already, or
   * its cursor names events of a session the guard replaced. Sent to the new
   * session, such a cursor names another log: the server refuses it and, as
   * it should, ends the session, a healthy one this time. The SDK sends one
   * because it keeps a reconnection loop per stream, with the cursor it had.
   */
  const localRefusal = (sent: string, sid: string, cursor: string): LocalRefusal | undefined => {
    if (sid === sent && !table.isRetired(sid)) {
      const own = table.get(sid).streamOf(cursor);
      if (own !== undefined) return own.dead ? { reason: 'failed', entry: own } : undefined;
    }
    const retired = table.retiredStreamOf(cursor);
    if (retired !== undefined || sid !== sent || table.isRetired(sid)) {
      return { reason: 'replaced', entry: retired?.entry, previousSessionId: retired?.sessionId ?? sent };
    }
    return undefined; // a cursor the guard never saw: the server judges it
  };

  const guardedFetch = async (input: string | URL | Request, init?: RequestInit, retried = false): Promise<Response> => {
    const req = describe(input, init);
    const sent = req.headers.get(HttpHeader.sessionId) ?? undefined;
    const sid = sent === undefined ? undefined : table.resolve(sent);
    if (sid !== undefined && sid !== sent) req.headers.set(HttpHeader.sessionId, sid);
    let cursor = req.method === 'GET' ? (req.headers.get(HttpHeader.lastEventId) ?? undefined) : undefined;
    if (cursor === undefined && req.method === 'GET' && sid !== undefined) {
      cursor = resumeAfterAuth(table.get(sid));
      if (cursor !== undefined) req.headers.set(HttpHeader.lastEventId, cursor);
    }
    if (cursor !== undefined && sid !== undefined && sent !== undefined) {
      const refusal = localRefusal(sent, sid, cursor);
      if (refusal !== undefined) return refuseLocally(cursor, sid, refusal);
    }
    const rpc = req.method === 'POST' ? inspectRpcBody(req.body) : inspectRpcBody(undefined);
    const res = await base(req.request === undefined ? input : new Request(req.request, { ...init, headers: req.headers }), {
      ...init,
      headers: req.headers,
    });
    const answered = res.headers.get(HttpHeader.sessionId) ?? undefined;
    if (sid === undefined && answered !== undefined && rpc.initialize && req.body !== undefined) {
      table.open(answered, { url: req.url, body: req.body, headers: initHeaders(req.headers) });
    }
    const key = sid ?? answered;
    if (key === undefined) return res; // sessionless (stateless era): nothing to resume
    const session = table.get(key);
    if (cursor !== undefined && res.status === 401) session.resumesAwaitingAuth.push({ cursor, atMs: Date.now() });
    if (cursor !== undefined) return withSessionHeader(await onResume(res, session, cursor, req.url), sid, sent);
    if (res.status === 404 && sid !== undefined && req.method !== 'DELETE' && !retried && auto && session.init !== undefined) {
      // The spec's "start a new session", which the SDK transport does not do by itself.
      const replacement = await reinitialize(session);
      if (replacement !== undefined) {
        await res.body?.cancel();
        return guardedFetch(input, init, true);
      }
    }
    if ((req.method === 'DELETE' && res.ok) || res.status === 404) table.forget(key);
    const type = mediaTypeOf(res.headers.get('content-type'));
    if (req.method === 'POST' && type === MediaType.json) session.sawJson = true;
    if (type !== MediaType.sse || res.body === null || !res.ok) return withSessionHeader(res, sid, sent);
    const entry = session.newStream(rpc.requestIds);
    const expectIds = strict && req.method === 'POST' && (session.sawJson || session.sawIds);
    return withSessionHeader(guardStream(res, session, entry, new StreamCheck(entry.history, { expectIds }), req.url), sid, sent);
  };

  return {
    fetch: (input, init) => guardedFetch(input, init),
    violations: () => seen.slice(),
    currentSessionId: (id) => table.resolve(id),
  };
}

/**
 * The cursor of a resume the server refused 401, for the client's next GET
 * on the session that has none: after re-authenticating, the SDK v1 client
 * reopens a resumed stream as if it were a new one, without its
 * `Last-Event-ID`. Sent so, it would open the session's standalone stream
 * and the call it was resuming would wait for its timeout, its events lost
 * without a word. Cursors older than a minute are dropped: the client gave
 * up on them.
 */
function resumeAfterAuth(session: SessionState): string | undefined {
  const pending = session.resumesAwaitingAuth;
  while (pending.length > 0 && Date.now() - pending[0]!.atMs > AUTH_RETRY_WINDOW_MS) pending.shift();
  return pending.shift()?.cursor;
}

interface Outgoing {
  /** The input, when it was a `Request`. */
  readonly request: Request | undefined;
  readonly url: string;
  readonly method: string;
  readonly headers: Headers;
  readonly body: string | undefined;
}

function describe(input: string | URL | Request, init: RequestInit | undefined): Outgoing {
  const isRequest = typeof Request !== 'undefined' && input instanceof Request;
  const headers = new Headers(isRequest ? input.headers : undefined);
  if (init?.headers !== undefined) for (const [k, v] of new Headers(init.headers)) headers.set(k, v);
  return {
    request: isRequest ? input : undefined,
    url: isRequest ? input.url : String(input),
    method: (init?.method ?? (isRequest ? input.method : 'GET')).toUpperCase(),
    headers,
    body: typeof init?.body === 'string' ? init.body : undefined,
  };
}

function findingError(f: StreamFinding, at: { sessionId: string; lastEventId: string | undefined; url: string; status: number }) {
  const where = at.lastEventId === undefined ? 'on a live stream' : `resuming from ${at.lastEventId}`;
  return new ResumeViolationError(f.code, `${f.code} ${where}: ${f.reason}`, {
    ...at,
    eventId: f.eventId,
    expectedEventId: f.expectedEventId,
    previousEventId: f.previousEventId,
    position: f.position,
    verdict: f.verdict,
  });
}

/**
 * One SSE `message` event per pending request, carrying a JSON-RPC error.
 * They repeat the client's cursor as their id: the SDK counts only a result
 * as the end of a request, so it reconnects after these, and without an id
 * it would reconnect with no `Last-Event-ID` at all, opening a stray GET
 * stream that supersedes its real one. With the cursor, the guard refuses
 * that reconnection locally and the SDK gives up after its retries.
 */
function errorEvents(ids: readonly JsonRpcId[], message: string, data: Record<string, unknown>, cursor: string | undefined): Uint8Array {
  const error = { code: RESUME_VIOLATION_RPC_CODE, message, data };
  const text = ids.map((id) => encodeSseEvent({ ...(cursor === undefined ? {} : { id: cursor }), event: 'message', data: JSON.stringify({ jsonrpc: '2.0', id, error }) })).join('');
  return new TextEncoder().encode(text);
}

function sseResponse(bytes: Uint8Array, sessionId: string): Response {
  return new Response(bytes, { status: 200, headers: { 'content-type': MediaType.sse, [HttpHeader.sessionId]: sessionId } });
}

function failingSse(err: Error): Response {
  const body = new ReadableStream<Uint8Array>({ start: (c) => c.error(err) });
  return new Response(body, { status: 200, headers: { 'content-type': MediaType.sse } });
}

interface LocalRefusal {
  /** `failed`: the stream broke integrity before; `replaced`: its session was replaced. */
  readonly reason: 'failed' | 'replaced';
  /** The stream the cursor belongs to, when the guard remembers it. */
  readonly entry: StreamEntry | undefined;
  readonly previousSessionId?: string;
}

/**
 * Answers a resume the guard will not send. Requests still pending on the
 * stream fail now, once, as JSON-RPC errors (a 404 alone would leave them
 * waiting for their timeout: the SDK only retries it); after that, a 404.
 */
function refuseLocally(cursor: string, sessionId: string, refusal: LocalRefusal): Response {
  const message =
    refusal.reason === 'failed'
      ? `resume-guard: the stream of ${cursor} was abandoned after a violation; start a new request`
      : `resume-guard: ${cursor} belongs to a session that was replaced; its requests cannot complete, start new ones`;
  const entry = refusal.entry;
  if (entry !== undefined && entry.requestIds.length > 0 && !entry.failed) {
    entry.failed = true;
    entry.dead = true;
    const data = { code: refusal.reason === 'failed' ? ResumeViolationCode.explicitRefusal : ResumeGuardErrorCode.sessionReplaced, message, lastEventId: cursor, sessionId, ...(refusal.previousSessionId === undefined ? {} : { previousSessionId: refusal.previousSessionId }) };
    return sseResponse(errorEvents(entry.requestIds, message, data, cursor), sessionId);
  }
  const error = { code: -32001, message };
  return new Response(JSON.stringify({ jsonrpc: '2.0', id: null, error }), {
    status: 404,
    headers: { 'content-type': MediaType.json, [HttpHeader.sessionId]: sessionId },
  });
}

/** After a re-initialization, tell the client its new session on every answer (the SDK adopts it from POST answers). */
function withSessionHeader(res: Response, sid: string | undefined, sent: string | undefined): Response {
  if (sid === undefined || sid === sent || res.headers.get(HttpHeader.sessionId) === sid) return res;
  const headers = new Headers(res.headers);
  headers.set(HttpHeader.sessionId, sid);
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}

async function readRefusal(res: Response): Promise<{ text: string; verdict?: string; message?: string }> {
  let text = '';
  try {
    text = (await res.text()).slice(0, MAX_REFUSAL_BODY_BYTES);
    const body = JSON.parse(text) as { error?: { message?: unknown; data?: { verdict?: unknown } } };
    const verdict = body.error?.data?.verdict;
    const message = body.error?.message;
    return {
      text,
      ...(typeof verdict === 'string' ? { verdict } : {}),
      ...(typeof message === 'string' ? { message } : {}),
    };
  } catch {
    return { text };
  }
}
