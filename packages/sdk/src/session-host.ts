import { isSessionLogError } from '@tether/session-log';
import type { SessionLog, SessionRecord } from '@tether/session-log';
import { TetherEventStore } from './event-store.js';
import { TetherSdkError, TetherSdkErrorCode } from './errors.js';
import { responseIdOf } from './json-rpc.js';
import type { SdkAuthInfo } from './identity.js';
import type { JsonRpcId, JsonRpcMessage } from './json-rpc.js';
import { requestsOfTransport } from './sdk-transport-internals.js';
import { SDK_GET_STREAM, SessionMeta } from './wire.js';
import type { WriterPresence } from './writer-presence.js';
import type { WriterWatchOptions } from './writer-watch.js';

/** The SDK's `EventStore`, as both SDKs declare it. */
export interface SdkEventStore {
  storeEvent(streamId: string, message: JsonRpcMessage): Promise<string>;
  getStreamIdForEventId?(eventId: string): Promise<string | undefined>;
  replayEventsAfter(lastEventId: string, options: { send: (eventId: string, message: JsonRpcMessage) => Promise<void> }): Promise<string>;
}

/** What the router needs of the SDK's web-standard transport (v1 `server/webStandardStreamableHttp.js`, v2 `@modelcontextprotocol/server`). */
export interface SdkTransport {
  /** `authInfo` reaches the handlers as `extra.authInfo` (v1) or `ctx.http.authInfo` (v2), as in a plain SDK server. */
  handleRequest(request: Request, options?: { parsedBody?: unknown; authInfo?: SdkAuthInfo }): Promise<Response>;
  close(): Promise<void>;
}

/** The options of the SDK transport's constructor that the router sets. */
export interface SdkTransportOptions {
  sessionIdGenerator: () => string;
  eventStore: SdkEventStore;
  onsessionclosed: (sessionId: string) => void | Promise<void>;
  retryInterval?: number;
  keepAliveMs?: number;
}

/** `WebStandardStreamableHTTPServerTransport` of either SDK. */
export type SdkTransportClass = new (options: SdkTransportOptions) => SdkTransport;

/** The session a server is built for: `createServer`'s argument (durable tasks need its principal). */
export interface SdkSessionInfo {
  readonly sessionId: string;
  /**
   * The principal digest the session is bound to: of the verified identity
   * (`identityPrincipal(issuer, subject)`), or of the credential
   * (`principalDigest`), whichever `principalOf` gave. Never the token.
   */
  readonly principal: string;
}

/** What the router needs of the user's server (`McpServer` or `Server`, v1 or v2). */
export interface SdkServer {
  connect(transport: never): Promise<void>;
}

export interface SessionHostOptions {
  readonly log: SessionLog;
  readonly presence: WriterPresence;
  readonly transport: SdkTransportClass;
  readonly createServer: (session: SdkSessionInfo) => SdkServer | Promise<SdkServer>;
  readonly retryIntervalMs?: number;
  readonly keepAliveMs?: number;
  readonly writerWatch?: WriterWatchOptions;
}

/** One session as this process serves it: the SDK's transport and server, and the store they write through. */
export interface HostedSession {
  readonly record: SessionRecord;
  readonly store: TetherEventStore;
  readonly transport: SdkTransport;
  /** Ends the local state (transport, server, control watch); the session lives on in the registry. */
  close(): Promise<void>;
}

const REBUILD_REQUEST_ID = 'tether-rebuild-initialize';

/**
 * Builds the SDK transport and server for a session, on whichever instance
 * its request lands. The instance that received `initialize` passes it
 * through (`rebuild: false`). Any other instance replays that `initialize`
 * (kept in the session record) and `notifications/initialized` into a
 * fresh transport and server, so both are in the state the client left
 * them in; nothing of the replay is recorded in the log or sent anywhere.
 * That is why the user's server must be deterministic (see README).
 */
