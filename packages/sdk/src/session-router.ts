import type { IncomingMessage, ServerResponse } from 'node:http';
import { EventKind, encodeResumeAck, encodeSseEvent, HttpHeader, isSessionId, ResumeVerdict, STANDALONE_STREAM } from '@tether/protocol';
import { samePrincipal } from '@tether/session-log';
import type { SessionLog, SessionRecord } from '@tether/session-log';
import { isTetherSdkError } from './errors.js';
import { fromLogError, jsonRpcError, resumeRefused, sessionNotFound } from './http-replies.js';
import { defaultPrincipalOf, principalOfSource } from './identity.js';
import type { SdkAuthInfo, SdkPrincipalSource } from './identity.js';
import { BODY_TOO_LARGE, toWebRequest, writeNodeResponse } from './node-http.js';
import { hostSession } from './session-host.js';
import type { HostedSession, SdkServer, SdkSessionInfo, SdkTransportClass } from './session-host.js';
import { sseResponse } from './sse-response.js';
import { JsonRpcCode, SESSION_OWNER, SessionMeta } from './wire.js';
import { createWriterPresence } from './writer-presence.js';
import type { WriterPresence } from './writer-presence.js';
import type { WriterWatchOptions } from './writer-watch.js';

export interface SessionRouterOptions {
  /** The session log, in-process on NATS (`SessionLog.create`). Not closed by the router. */
  readonly log: SessionLog;
  /**
   * The SDK's web-standard transport class: v1
   * `WebStandardStreamableHTTPServerTransport` from
   * `@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js`, or v2's
   * from `@modelcontextprotocol/server`. One is built per session per
   * instance, with a `TetherEventStore` bound to that session.
   */
  readonly transport: SdkTransportClass;
  /** A fresh server (`McpServer`, v1 or v2) for one session on this instance. Must build the same server everywhere (README); `session.principal` picks per-principal state such as durable tasks (`forPrincipal`). */
  readonly createServer: (session: SdkSessionInfo) => SdkServer | Promise<SdkServer>;
  /**
   * Who the caller is. A session is bound to the principal that initialized
   * it; a request of another principal gets 404, byte for byte the answer
   * for an unknown session. `authInfo` is the request's verified token
   * (`fetch(request, { authInfo })`, or `req.auth` in `node`), undefined
   * when there is none. Answer either
   * - a verified identity `{ issuer, subject }`: bound by
   *   `identityPrincipal(issuer, subject)`, so a refreshed token of the same
   *   subject keeps its sessions (and durable tasks); or
   * - a credential string (an API key, a trusted identity header): bound by
   *   its digest, so another string is another principal. A bearer token
   *   here is lost at its first refresh.
   *
   * Default: with `authInfo`, its identity (`identityOfAuthInfo`: `extra.iss`
   * and `extra.sub`; never the token, never the client id); a token without
   * `extra.sub` is refused with 500 (`no_identity`: the verifier must give
   * the subject), nothing bound. Without `authInfo`, the `Authorization`
   * header as a credential, or '' (anonymous callers share one principal).
   * A `principalOf(request)` of one argument returning a string works as
   * before.
   *
   * `clientPrincipalOf` binds to the client instead (every token of one
   * client id is one principal): only for client ids that belong to one
   * party, never a public client's or a Client ID Metadata Document URL.
   */
  readonly principalOf?: (request: Request, authInfo: SdkAuthInfo | undefined) => SdkPrincipalSource | Promise<SdkPrincipalSource>;
  /** This process's writer identity. Default: one created for the router (and dropped by `close()`). */
  readonly presence?: WriterPresence;
  /** `retry:` (ms) on priming events and resume acknowledgments: how soon SDK clients reconnect. Default: none (the client's backoff). */
  readonly retryIntervalMs?: number;
  /** SSE keep-alive comments. Default 15 000 ms; 0: none. */
  readonly keepAliveMs?: number;
  /** Largest POST body read. Default 4 MiB (the SDKs' default). */
  readonly maxBodyBytes?: number;
  /** How readers watch a stream written by another instance. */
  readonly writerWatch?: WriterWatchOptions;
}

/** What `fetch` takes besides the request. */
export interface SessionRouterFetchOptions {
  /**
   * The request's verified token, from your bearer-auth gate (v2's
   * `requireBearerAuth` fetch gate, your own verifier). It decides the
   * principal (see `principalOf`) and reaches your handlers through the SDK
   * transport. Tether never stores or logs the token.
   */
  readonly authInfo?: SdkAuthInfo;
}

export interface SessionRouter {
  /**
   * A web-standard handler (`Request` → `Response`): v2 servers, Hono,
   * anything fetch-shaped. On runtimes that pass their own second argument
   * (Workers' `env`, Bun's server), wrap it: `(request) => router.fetch(request)`.
   */
  fetch(request: Request, options?: SessionRouterFetchOptions): Promise<Response>;
  /**
   * A node:http handler: v1 servers on `http.createServer` or Express. Reads
   * the verified token from `req.auth`, where the SDK v1's `requireBearerAuth`
   * middleware (and any middleware that follows the SDK's node transport)
   * puts it.
   */
  node(req: IncomingMessage & { auth?: SdkAuthInfo }, res: ServerResponse): Promise<void>;
  /** This process's writer identity (its id is stamped on every event it appends). */
  readonly presence: WriterPresence;
  /** Sessions this instance holds state for now. */
  readonly localSessions: number;
  /** Drops local state of every session (the sessions live on in the registry) and, if the router made it, the presence. */
  close(): Promise<void>;
}

const DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024;
/** Protocol versions from which clients accept an event with an id and empty data (the SDKs' `supportsEmptySSEData`). */
const PRIMING_SINCE = '2025-11-25';

/**
 * Serves MCP sessions of official-SDK servers from any instance of a fleet.
 *
 * - `initialize` (POST without `Mcp-Session-Id`) registers the session in
 *   the log's registry, bound to the caller's principal (by default its
 *   verified identity, so a refreshed token keeps the session; see
 *   `principalOf`), with the client's initialize params, then lets the SDK
 *   answer it. The request's `authInfo` goes on to the SDK transport.
 * - Any later request, on any instance, finds the session in the registry;
 *   an instance that holds no state for it builds the transport and server
 *   on demand (`hostSession`). Unknown, closed, or another principal's: 404.
 * - POST and DELETE go to the SDK transport, which writes every message
 *   through the session's `TetherEventStore` before its client sees it.
 * - GET is served from the log, on every instance alike: a fresh GET follows
 *   the session's stream `0` (what every instance's server sends there), and
 *   a GET with `Last-Event-ID` resumes any stream of the session, streaming
 *   its live continuation while another instance still produces it, and
 *   ending it explicitly if that instance dies. Refusals are error statuses
 *   with the verdict and reason, never an empty 200.
 */
