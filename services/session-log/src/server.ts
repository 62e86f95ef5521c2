import { Server, ServerCredentials } from '@grpc/grpc-js';
import { loadFileDescriptorSetFromBuffer, loadSync } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import { CursorServiceService, descriptorSetBase64 } from '@tether/cursor-proto';
import { OperatorServiceService } from '@tether/cursor-proto/operator';
import { withSafeDecoding } from './decode.js';
import { SessionLog } from '@tether/session-log';
import type { SessionLogOptions } from '@tether/session-log';
import { createRootLogger, createTetherMetrics } from '@tether/telemetry';
import type { TetherMetrics } from '@tether/telemetry';
import { HealthImplementation, protoPath as healthProtoPath } from 'grpc-health-check';
import type { Logger } from 'pino';
import { Authenticator, authInterceptor, parseTokens } from './auth.js';
import { createHandlers } from './handlers.js';
import { createOperatorHandlers, serviceOperator } from './operator.js';
import { CURSOR_SERVICE } from './tracing.js';

/** TLS of the server: PEM text or bytes. With `clientCa`, clients must present a certificate it signed (mTLS). */
export interface ServiceTls {
  readonly cert: string | Uint8Array;
  readonly key: string | Uint8Array;
  readonly clientCa?: string | Uint8Array;
}

export interface SessionLogServiceOptions {
  /** Address to listen on. Default `127.0.0.1` (use `0.0.0.0` in a container). */
  readonly host?: string;
  /** Port; 0 picks a free one. Default 50051. */
  readonly port?: number;
  /** NATS server URL(s). Default `nats://127.0.0.1:4222`. */
  readonly nats?: string | readonly string[];
  /** Bearer tokens, `name:secret` or bare secrets (see `parseTokens`). Default none: every caller is `anonymous` unless mTLS is on. */
  readonly tokens?: readonly string[];
  /**
   * Operator tokens (`name:secret` or bare secrets), the only credentials the
   * operator API (operator.proto: what tether-inspect and tether-admin call
   * with `--log grpc://`) accepts. Default none: the operator API is off.
   */
  readonly operatorTokens?: readonly string[];
  /** TLS, optionally mTLS. Default plaintext. */
  readonly tls?: ServiceTls;
  /** Layout of the log on JetStream (stream, buckets, retention…); library defaults. */
  readonly log?: SessionLogOptions;
  /** Largest event payload accepted, bytes. Default 1 MiB - 4 KiB (the library's default). */
  readonly maxPayloadBytes?: number;
  /** Most entries in one AppendBatch. Default 1000. */
  readonly maxBatchEntries?: number;
  /** Largest request message, bytes (bounds an AppendBatch). Default 16 MiB. */
  readonly maxMessageBytes?: number;
  /** Resume, Follow, WatchControl and WatchAdmin streams one caller may hold open. Default 1000. */
  readonly maxStreamsPerCaller?: number;
  /** Open sessions per principal, across every instance sharing the log (OpenSession answers RESOURCE_EXHAUSTED `too_many_sessions` past it). 0: no limit. Default 0. */
  readonly maxSessionsPerPrincipal?: number;
  /** The instance named in the service's own audit events (`--instance-id`). Default `tether-session-log`. */
  readonly instanceId?: string;
  /**
   * The longest TTL a task record may have (`--task-ttl`): the task stream
   * keeps records this long plus 10 minutes. Give it at least the gateways'
   * `--task-ttl`. Default 1 h.
   */
  readonly taskTtlMs?: number;
  /** Root logger. Default: `createRootLogger('tether-session-log')` (JSON lines with trace ids). */
  readonly logger?: Logger;
  /**
   * Instruments: append latency, resumes by verdict, replay sizes, open
   * streams. Default `createTetherMetrics()`, which records nothing until a
   * meter provider is registered (`startTelemetry` in the bin).
   */
  readonly metrics?: TetherMetrics;
}

/** A running service. */
export interface SessionLogService {
  /** The port it listens on (useful with port 0). */
  readonly port: number;
  /** `host:port`, for clients. */
  readonly target: string;
  /** The session log it serves. */
  readonly log: SessionLog;
  /** Resume/Follow/WatchControl/WatchAdmin streams open now. */
  readonly openStreams: number;
  /** Stops accepting calls, lets running ones finish for `graceMs` (default 5000), then cancels the rest and closes NATS. */
  close(graceMs?: number): Promise<void>;
}

