import type { Tracer } from '@opentelemetry/api';
import type { TetherMetrics } from '@tether/telemetry';
import type { Logger } from 'pino';
import type { Audit } from './audit.js';
import type { Authenticator } from './auth/authenticator.js';
import type { PresentedCredentials } from './auth/presented-credentials.js';
import type { ResourceMetadata } from './auth/resource-metadata.js';
import type { GatewayConfig, Route } from './config.js';
import type { LogPort } from './log/log-port.js';
import type { LocalRegistry } from './streams/local-registry.js';
import type { EdgeTasks } from './tasks/edge-tasks.js';
import type { WriterWatch } from './streams/writer-watch.js';
import type { UpstreamPicker } from './upstream.js';

/** What every handler needs; built once per gateway. */
export interface GatewayContext {
  readonly config: GatewayConfig;
  readonly log: LogPort;
  readonly logger: Logger;
  readonly local: LocalRegistry;
  /**
   * This process's writer id (random per start): stamped on every event it
   * appends, and the presence other instances probe (DESIGN section 6).
   */
  readonly writerId: string;
  /** Liveness of the writers elsewhere that this instance's readers depend on. */
  readonly writers: WriterWatch;
  readonly pickers: ReadonlyMap<string, UpstreamPicker>;
  /** True once SIGTERM started a drain: new work is refused with 503. */
  readonly draining: () => boolean;
  /** Spans of our own start with `tether.`/`mcp.`; no-ops unless the service started the SDK. */
  readonly tracer: Tracer;
  readonly metrics: TetherMetrics;
  /** Metadata-only audit events per session (no-ops with `--audit off`). */
  readonly audit: Audit;
  /** Who sent a request (`--auth`): the principal and what the upstream is told of it. */
  readonly authenticator: Authenticator;
  /** The newest credentials each principal presented here, per route: what the gateway's own upstream calls carry. */
  readonly credentials: PresentedCredentials;
  /** RFC 9728 documents and the 401/403/503 refusals; undefined with `--auth none`. */
  readonly resourceMetadata: ResourceMetadata | undefined;
  /** Durable tasks for 2026-07-28 clients; undefined with `--tasks off` or `--log grpc://`. Set once by `listen()`, before the first request. */
  tasks: EdgeTasks | undefined;
}

export interface RoutedRequest {
  readonly route: Route;
}

/** Session metadata keys the gateway stores in the registry. */
export const Meta = {
  route: 'route',
  upstream: 'upstream',
  upstreamSessionId: 'upstreamSessionId',
  protocolVersion: 'protocolVersion',
} as const;

/** Protocol versions from 2025-11-25 on get priming events and `retry:` (SEP-1699). */
export function wantsPriming(protocolVersion: string | undefined): boolean {
  return protocolVersion !== undefined && protocolVersion >= '2025-11-25';
}