export function createSessionRouter(options: SessionRouterOptions): SessionRouter {
  const { log } = options;
  const ownPresence = options.presence === undefined;
  const presence = options.presence ?? createWriterPresence(log);
  const maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  const principalOf = options.principalOf ?? defaultPrincipalOf;
  const hosted = new Map<string, Promise<HostedSession>>();
  const hostOptions = {
    log,
    presence,
    transport: options.transport,
    createServer: options.createServer,
    ...(options.retryIntervalMs === undefined ? {} : { retryIntervalMs: options.retryIntervalMs }),
    ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
    ...(options.writerWatch === undefined ? {} : { writerWatch: options.writerWatch }),
  };

  const host = (record: SessionRecord, url: string, rebuild: boolean): Promise<HostedSession> => {
    let pending = hosted.get(record.sessionId);
    if (pending === undefined) {
      pending = hostSession(hostOptions, record, url, rebuild, () => hosted.delete(record.sessionId));
      hosted.set(record.sessionId, pending);
      pending.catch(() => hosted.delete(record.sessionId));
    }
    return pending;
  };

  /** The session if it is active, ours, and this caller's; else undefined (answered 404 like the SDK's unknown session). */
  const authorize = async (request: Request, principal: string): Promise<HostedSession | undefined> => {
    const sessionId = request.headers.get(HttpHeader.sessionId);
    if (sessionId === null || !isSessionId(sessionId)) return undefined;
    // The registry is read on every request: a close or idle-out anywhere is seen at once.
    const record = await log.getSession(sessionId);
    if (record === undefined || record.state !== 'active' || record.meta[SessionMeta.owner] !== SESSION_OWNER || !samePrincipal(record.principal, principal)) return undefined;
    return host(record, request.url, true);
  };

  const fetch = async (request: Request, fetchOptions?: SessionRouterFetchOptions): Promise<Response> => {
    const authInfo = fetchOptions?.authInfo;
    // Handed to the SDK as given (the same object): handlers see what the gate verified.
    const sdkOptions = authInfo === undefined ? {} : { authInfo };
    try {
      const principal = principalOfSource(await principalOf(request, authInfo));
      switch (request.method) {
        case 'POST':
          return await post(request, principal, sdkOptions);
        case 'GET':
          return await get(request, principal);
        case 'DELETE': {
          const session = await authorize(request, principal);
          if (session === undefined) return sessionNotFound();
          const answer = await session.transport.handleRequest(request, sdkOptions);
          await session.close();
          return answer;
        }
        default:
          return jsonRpcError(405, JsonRpcCode.transport, 'Method not allowed.', { headers: { allow: 'GET, POST, DELETE' } });
      }
    } catch (err) {
      if (isTetherSdkError(err, 'session_not_rebuildable')) return sessionNotFound();
      if (isTetherSdkError(err, 'no_identity')) return jsonRpcError(500, JsonRpcCode.transport, `Internal server error: ${err.message}`);
      return fromLogError(err);
    }
  };

  const post = async (request: Request, principal: string, sdkOptions: { authInfo?: SdkAuthInfo }): Promise<Response> => {
    let body: unknown;
    try {
      body = JSON.parse(await request.text());
    } catch {
      return jsonRpcError(400, JsonRpcCode.parse, 'Parse error: Invalid JSON');
    }
    const initialize = initializeParams(body);
    if (request.headers.get(HttpHeader.sessionId) === null) {
      if (initialize === undefined) return jsonRpcError(400, JsonRpcCode.transport, 'Bad Request: Mcp-Session-Id header is required');
      return await open(request, principal, body, initialize, sdkOptions);
    }
    const session = await authorize(request, principal);
    if (session === undefined) return sessionNotFound();
    void log.sessions.touch(session.record.sessionId).catch(() => undefined);
    return await session.transport.handleRequest(request, { parsedBody: body, ...sdkOptions });
  };

  /** `initialize`: register the session (bound to the principal), give stream `0` its head, and let the SDK answer. */
  const open = async (request: Request, principal: string, body: unknown, initialize: unknown, sdkOptions: { authInfo?: SdkAuthInfo }): Promise<Response> => {
    const record = await log.createSession(principal, { [SessionMeta.owner]: SESSION_OWNER, [SessionMeta.initialize]: JSON.stringify(initialize) });
    // The GET stream always has a head, so a fresh GET can give its client a real cursor.
    await log.append(record.sessionId, STANDALONE_STREAM, EventKind.prime, new Uint8Array(), { opensStream: { epoch: record.epoch } });
    const session = await host(record, request.url, false);
    const answer = await session.transport.handleRequest(request, { parsedBody: body, ...sdkOptions });
    if (answer.status !== 200) {
      await session.close();
      await log.closeSession(record.sessionId).catch(() => false);
    }
    return answer;
  };

  const get = async (request: Request, principal: string): Promise<Response> => {
    if (!(request.headers.get('accept') ?? '').includes('text/event-stream')) {
      return jsonRpcError(406, JsonRpcCode.transport, 'Not Acceptable: Client must accept text/event-stream');
    }
    if (request.headers.get(HttpHeader.sessionId) === null) return jsonRpcError(400, JsonRpcCode.transport, 'Bad Request: Mcp-Session-Id header is required');
    const session = await authorize(request, principal);
    if (session === undefined) return sessionNotFound();
    const { sessionId } = session.record;
    const protocolVersion = request.headers.get(HttpHeader.protocolVersion) ?? '';
    const priming = protocolVersion === '' || protocolVersion >= PRIMING_SINCE;
    const retry = options.retryIntervalMs === undefined ? {} : { retryMs: options.retryIntervalMs };
    const sse = { ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }) };
    const lastEventId = request.headers.get(HttpHeader.lastEventId);
    const abort = new AbortController();
    if (lastEventId !== null) {
      const result = await session.store.resume(lastEventId);
      if (result.verdict !== 'resumed') return resumeRefused(result.verdict, result.reason);
      const headers = { [HttpHeader.sessionId]: sessionId, [HttpHeader.tetherResume]: ResumeVerdict.resumed };
      // The client has every message of a finished stream: 204, or the SDK client would reopen an empty stream forever.
      if (result.accepted.nothingLeft) return new Response(null, { status: 204, headers });
      // The acknowledgment's id is the cursor: the SDK client forgets a cursor it did not see on this
      // very response (typescript-sdk#2499), so it keeps it even if we end before the next event.
      const opening = priming ? encodeResumeAck({ cursor: lastEventId, stream: result.accepted.stream, nextSeq: result.accepted.cursor.seq + 1, ...retry }) : '';
      return sseResponse(result.events(abort.signal), abort, { headers, opening, ...sse });
    }
    // A fresh GET: opened before the head is read, so whatever is stored after the head reaches it live.
    const reader = log.openReader(session.record, STANDALONE_STREAM);
    let head;
    try {
      head = await log.head(sessionId, STANDALONE_STREAM);
    } catch (err) {
      reader.close();
      throw err;
    }
    const from = head === undefined ? { seq: 0, pos: 0 } : { seq: head.seq, pos: head.pos };
    const opening = priming && head !== undefined ? encodeSseEvent({ id: head.id, data: '', ...retry }) : '';
    return sseResponse(reader.follow(from, { signal: abort.signal }), abort, { headers: { [HttpHeader.sessionId]: sessionId }, opening, ...sse });
  };

  return {
    fetch,
    async node(req, res) {
      const request = await toWebRequest(req, maxBodyBytes);
      if (request === BODY_TOO_LARGE) return writeNodeResponse(jsonRpcError(413, JsonRpcCode.transport, `Payload Too Large: the body exceeds ${maxBodyBytes} bytes`), res);
      return writeNodeResponse(await fetch(request, req.auth === undefined ? {} : { authInfo: req.auth }), res);
    },
    presence,
    get localSessions() {
      return hosted.size;
    },
    async close() {
      const sessions = await Promise.allSettled([...hosted.values()]);
      await Promise.all(sessions.map((s) => (s.status === 'fulfilled' ? s.value.close() : undefined)));
      if (ownPresence) await presence.close();
    },
  };
}

/** The params of an `initialize` request in a POST body (alone or in a batch), if there is one. */
function initializeParams(body: unknown): unknown {
  for (const message of Array.isArray(body) ? body : [body]) {
    if (typeof message === 'object' && message !== null && (message as { method?: unknown }).method === 'initialize') {
      return (message as { params?: unknown }).params ?? {};
    }
  }
  return undefined;
}