/** Connects to NATS, sets up the log, and serves the cursor API with health and reflection. */
export async function startSessionLogService(options: SessionLogServiceOptions = {}): Promise<SessionLogService> {
  const logger = options.logger ?? createRootLogger('tether-session-log');
  const maxPayloadBytes = options.maxPayloadBytes ?? 1024 * 1024 - 4096;
  const log = await SessionLog.create({ ...options.log, maxPayloadBytes, maxSessionsPerPrincipal: options.maxSessionsPerPrincipal ?? 0, servers: typeof options.nats === 'string' ? options.nats : [...(options.nats ?? ['nats://127.0.0.1:4222'])] });
  const auth = new Authenticator(parseTokens(options.tokens ?? []), options.tls?.clientCa !== undefined);
  const operator = await serviceOperator(log).catch(async (err: unknown) => {
    await log.close();
    throw err;
  });
  const operatorTokens = parseTokens(options.operatorTokens ?? []);
  const operatorAuth = operatorTokens.length === 0 ? undefined : new Authenticator(operatorTokens, false);
  const server = new Server({
    interceptors: [authInterceptor(auth, operatorAuth)],
    'grpc.max_receive_message_length': options.maxMessageBytes ?? 16 * 1024 * 1024,
  });
  const { implementation, limiter } = createHandlers(log, auth, logger.child({ component: 'cursor' }), {
    maxPayloadBytes,
    maxBatchEntries: options.maxBatchEntries ?? 1000,
    maxStreamsPerCaller: options.maxStreamsPerCaller ?? 1000,
    ...(options.instanceId === undefined ? {} : { instanceId: options.instanceId }),
    ...(options.taskTtlMs === undefined ? {} : { taskTtlMs: options.taskTtlMs }),
    metrics: options.metrics ?? createTetherMetrics(),
  });
  server.addService(withSafeDecoding(CursorServiceService), implementation);
  // Always served, so a call without operator tokens configured is told `operator_api_off`, not UNIMPLEMENTED.
  server.addService(withSafeDecoding(OperatorServiceService), createOperatorHandlers(operator, logger.child({ component: 'operator' })));

  const health = new HealthImplementation({ '': 'SERVING', [CURSOR_SERVICE]: 'SERVING' });
  health.addToServer(server);
  void watchNats(log, (serving) => {
    for (const name of ['', CURSOR_SERVICE]) health.setStatus(name, serving ? 'SERVING' : 'NOT_SERVING');
    logger.info({ serving }, serving ? 'nats connection up' : 'nats connection down');
  });

  // Reflection serves our descriptor set (with comments) and the health
  // service's, so `grpcurl list` / `describe` work with no proto files.
  const definitions = { ...loadFileDescriptorSetFromBuffer(Buffer.from(descriptorSetBase64, 'base64')), ...loadSync(healthProtoPath) };
  new ReflectionService(definitions as ConstructorParameters<typeof ReflectionService>[0]).addToServer(server);

  const host = options.host ?? '127.0.0.1';
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      server.bindAsync(`${host.includes(':') ? `[${host}]` : host}:${options.port ?? 50051}`, credentialsOf(options.tls), (err, bound) => (err === null ? resolve(bound) : reject(err)));
    });
  } catch (err) {
    await log.close();
    throw err;
  }
  const { version: natsServer } = log.server;
  const partitions = log.layout.partitions.length;
  logger.info({ host, port, tls: options.tls !== undefined, mtls: options.tls?.clientCa !== undefined, tokens: (options.tokens ?? []).length, operatorTokens: operatorTokens.length, partitions, natsServer }, 'listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    target: `${host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host}:${port}`,
    log,
    get openStreams() {
      return limiter.total;
    },
    close(graceMs = 5_000) {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            server.forceShutdown();
            resolve();
          }, graceMs);
          server.tryShutdown(() => {
            clearTimeout(timer);
            resolve();
          });
        });
        await log.close();
      })();
      return closing;
    },
  };
}

function credentialsOf(tls: ServiceTls | undefined): ServerCredentials {
  if (tls === undefined) return ServerCredentials.createInsecure();
  const ca = tls.clientCa === undefined ? null : Buffer.from(tls.clientCa);
  return ServerCredentials.createSsl(ca, [{ private_key: Buffer.from(tls.key), cert_chain: Buffer.from(tls.cert) }], ca !== null);
}

/** Reports NATS connectivity (health: NOT_SERVING while the log cannot be reached). */
async function watchNats(log: SessionLog, report: (serving: boolean) => void): Promise<void> {
  for await (const s of log.connection.status()) {
    if (s.type === 'disconnect') report(false);
    else if (s.type === 'reconnect') report(true);
  }
}
