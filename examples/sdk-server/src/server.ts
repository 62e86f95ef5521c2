import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { hostname } from 'node:os';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { createDurableTasks, createSessionRouter, createWriterPresence } from '@tether/sdk';
import type { SdkTransportClass } from '@tether/sdk';
import { SessionLog } from '@tether/session-log';
import { sessionTag } from '@tether/telemetry';
import type { createRootLogger } from '@tether/telemetry';
import { createBearerGate, createJwtVerifier, createResourceMetadata } from './auth.js';
import type { ExampleConfig } from './config.js';
import { buildServer } from './tools.js';

export interface SdkExample {
  readonly port: number;
  /** `http://<host>:<port>`; MCP at `${url}/mcp`. */
  readonly url: string;
  readonly instance: string;
  /** The nats-server's version, for the startup line. */
  readonly natsServer: string;
  /** The streams the session log is spread over, for the startup line. */
  readonly partitions: number;
  /** Stops accepting, drops this instance's local session state and presence, closes the NATS connection. Sessions live on in the registry. */
  close(): Promise<void>;
}

/**
 * One instance of the fleet: the three parts of `@tether/sdk` on one NATS
 * connection.
 *
 * 1. `createSessionRouter`: any instance serves any session; each POST goes
 *    to the SDK transport, whose every message is appended through a
 *    per-session `TetherEventStore` before its client sees it; GETs and
 *    resumes are served from the log.
 * 2. `createWriterPresence`: this process's liveness on NATS, so a reader
 *    elsewhere ends a stream this process was producing when it dies.
 * 3. `createDurableTasks`: the SDK's `TaskStore`/`TaskMessageQueue` on
 *    JetStream, one per principal (`session.principal`).
 *
 * With `--auth jwt`, `/mcp` sits behind the SDK's bearer check (`auth.ts`),
 * which puts the verified token on `req.auth`; the router binds each session
 * to that token's identity (`iss` and `sub`), so a refreshed token keeps its
 * sessions and tasks on every instance. The protected resource metadata
 * (RFC 9728) is served at its well-known paths.
 */
export async function startSdkExample(config: ExampleConfig, logger: ReturnType<typeof createRootLogger>): Promise<SdkExample> {
  const instance = config.instance === '' ? `${hostname()}-${process.pid}` : config.instance;
  // Every process of the deployment gives the same partition count; another is refused here (incompatible_log).
  const log = await SessionLog.create({ servers: config.nats.split(',').map((s) => s.trim()), partitions: config.logPartitions, placementTags: config.logPlacementTags });
  const tasks = await createDurableTasks({ nc: log.connection });
  const presence = createWriterPresence(log);
  const work = logger.child({ component: 'slow_task' });
  const router = createSessionRouter({
    log,
    presence,
    // v1's web-standard transport; v2's (`@modelcontextprotocol/server`) plugs in the same way.
    transport: WebStandardStreamableHTTPServerTransport as unknown as SdkTransportClass,
    createServer: (session) => buildServer(tasks.forPrincipal(session.principal), (err) => work.warn({ err: (err as Error).message }, 'task result not stored')),
    // No principalOf: the router's default. With --auth jwt every request carries `req.auth`, and its
    // identity (iss + sub) is the principal, never the token. With --auth none (a demo) there is none, and
    // the Authorization value, trusted as is, is the credential.
    retryIntervalMs: config.retryMs,
    writerWatch: { checkMs: config.writerCheckMs, silenceMs: config.writerSilenceMs },
  });
  const auth = config.auth;
  const metadata = auth.mode === 'jwt' ? createResourceMetadata(auth) : undefined;
  const authLog = logger.child({ component: 'auth' });
  const gate =
    auth.mode === 'jwt'
      ? createBearerGate({
          verifier: createJwtVerifier(auth),
          requiredScopes: auth.scopes,
          audience: auth.audience,
          onUnavailable: (err) => authLog.warn({ err: err.message }, 'issuer keys unavailable'),
        })
      : undefined;
  const serveMcp = async (req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse): Promise<void> => {
    if (gate !== undefined && !(await gate(req, res))) return;
    await router.node(req, res);
  };
  const http = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    if (metadata?.paths.has(path) === true) {
      metadata.serve(req, res);
      return;
    }
    if (path === '/healthz') {
      const up = !log.connection.isClosed();
      res.writeHead(up ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ status: up ? 'ok' : 'nats_closed', instance }));
      return;
    }
    if (path !== '/mcp') {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'not_found', message: 'MCP is served at /mcp' }));
      return;
    }
    serveMcp(req, res).catch((err: unknown) => {
      // Never the body or the session id: the error's message (the id, which a NATS subject in it may carry,
      // replaced by its tag) and code; the `sessionId` field is written as the tag by the root logger.
      const sessionId = req.headers['mcp-session-id'];
      const id = typeof sessionId === 'string' && sessionId !== '' ? sessionId : undefined;
      const message = String((err as Error).message);
      logger.error(
        { err: id === undefined ? message : message.replaceAll(id, sessionTag(id)), code: (err as { code?: unknown }).code, method: req.method, ...(id === undefined ? {} : { sessionId: id }) },
        'request failed',
      );
      if (!res.headersSent) res.writeHead(500).end();
      else res.destroy();
    });
  });
  const sockets = new Set<Socket>();
  http.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  const server: Server = http;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;
  let closing: Promise<void> | undefined;
  return {
    port,
    url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
    instance,
    natsServer: log.server.version,
    partitions: log.layout.partitions.length,
    close() {
      closing ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        await router.close();
        for (const socket of sockets) socket.destroy();
        await closed;
        await presence.close();
        await log.close();
      })();
      return closing;
    },
  };
}
