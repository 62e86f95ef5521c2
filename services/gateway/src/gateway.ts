import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { createTetherMetrics } from '@tether/telemetry';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import { AuditKind, principalTag } from '@tether/session-log';
import { createAudit } from './audit.js';
import { isAuthError } from './auth/auth-error.js';
import { createAuthenticator } from './auth/authenticator.js';
import type { Caller } from './auth/authenticator.js';
import { PresentedCredentials } from './auth/presented-credentials.js';
import { createResourceMetadata, serveMetadata } from './auth/resource-metadata.js';
import type { GatewayConfig } from './config.js';
import type { GatewayContext } from './context.js';
import { handleDelete } from './handlers/delete.js';
import { handleGet } from './handlers/get.js';
import { handlePost } from './handlers/post.js';
import { GatewayErrorCode, replyError } from './http/reply.js';
import { originAllowed } from './http/request.js';
import { startRequestSpan } from './http/tracing.js';
import type { LogPort } from './log/log-port.js';
import { newWriterId } from '@tether/session-log';
import { LocalRegistry } from './streams/local-registry.js';
import { WriterWatch } from './streams/writer-watch.js';
import { EdgeTasks } from './tasks/edge-tasks.js';
import { TaskSweeper } from './tasks/sweeper.js';
import { closeUpstreamPool, labelUpstreams, UpstreamPicker } from './upstream.js';

export interface Gateway {
  readonly server: Server;
  /** Listens on the configured host and port; resolves with the bound port. */
  listen(): Promise<number>;
  /**
   * SIGTERM drain (DESIGN section 9): refuse new work, end client streams
   * with a retry hint so clients resume on other instances, let POST pumps
   * finish into the log until the timeout, let go of the rest (control
   * `released`, then the presence goes), then close.
   */
  drain(): Promise<void>;
  /** Immediate stop (tests): aborts everything, closes the log. */
  close(): Promise<void>;
  /**
   * Settles when a drain has finished, whoever started it (SIGTERM, or
   * tether-admin's `drain <instance>` on `<prefix>.admin.<instance>`): the
   * process may exit then.
   */
  readonly drained: Promise<void>;
}

/**
 * `metrics` default to instruments from the global meter provider: create the
 * gateway after `startTelemetry()` so they export.
 */
