import { startMcpUpstream, startModernUpstream, type ModernUpstream } from '@tether/testing';
import { OrderedEventStore } from './event-store.js';
import { createConformanceServer } from './features.js';
import { createModernFixtures } from './modern-features.js';

/** The MCP server the conformance suite tests, directly and through a gateway. */
export interface ConformanceUpstream {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** Closes every session and connection, then the listener. Idempotent. */
  close(): Promise<void>;
}

export interface ConformanceUpstreamOptions {
  /** `retry:` hint on priming events (SEP-1699). Default 500. */
  retryIntervalMs?: number;
}

/**
 * Starts the test kit's stateful Streamable HTTP server (`startMcpUpstream`:
 * one SDK `StreamableHTTPServerTransport` and `McpServer` per session) on
 * 127.0.0.1 with a random port, serving the conformance features. Each
 * session has an event store that replays in order, so POST streams get
 * priming events and resume with `Last-Event-ID`. Requests whose `Host` or
 * `Origin` is not a loopback name get 403, as the dns-rebinding-protection
 * scenario requires of a local server.
 */
export function startConformanceUpstream(opts: ConformanceUpstreamOptions = {}): Promise<ConformanceUpstream> {
  return startMcpUpstream({
    createServer: createConformanceServer,
    eventStore: () => new OrderedEventStore(),
    retryIntervalMs: opts.retryIntervalMs ?? 500,
    loopbackOnly: true,
  });
}

/**
 * Starts the test kit's SDK v2 server (`startModernUpstream`: the SDK's own
 * `createMcpHandler` behind node:http, a fresh `McpServer` per request) on
 * 127.0.0.1 with a random port, serving the 2026-07-28 fixtures. The listen
 * streams (`subscriptions/listen`) and the trigger tools share one event bus.
 * It has no `Host`/`Origin` check: `createMcpHandler` leaves that to a
 * wrapper, and the test kit's has none (see expected-failures-2026-07-28.json).
 */
export function startModernConformanceUpstream(): Promise<ModernUpstream> {
  const fixtures = createModernFixtures();
  return startModernUpstream({ createServer: fixtures.createServer, handler: { bus: fixtures.bus } });
}