export async function hostSession(options: SessionHostOptions, record: SessionRecord, url: string, rebuild: boolean, onClosed: () => void): Promise<HostedSession> {
  const initialize = rebuild ? storedInitialize(record) : undefined;
  let transportRef: object | undefined;
  const store = new TetherEventStore({
    log: options.log,
    session: record,
    presence: options.presence,
    requestsOf: (sdkStreamId) => (transportRef === undefined ? undefined : requestsOfTransport(transportRef)(sdkStreamId)),
    ...(options.writerWatch === undefined ? {} : { writerWatch: options.writerWatch }),
  });
  // While the replayed initialize runs, nothing reaches the log.
  let muted = false;
  let mutedCount = 0;
  const gate: SdkEventStore = {
    storeEvent: (streamId, message) => (muted ? Promise.resolve(`muted-${(mutedCount += 1)}`) : store.storeEvent(streamId, message).catch((err: unknown) => giveUp(streamId, message, err))),
    getStreamIdForEventId: (eventId) => store.getStreamIdForEventId(eventId),
    replayEventsAfter: (lastEventId, send) => store.replayEventsAfter(lastEventId, send),
  };
  const watch = new AbortController();
  const transport = new options.transport({
    sessionIdGenerator: () => record.sessionId,
    eventStore: gate,
    onsessionclosed: async (sessionId) => {
      await options.log.closeSession(sessionId);
    },
    ...(options.retryIntervalMs === undefined ? {} : { retryInterval: options.retryIntervalMs }),
    ...(options.keepAliveMs === undefined ? {} : { keepAliveMs: options.keepAliveMs }),
  });
  transportRef = transport;
  // The SDK cannot send what it could not store, and it neither ends the
  // response nor tells the client (the rejection reaches only `onerror`).
  // A POST stream whose response the store could not store (the log
  // unavailable past its retries) is closed instead of left open forever:
  // the client resumes it, and the resume finds it written by nobody and
  // ends it with a JSON-RPC error per owed request (takeover.ts).
  const giveUp = (streamId: string, message: JsonRpcMessage, err: unknown): never => {
    if (streamId !== SDK_GET_STREAM && responseIdOf(message) !== undefined && isSessionLogError(err, 'log_unavailable')) {
      const close = (transport as { closeSSEStream?: (requestId: JsonRpcId) => void }).closeSSEStream;
      for (const id of requestsOfTransport(transport)(streamId) ?? []) close?.call(transport, id);
    }
    throw err;
  };
  const server = await options.createServer({ sessionId: record.sessionId, principal: record.principal });
  await server.connect(transport as never);
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    watch.abort();
    onClosed();
    await transport.close().catch(() => undefined);
  };
  if (initialize !== undefined) {
    muted = true;
    try {
      await replayInitialize(transport, url, initialize);
    } catch (err) {
      await close();
      throw err;
    } finally {
      muted = false;
    }
  }
  // A session closed on another instance (DELETE there) ends its state here too.
  void (async () => {
    for await (const message of options.log.watchControl(record.sessionId, watch.signal)) {
      if (message.type === 'closed') return close();
    }
  })().catch(() => undefined);
  return { record, store, transport, close };
}

/** The `initialize` params kept in the session record by the instance that created it. */
function storedInitialize(record: SessionRecord): unknown {
  const text = record.meta[SessionMeta.initialize];
  if (text === undefined) throw new TetherSdkError(TetherSdkErrorCode.sessionNotRebuildable, 'the session record holds no initialize request: it was not created by createSessionRouter');
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new TetherSdkError(TetherSdkErrorCode.sessionNotRebuildable, 'the initialize request kept in the session record is not JSON', {}, { cause: err });
  }
}

async function replayInitialize(transport: SdkTransport, url: string, params: unknown): Promise<void> {
  const headers = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
  const init = { jsonrpc: '2.0', id: REBUILD_REQUEST_ID, method: 'initialize', params };
  const answer = await transport.handleRequest(new Request(url, { method: 'POST', headers }), { parsedBody: init });
  // The answer streams until the server has responded; read it to its end.
  const text = await answer.text();
  if (answer.status !== 200 || !answeredWithResult(text)) {
    throw new TetherSdkError(TetherSdkErrorCode.sessionNotRebuildable, `the server refused the replayed initialize (HTTP ${answer.status})`);
  }
  const sessionId = (transport as { sessionId?: string }).sessionId ?? '';
  const initialized = await transport.handleRequest(
    new Request(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId } }),
    { parsedBody: { jsonrpc: '2.0', method: 'notifications/initialized' } },
  );
  await initialized.body?.cancel();
}

/** Whether the SSE (or JSON) answer holds a result for the replayed initialize. */
function answeredWithResult(text: string): boolean {
  const bodies = text.trimStart().startsWith('{') ? [text] : text.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5));
  for (const body of bodies) {
    try {
      const message = JSON.parse(body) as { id?: unknown; result?: unknown };
      if (message.id === REBUILD_REQUEST_ID) return message.result !== undefined;
    } catch {
      // priming events carry empty data
    }
  }
  return false;
}