export function createGateway(config: GatewayConfig, log: LogPort, logger: Logger, metrics: TetherMetrics = createTetherMetrics()): Gateway {
  let draining = false;
  const writerId = newWriterId();
  labelUpstreams(config.routes);
  const writers = new WriterWatch(writerId, (writer) => log.probeWriter(writer, undefined, undefined, Math.min(250, config.writerCheckMs)), config.writerCheckMs, config.writerSilenceMs, logger.child({ component: 'writers' }));
  const local = new LocalRegistry(
    log,
    (delta) => metrics.sessionsOpen.add(delta),
    (sessionId, stream) => writers.released(sessionId, stream),
  );
  // One subscription for the whole process: probes of our writer id are answered from the pumps we run.
  const presence = log.holdPresence(writerId, (sessionId, stream) => local.writes(sessionId, stream));
  logger.info({ instance: config.instanceId, writer: writerId }, 'writer presence held');
  const ctx: GatewayContext = {
    config,
    log,
    logger,
    local,
    writerId,
    writers,
    pickers: new Map(config.routes.map((r) => [r.path, new UpstreamPicker(r.upstreams)])),
    draining: () => draining,
    tracer: trace.getTracer('tether-gateway'),
    metrics,
    audit: createAudit(log, config.instanceId, config.audit),
    authenticator: createAuthenticator(config.auth),
    credentials: new PresentedCredentials(),
    resourceMetadata: createResourceMetadata(config.auth),
    tasks: undefined,
  };
  const authLogger = logger.child({ component: 'auth' });
  let markDrained: () => void = () => undefined;
  const drained = new Promise<void>((resolve) => (markDrained = resolve));
  // tether-admin's `drain <instance>`: the same drain as SIGTERM, answered once it has begun.
  const stopAdmin = log.listenAdmin(config.instanceId, (request, reply) => {
    logger.info({ from: request.from ?? null }, 'drain requested');
    reply({ ok: true, instance: config.instanceId, detail: draining ? 'already draining' : 'draining' });
    void gateway.drain().catch((err: unknown) => logger.error({ err: (err as Error).message }, 'drain failed'));
  });

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (path === '/healthz') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    if (path === '/readyz') {
      const ready = !draining && (await log.ready().catch(() => false));
      const state = ready ? 'ready' : draining ? 'draining' : 'log unavailable';
      return void res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(readyText(state, log));
    }
    const metadata = ctx.resourceMetadata?.documentAt(path);
    if (metadata !== undefined) return serveMetadata(res, req.method, metadata);
    const route = config.routes.find((r) => r.path === path);
    if (route === undefined) return replyError(res, { status: 404, code: GatewayErrorCode.transport, message: `no MCP route at ${path.slice(0, 200)}` });
    if (draining) return replyError(res, { status: 503, code: GatewayErrorCode.unavailable, message: 'gateway instance is draining; retry', headers: { 'retry-after': '0', connection: 'close' } });
    if (!originAllowed(req, config.allowedOrigins)) return replyError(res, { status: 403, code: GatewayErrorCode.transport, message: 'Forbidden: Origin not allowed' });
    let caller: Caller;
    try {
      caller = await ctx.authenticator.authenticate(req, route.path);
    } catch (err) {
      if (!isAuthError(err)) throw err;
      if (ctx.resourceMetadata === undefined) return replyError(res, { status: 400, code: GatewayErrorCode.invalidRequest, message: `Bad Request: ${err.description}` });
      // The reason only: never the token, a claim's value or the header.
      ctx.metrics.authRefusals.add(1, { reason: err.reason });
      if (err.code === 'issuer_unavailable') authLogger.warn({ reason: err.reason, detail: err.description }, 'issuer unavailable');
      // The deployment's to fix (the issuer's policy for the gateway's client): the description holds the issuer's error code only.
      else if (err.code === 'exchange_refused') authLogger.warn({ route: route.path, detail: err.description }, 'token exchange refused');
      else authLogger.debug({ reason: err.reason, code: err.code }, 'request refused');
      return replyError(res, ctx.resourceMetadata.refusal(err, route.path));
    }
    ctx.credentials.present(caller);
    const traced = startRequestSpan(ctx, req, res, route.path);
    // Who, for dashboards: the principal's tag (never the digest, the token or a claim).
    if (traced.span.isRecording()) traced.span.setAttribute('tether.principal', principalTag(caller.principal));
    return context.with(traced.ctx, () => dispatch(route, caller, req, res));
  };

  const dispatch = (route: GatewayConfig['routes'][number], caller: Caller, req: IncomingMessage, res: ServerResponse): Promise<void> => {
    switch (req.method) {
      case 'POST':
        return handlePost(ctx, route, caller, req, res);
      case 'GET':
        return handleGet(ctx, route, caller, req, res);
      case 'DELETE':
        return handleDelete(ctx, route, caller, req, res);
      default:
        replyError(res, { status: 405, code: GatewayErrorCode.transport, message: `Method Not Allowed: ${String(req.method).slice(0, 16)}`, headers: { allow: 'GET, POST, DELETE' } });
        return Promise.resolve();
    }
  };

  const server = createServer({ maxHeaderSize: config.maxHeaderBytes, requestTimeout: 0 }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      logger.error({ err: (err as Error).message, code: (err as { code?: string }).code, method: req.method }, 'request failed');
      replyError(res, { status: 500, code: GatewayErrorCode.transport, message: 'internal gateway error' });
    });
  });
  // Longer than the keep-alive of balancers in front (nginx, ingress-nginx,
  // cloud LBs: 60 s), so the gateway never closes an idle connection that a
  // balancer is about to reuse for a POST it cannot retry (a 502).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.on('clientError', (err, socket) => {
    const code = (err as { code?: string }).code;
    // A client that went away (reset or closed its socket) sent nothing wrong:
    // there is nobody to answer, and no warning to give (the chaos run's cut
    // connections made 7,500 "malformed" warnings of these).
    if (code === 'ECONNRESET' || code === 'EPIPE') return void socket.destroy();
    // Malformed requests and oversized headers never reach a handler: answer
    // them here with the same JSON-RPC error shape, and keep serving.
    const tooLarge = code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const message = tooLarge ? `request headers exceed the limit of ${config.maxHeaderBytes} bytes` : `malformed HTTP request (${String(code ?? 'parse error')})`;
    logger.warn({ code, status }, 'malformed HTTP request');
    if (!socket.writable) return void socket.destroy();
    const body = JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: tooLarge ? GatewayErrorCode.tooLarge : GatewayErrorCode.invalidRequest, message } });
    socket.end(
      `HTTP/1.1 ${status} ${tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
        `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });

  const stopWriters = async (timeoutMs: number): Promise<void> => {
    // GET listeners stop at once: the next reader on another instance claims
    // the stream and resumes the upstream from the last recorded id. POST pumps
    // may finish their streams until the timeout, including pumps that
    // started after the drain began (their POST was already waiting on the
    // upstream); whatever is left then is stopped and taken over elsewhere.
    const deadline = Date.now() + timeoutMs;
    while (local.writers.length > 0 && Date.now() < deadline) {
      for (const w of local.writers) if (w.stream === '0') w.abort.abort('stopped');
      const timer = new Promise((resolve) => setTimeout(resolve, deadline - Date.now()).unref());
      await Promise.race([Promise.allSettled(local.writers.map((w) => w.done)), timer]);
    }
    for (const w of local.writers) w.abort.abort('stopped');
    await Promise.race([Promise.allSettled(local.writers.map((w) => w.done)), new Promise((resolve) => setTimeout(resolve, 1_000).unref())]);
  };

  let sweeper: TaskSweeper | undefined;
  const gateway: Gateway = {
    server,
    drained,
    listen: async () => {
      ctx.tasks = await openTasks(config, log, writerId, logger, metrics);
      sweeper = await startSweeper(config, ctx.tasks, logger);
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(config.port, config.host, () => {
          server.off('error', reject);
          resolve((server.address() as AddressInfo).port);
        });
      });
    },
    async drain() {
      if (draining) return;
      draining = true;
      logger.info({ deliveries: local.openDeliveries, writers: local.writers.length, timeoutMs: config.drainTimeoutMs }, 'draining');
      server.close();
      stopAdmin();
      for (const d of local.deliveries) {
        ctx.audit.record(d.sessionId, { kind: AuditKind.drain, stream: d.stream });
        d.abort.abort('drain');
      }
      await sweeper?.stop();
      // Task calls and POST pumps finish within the same drain timeout, side by side.
      await Promise.all([stopWriters(config.drainTimeoutMs), ctx.tasks?.drain(config.drainTimeoutMs)]);
      // Pumps are stopped and their streams released: from now on probes of
      // this writer get "no responders" and every reader takes over at once.
      await presence.close();
      writers.close();
      server.closeAllConnections();
      await closeUpstreamPool();
      await log.close();
      logger.info({}, 'drained');
      markDrained();
    },
    async close() {
      draining = true;
      stopAdmin();
      for (const d of local.deliveries) d.abort.abort('closed');
      await sweeper?.stop();
      await Promise.all([stopWriters(0), ctx.tasks?.drain(0)]);
      await presence.close();
      writers.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await closeUpstreamPool();
      await log.close();
    },
  };
  return gateway;
}

