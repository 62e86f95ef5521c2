import { createServer, request as httpRequest, type ClientRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { pipeline } from 'node:stream';
import { LOOPBACK } from './ports.js';

/** Options of {@link startRoundRobinProxy}. */
export interface RoundRobinProxyOptions {
  /** Targets for which this returns true are passed over (like {@link RoundRobinProxy.markDown}). Checked per request. */
  skip?: (target: string) => boolean;
  /** Port to listen on. Default 0 (random). */
  port?: number;
  /** How many routed requests {@link RoundRobinProxy.history} keeps. Default 1000. */
  historySize?: number;
}

/** One request the proxy routed (or failed to route). */
export interface RoutedRequest {
  /** 1-based, in arrival order. */
  readonly seq: number;
  readonly method: string;
  /** Path and query as the client sent them. */
  readonly path: string;
  /** The base url it went to; undefined when every target was skipped. */
  readonly target: string | undefined;
  /** `Mcp-Session-Id` and `Last-Event-ID` as sent, to assert where resumes went. */
  readonly sessionId: string | undefined;
  readonly lastEventId: string | undefined;
  /** The upstream's status, or 502/503 from the proxy; undefined while waiting for headers. */
  status: number | undefined;
}

/** A loopback HTTP reverse proxy that sends every request to the next target in turn. */
export interface RoundRobinProxy {
  /** `http://127.0.0.1:<port>`, no trailing slash. */
  readonly url: string;
  readonly port: number;
  /** Requests received so far (including ones answered 502/503). */
  readonly requests: number;
  /** The current targets, normalized (no trailing slash). */
  readonly targets: readonly string[];
  /** Replaces the rotation; the next request goes to the first target that is not down. */
  setTargets(targets: readonly string[]): void;
  /** Pass over `target` until {@link markUp}: for a killed instance. */
  markDown(target: string): void;
  markUp(target: string): void;
  /**
   * Destroys every open socket on both sides (client connections, idle ones
   * too, and upstream connections): what a dropped network or a crashed
   * balancer looks like. Returns how many requests were in flight (cut).
   */
  cutAll(): number;
  /** The last {@link RoundRobinProxyOptions.historySize} requests, oldest first. */
  history(): readonly RoutedRequest[];
  /** The target of the most recent request that matches, if any. */
  lastTargetOf(match: (req: RoutedRequest) => boolean): string | undefined;
  /** Stops listening and destroys every socket. Idempotent. */
  close(): Promise<void>;
}

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) are for one connection only; a proxy
 * must not forward them. Everything else (Mcp-Session-Id, Last-Event-ID,
 * Authorization, Origin, Host, Accept...) passes through untouched.
 */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-authorization', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

interface Exchange {
  readonly clientReq: IncomingMessage;
  readonly clientRes: ServerResponse;
  upstream: ClientRequest | undefined;
}

/**
 * Starts a reverse proxy on 127.0.0.1 in front of `targets` (base urls such
 * as `http://127.0.0.1:1234`; a path prefix is kept). Strict rotation: each
 * request goes to the target after the previous request's, whatever
 * connection it came on, so consecutive requests of one MCP session land on
 * different instances. Bodies stream both ways without buffering (SSE flows
 * event by event). A target that refuses the connection gets the client a 502
 * JSON answer and the rotation moves on; if every target is down, 503.
 */
