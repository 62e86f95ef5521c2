import type { DestinationStream } from 'pino';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { createRootLogger } from '@tether/telemetry';
import { getFreePort, startAuthorizationServer, startMcpUpstream, startNatsServer } from '@tether/testing';
import type { AuthorizationServer, McpUpstream, NatsServer, UpstreamRequest } from '@tether/testing';
import { healthz, OPEN_STREAM_READ_MS } from './gateway-stack.js';
import type { WireResponse } from './gateway-stack.js';
import { sendRaw } from './raw-request.js';
import type { RawRequest } from './raw-request.js';

/** The stack's two routes: `mcp` (the default route, `--upstream-auth` strip) and `b` (`/b=forward`). */
export const ROUTES = ['mcp', 'b'] as const;
export type RouteName = (typeof ROUTES)[number];

/** One route of the stack: its own upstream, its own protected resource. */
export interface StackRoute {
  readonly name: RouteName;
  /** `/mcp` or `/b`. */
  readonly path: string;
  /** `http://127.0.0.1:<port><path>`: the route's `--auth-audience`, the resource its tokens are issued for. */
  readonly audience: string;
  /** `<origin>/.well-known/oauth-protected-resource<path>`: what a 401 on the route points at. */
  readonly metadataUrl: string;
  readonly upstreamAuth: 'strip' | 'forward';
  readonly upstream: McpUpstream;
}

/**
 * A gateway on `--auth jwt` against a real issuer (oidc-provider from
 * `@tether/testing`), a real nats-server and two SDK upstreams, one per
 * route: `/mcp` strips the caller's token (the default), `/b` forwards it;
 * each route is its own protected resource (`--auth-audience` per route),
 * and the issuer mints tokens for either. The gateway runs in this process,
 * with the service's own root logger at `trace` writing into an array: pino
 * writes each line synchronously to such a destination, so every line a
 * request caused is there by the time its answer arrived (a child process's
 * stdout could still be in the pipe).
 */
export interface AuthGatewayStack {
  readonly nats: NatsServer;
  readonly issuer: AuthorizationServer;
  readonly gateway: Gateway;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  readonly routes: Readonly<Record<RouteName, StackRoute>>;
  /** The gateway's `--max-header-bytes` (its default, 16 KiB). */
  readonly maxHeaderBytes: number;
  /** Every line the gateway logged, oldest first (pino JSON, level trace and up). */
  readonly logLines: readonly string[];
  /** A fresh access token from the issuer (client_credentials) for `route`'s resource. */
  mint(clientId: string, route: RouteName): Promise<string>;
  send(req: RawRequest, openStreamReadMs?: number): Promise<WireResponse>;
  /** The newest `seq` each upstream has received: a mark for `upstreamSince`. */
  upstreamMark(): Readonly<Record<RouteName, number>>;
  /** What each upstream received after `mark`. */
  upstreamSince(mark: Readonly<Record<RouteName, number>>): Readonly<Record<RouteName, readonly UpstreamRequest[]>>;
  /** GET /healthz answers 200 within ANSWER_MS and the server still listens. */
  healthy(): Promise<{ ok: true } | { ok: false; why: string }>;
  /** Drains the gateway (throws if the drain fails), then stops the rest. */
  stop(): Promise<void>;
}

/** Long enough for any fuzz run: a token that expires mid-run would be refused for a reason the suite did not choose. */
const TOKEN_TTL_S = 6 * 3600;
const MAX_HEADER_BYTES = 16 * 1024;
const PRM_PREFIX = '/.well-known/oauth-protected-resource';

export async function startAuthGatewayStack(): Promise<AuthGatewayStack> {
  // The audiences are the gateway's own URLs and tokens are issued for them,
  // so the port is picked before the gateway starts (not port 0).
  const port = await getFreePort();
  const origin = `http://127.0.0.1:${port}`;
  const nats = await startNatsServer();
  const [upstreamMcp, upstreamB] = await Promise.all([startMcpUpstream({ eventStore: true }), startMcpUpstream({ eventStore: true })]);
  const route = (name: RouteName, upstreamAuth: StackRoute['upstreamAuth'], upstream: McpUpstream): StackRoute => ({
    name,
    path: `/${name}`,
    audience: `${origin}/${name}`,
    metadataUrl: `${origin}${PRM_PREFIX}/${name}`,
    upstreamAuth,
    upstream,
  });
  const routes = { mcp: route('mcp', 'strip', upstreamMcp), b: route('b', 'forward', upstreamB) } as const;
  const issuer = await startAuthorizationServer({ resources: ROUTES.map((r) => routes[r].audience), accessTokenTtlSeconds: TOKEN_TTL_S });
  const logLines: string[] = [];
  const destination: DestinationStream = { write: (line: string) => void logLines.push(line) };
  let gateway: Gateway;
  try {
    const config = parseConfig(
      [
        '--port', String(port),
        '--nats', nats.url,
        '--upstream', upstreamMcp.url,
        '--route', `/b=${upstreamB.url}`,
        '--instance-id', 'fuzz-auth',
        '--max-header-bytes', String(MAX_HEADER_BYTES),
        '--auth', 'jwt',
        '--auth-issuer', issuer.issuer,
        '--auth-audience', routes.mcp.audience,
        '--auth-audience', `/b=${routes.b.audience}`,
        '--upstream-auth', '/b=forward',
        '--auth-jwks-url', issuer.jwksUri,
      ],
      {},
    );
    gateway = createGateway(config, await openLog(config), createRootLogger('tether-gateway', { level: 'trace', pretty: false, destination }));
    await gateway.listen();
  } catch (err) {
    await Promise.allSettled([issuer.close(), upstreamMcp.close(), upstreamB.close()]);
    await nats.cleanup();
    throw err;
  }
  const newest = (u: McpUpstream): number => u.requests().at(-1)?.seq ?? 0;
  return {
    nats,
    issuer,
    gateway,
    origin,
    routes,
    maxHeaderBytes: MAX_HEADER_BYTES,
    logLines,
    async mint(clientId, name) {
      return (await issuer.clientCredentials(clientId, { resource: routes[name].audience })).access_token;
    },
    send: (req, openStreamReadMs = OPEN_STREAM_READ_MS) => sendRaw(origin, req, openStreamReadMs),
    upstreamMark: () => ({ mcp: newest(upstreamMcp), b: newest(upstreamB) }),
    upstreamSince: (mark) => ({ mcp: upstreamMcp.requests().filter((r) => r.seq > mark.mcp), b: upstreamB.requests().filter((r) => r.seq > mark.b) }),
    async healthy() {
      if (!gateway.server.listening) return { ok: false, why: 'the gateway stopped listening' };
      return healthz(origin);
    },
    async stop() {
      try {
        await gateway.drain();
      } finally {
        await Promise.allSettled([issuer.close(), upstreamMcp.close(), upstreamB.close()]);
        await nats.cleanup();
      }
    },
  };
}