/**
 * The task table and the tasks service, when tasks are on: in-process on
 * JetStream, or over the session-log service's task RPCs (`--log grpc://`).
 * A log without a task table (none today) serves none, logged.
 */
async function openTasks(config: GatewayConfig, log: LogPort, writerId: string, logger: Logger, metrics: TetherMetrics): Promise<EdgeTasks | undefined> {
  if (!config.tasks.enabled) return undefined;
  if (log.openTasks === undefined) {
    logger.warn({ log: log.describe }, 'this log has no task table: the gateway serves no tasks and passes tasks/* through');
    return undefined;
  }
  const table = await log.openTasks(config.tasks.ttlMs);
  // Every task's notifications are recorded (in-process); `tasks/stream` serves them only with --experimental-task-streams.
  const events = log.openTaskEvents !== undefined ? await log.openTaskEvents(config.tasks.ttlMs, config.tasks.maxEventsPerTask) : undefined;
  return new EdgeTasks({
    ...(events === undefined ? {} : { events }),
    config: config.tasks,
    table,
    writerId,
    instanceId: config.instanceId,
    routes: config.routes,
    probe: (writer) => log.probeWriter(writer, undefined, undefined, 250),
    logger: logger.child({ component: 'tasks' }),
    metrics,
    tracer: trace.getTracer('tether-gateway'),
  });
}

/**
 * The sweeper of tasks whose runner died (`--task-sweep-interval`, 0: none).
 * One that cannot start (its index cannot be opened) leaves the gateway
 * serving: readers still settle such tasks.
 */
async function startSweeper(config: GatewayConfig, tasks: EdgeTasks | undefined, logger: Logger): Promise<TaskSweeper | undefined> {
  if (tasks === undefined || config.tasks.sweepIntervalMs === 0) return undefined;
  const sweepLogger = logger.child({ component: 'task-sweeper' });
  try {
    return await TaskSweeper.start({ tasks, table: tasks.table, intervalMs: config.tasks.sweepIntervalMs, logger: sweepLogger });
  } catch (err) {
    sweepLogger.warn({ err: String(err) }, 'task sweeper not started: tasks whose gateway died are settled only when read');
    return undefined;
  }
}

/**
 * The /readyz body: its state on the first line (what probes read), then
 * the log and, in-process, its partition count and the nats-server version,
 * so an operator sees at a glance which layout and server an instance runs.
 */
function readyText(state: string, log: LogPort): string {
  const lines = [state, `log: ${log.describe}`];
  if (log.partitions !== undefined) lines.push(`partitions: ${log.partitions}`);
  const server = log.server();
  if (server !== undefined) lines.push(`nats-server: ${server.version}`);
  return `${lines.join('\n')}\n`;
}