export async function startRoundRobinProxy(targets: readonly string[], opts: RoundRobinProxyOptions = {}): Promise<RoundRobinProxy> {
  let rotation = normalizeTargets(targets);
  let next = 0;
  let requests = 0;
  let closing: Promise<void> | undefined;
  const down = new Set<string>();
  const historySize = opts.historySize ?? 1000;
  const log: RoutedRequest[] = [];
  const sockets = new Set<Socket>();
  const exchanges = new Set<Exchange>();

  const pick = (): string | undefined => {
    for (let i = 0; i < rotation.length; i += 1) {
      const target = rotation[(next + i) % rotation.length];
      if (target === undefined || down.has(target) || opts.skip?.(target) === true) continue;
      next = (next + i + 1) % rotation.length;
      return target;
    }
    return undefined;
  };

  const handle = (clientReq: IncomingMessage, clientRes: ServerResponse): void => {
    requests += 1;
    const target = pick();
    const entry: RoutedRequest = {
      seq: requests,
      method: clientReq.method ?? 'GET',
      path: clientReq.url ?? '/',
      target,
      sessionId: headerValue(clientReq, 'mcp-session-id'),
      lastEventId: headerValue(clientReq, 'last-event-id'),
      status: undefined,
    };
    log.push(entry);
    if (log.length > historySize) log.shift();

    if (target === undefined) {
      entry.status = 503;
      clientReq.resume();
      sendJson(clientRes, 503, { error: 'no_target', message: 'every target is marked down or skipped' });
      return;
    }

    const exchange: Exchange = { clientReq, clientRes, upstream: undefined };
    exchanges.add(exchange);
    clientRes.once('close', () => {
      exchanges.delete(exchange);
      // The client went away (or we cut it): the upstream must see it too,
      // as it would behind a real balancer.
      if (!clientRes.writableFinished) exchange.upstream?.destroy();
    });

    const base = new URL(target);
    const upstream = httpRequest({
      host: base.hostname,
      port: base.port,
      method: clientReq.method,
      path: base.pathname.replace(/\/$/, '') + (clientReq.url ?? '/'),
      headers: forwardHeaders(clientReq.rawHeaders),
      // One upstream connection per request: nothing pooled outlives close().
      agent: false,
    });
    exchange.upstream = upstream;
    upstream.setNoDelay(true);

    upstream.on('response', (upRes) => {
      entry.status = upRes.statusCode;
      if (clientRes.destroyed) {
        upRes.destroy();
        return;
      }
      clientRes.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, forwardHeaders(upRes.rawHeaders));
      // Send the status line now: an SSE response may not write a byte for a while.
      clientRes.flushHeaders();
      // If the upstream dies mid-body, pipeline destroys clientRes, so the
      // client sees a broken stream, never a clean end it could mistake for
      // a complete one.
      pipeline(upRes, clientRes, () => undefined);
    });
    upstream.on('error', (err) => {
      if (!clientRes.headersSent && !clientRes.destroyed) {
        entry.status = 502;
        clientReq.resume();
        sendJson(clientRes, 502, { error: 'bad_gateway', target, message: err.message });
      } else {
        clientRes.destroy();
      }
    });
    pipeline(clientReq, upstream, (err) => {
      if (err !== undefined && err !== null) upstream.destroy();
    });
  };

  const server: Server = createServer({ noDelay: true }, handle);
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  // A bad request line from a test client: answer and drop that socket only.
  server.on('clientError', (_err, socket: Socket) => socket.destroy());

  await new Promise<void>((done, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port: opts.port ?? 0 }, () => {
      server.off('error', reject);
      done();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('round-robin proxy: no TCP address after listen');
  const port = address.port;

  const cutAll = (): number => {
    const cut = exchanges.size;
    for (const exchange of exchanges) {
      exchange.upstream?.destroy();
      exchange.clientRes.destroy();
    }
    exchanges.clear();
    for (const socket of sockets) socket.destroy();
    return cut;
  };

  return {
    url: `http://${LOOPBACK}:${port}`,
    port,
    get requests() {
      return requests;
    },
    get targets() {
      return [...rotation];
    },
    setTargets(newTargets) {
      rotation = normalizeTargets(newTargets);
      next = 0;
    },
    markDown(target) {
      down.add(normalizeTarget(target));
    },
    markUp(target) {
      down.delete(normalizeTarget(target));
    },
    cutAll,
    history: () => [...log],
    lastTargetOf(match) {
      for (let i = log.length - 1; i >= 0; i -= 1) {
        const entry = log[i];
        if (entry !== undefined && match(entry)) return entry.target;
      }
      return undefined;
    },
    close() {
      closing ??= new Promise<void>((done) => {
        server.close(() => done());
        cutAll();
      });
      return closing;
    },
  };
}

function normalizeTarget(target: string): string {
  const url = new URL(target);
  if (url.protocol !== 'http:') throw new Error(`round-robin proxy: only http targets are supported, got ${target}`);
  return `${url.origin}${url.pathname.replace(/\/$/, '')}`;
}

function normalizeTargets(targets: readonly string[]): string[] {
  return targets.map(normalizeTarget);
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * Raw headers as a flat `[name, value, ...]` list minus hop-by-hop ones (and
 * those named by `Connection`); duplicates, order and casing kept. Both
 * `http.request` and `writeHead` take this form.
 */
function forwardHeaders(raw: readonly string[]): string[] {
  const named = new Set<string>();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]?.toLowerCase() === 'connection') for (const token of raw[i + 1]?.split(',') ?? []) named.add(token.trim().toLowerCase());
  }
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i] ?? '';
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || named.has(lower)) continue;
    out.push(name, raw[i + 1] ?? '');
  }
  return out;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
