import type { Logger } from 'pino';
import type { GatewayConfig } from '../config.js';
import { createLocalLog } from './local-log.js';
import type { LogPort } from './log-port.js';

/**
 * The log the config asks for: JetStream in-process (default) or the
 * session-log service over gRPC, which reports to `logger` what the service
 * refused (audit events, as counts) and the address tether-admin drains
 * this instance by.
 */
export async function openLog(config: GatewayConfig, logger?: Pick<Logger, 'warn' | 'info'>): Promise<LogPort> {
  if (config.logUrl !== undefined) {
    // Loaded lazily so a NATS-mode gateway never loads the gRPC stack.
    const grpcModule = './grpc-log.js';
    const { createGrpcLog } = (await import(grpcModule)) as { createGrpcLog: (o: { target: string; token?: string; tls?: boolean; logger?: Pick<Logger, 'warn' | 'info'> }) => Promise<LogPort> };
    const url = new URL(config.logUrl);
    return createGrpcLog({
      target: url.host,
      tls: url.protocol === 'grpcs:',
      ...(config.logToken === undefined ? {} : { token: config.logToken }),
      ...(logger === undefined ? {} : { logger }),
    });
  }
  return createLocalLog({
    servers: config.natsUrl.split(','),
    // The namespace derives the subjects and buckets; the stream is named by the config (derived, or `--log-stream`).
    ...(config.namespace === '' ? {} : { namespace: config.namespace }),
    streamName: config.logStream,
    maxAgeMs: config.logMaxAgeMs,
    maxMsgsPerStream: config.logMaxMsgsPerStream,
    replicas: config.logReplicas,
    partitions: config.logPartitions,
    placementTags: config.logPlacementTags,
    sessionIdleMs: config.sessionIdleMs,
    maxSessionsPerPrincipal: config.maxSessionsPerPrincipal,
  });
}
