import type { DestinationStream } from 'pino';
import { createGateway, openLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { createRootLogger } from '@tether/telemetry';
import { getFreePort, startAuthorizationServer, startMcpUpstream, startNatsServer } from '@tether/testing';
import type { AuthorizationServer, McpUpstream, NatsServer } from '@tether/testing';
import { ANSWER_MS, healthz, OPEN_STREAM_READ_MS, sendBounded } from './gateway-stack.js';
import type { WireRequest, WireResponse } from './gateway-stack.js';

/**
 * A gateway on `--auth jwt` against a real issuer (oidc-provider from
 * `@tether/testing`), a real nats-server and the SDK upstream. The gateway
 * runs in this process, with the service's own root logger at `trace`
 * writing into an array: pino writes each line synchronously to such a
 * destination, so every line a request caused is there by the time its
 * answer arrived (a child process's stdout could still be in the pipe).
 */
export interface AuthGatewayStack {
  readonly nats: NatsServer;
  readonly upstream: McpUpstream;
  readonly issuer: AuthorizationServer;
  readonly gateway: Gateway;
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** `http://127.0.0.1:<port>/mcp`: the gateway's `--auth-audience`, the resource its tokens are issued for. */
  readonly audience: string;
  /** Every line the gateway logged, oldest first (pino JSON, level trace and up). */
  readonly logLines: readonly string[];
  /** A fresh access token from the issuer (client_credentials, for the gateway's resource). */
  mint(clientId: string): Promise<string>;
  send(req: WireRequest, openStreamReadMs?: number): Promise<WireResponse>;
  /** GET /healthz answers 200 within ANSWER_MS and the server still listens. */
  healthy(): Promise<{ ok: true } | { ok: false; why: string }>;
  /** Drains the gateway (throws if the drain fails), then stops the rest. */
  stop(): Promise<void>;
}

/** Long enough for any fuzz run: a token that expires mid-run would be refused for a reason the suite did not choose. */
const TOKEN_TTL_S = 6 * 3600;

export async function startAuthGatewayStack(): Promise<AuthGatewayStack> {
  // The audience is the gateway's own URL and tokens are issued for it, so
  // the port is picked before the gateway starts (not port 0).
  const port = await getFreePort();
  const audience = `http://127.0.0.1:${port}/mcp`;
  const nats = await startNatsServer();
  const upstream = await startMcpUpstream({ eventStore: true });
  const issuer = await startAuthorizationServer({ resources: [audience], accessTokenTtlSeconds: TOKEN_TTL_S });
  const logLines: string[] = [];
  const destination: DestinationStream = { write: (line: string) => void logLines.push(line) };
  let gateway: Gateway;
  try {
    const config = parseConfig(
      [
        '--port', String(port),
        '--nats', nats.url,
        '--upstream', upstream.url,
        '--instance-id', 'fuzz-auth',
        '--auth', 'jwt',
        '--auth-issuer', issuer.issuer,
        '--auth-audience', audience,
        '--auth-jwks-url', issuer.jwksUri,
      ],
      {},
    );
    gateway = createGateway(config, await openLog(config), createRootLogger('tether-gateway', { level: 'trace', pretty: false, destination }));
    await gateway.listen();
  } catch (err) {
    await Promise.allSettled([issuer.close(), upstream.close()]);
    await nats.cleanup();
    throw err;
  }
  const origin = `http://127.0.0.1:${port}`;
  return {
    nats,
    upstream,
    issuer,
    gateway,
    origin,
    audience,
    logLines,
    async mint(clientId) {
      return (await issuer.clientCredentials(clientId, { resource: audience })).access_token;
    },
    send: (req, openStreamReadMs = OPEN_STREAM_READ_MS) => sendBounded(origin, req, openStreamReadMs),
    async healthy() {
      if (!gateway.server.listening) return { ok: false, why: 'the gateway stopped listening' };
      return healthz(origin);
    },
    async stop() {
      try {
        await gateway.drain();
      } finally {
        await Promise.allSettled([issuer.close(), upstream.close()]);
        await nats.cleanup();
      }
    },
  };
}
