import type { Recorder } from './record.js';
import type { Rng } from '../shared/random.js';
import { EVERYTHING_TOOL, KIT_TOOL, SDK_EXAMPLE_TOOL, V2_TOOL } from './tools.js';
import type { ProgressTool } from './tools.js';

/**
 * The MCP routes of the chaos gateways: the test kit's upstream with an
 * event store and without one, and with `--upstreams` the reference server
 * and an SDK v2 server (`stack.ts` starts what a run asks for).
 */
export const Routes = {
  /** Upstream with the SDK's InMemoryEventStore: a lost writer is resumed upstream (nested resume). */
  store: '/mcp',
  /** Upstream without an event store: a lost writer ends its stream as `abandoned`. */
  plain: '/plain/mcp',
  /** `@modelcontextprotocol/server-everything` (SDK v1, sessions, its own per-session event store). */
  everything: '/everything/mcp',
  /** An SDK v2 `createMcpHandler` server: stateless in both eras, no event ids (a lost writer ends `abandoned`). */
  v2: '/v2/mcp',
} as const;
export type RouteName = keyof typeof Routes;

export const PROTOCOL_VERSION = '2025-11-25';
/** The stateless revision: a request carries its version and client in `_meta`, and its method and name in headers. */
export const STATELESS_PROTOCOL_VERSION = '2026-07-28';

/** A 2026-07-28 `tools/call`'s body: its version, client and progress token (`<client>.<id>`) in `_meta`. */
export function statelessCallBody(client: string, id: number, tool: string, args: Record<string, number>): string {
  const meta = {
    progressToken: `${client}.${id}`,
    'io.modelcontextprotocol/protocolVersion': STATELESS_PROTOCOL_VERSION,
    'io.modelcontextprotocol/clientInfo': { name: client, version: '0' },
    'io.modelcontextprotocol/clientCapabilities': {},
  };
  return JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args, _meta: meta } });
}

/** Its headers beside content type and accept: the version, and the method and tool for routing. */
export function statelessCallHeaders(tool: string): Record<string, string> {
  return { 'mcp-protocol-version': STATELESS_PROTOCOL_VERSION, 'mcp-method': 'tools/call', 'mcp-name': tool };
}

/** One route as its clients see it. */
export interface RouteShape {
  /** Its MCP path on the balancer. */
  readonly path: string;
  /** Its streaming tool (progress 1..count on the request's token, then its result). */
  readonly tool: ProgressTool;
  /** Whether its server has `notify_standalone` (logging messages on the GET stream). */
  readonly standalone: boolean;
  /**
   * The chance that a raw client's call is a 2026-07-28 one instead: no
   * session, passed through by the gateways (nothing logged, nothing to
   * resume), read whole. Only for a server that speaks that era (the v2 one).
   */
  readonly statelessChance?: number;
}

/** What the clients drive: the gateways in front of the upstreams, or the SDK example's fleet. */
export interface TargetShape {
  /** The routes a run has; a client is put on one of them. */
  readonly routes: Readonly<Partial<Record<RouteName, RouteShape>>>;
}

/** The gateways: each route's upstream and its tool (`notify_standalone` on the test kit's only). */
export const GATEWAY_TARGET: TargetShape = {
  routes: {
    store: { path: Routes.store, tool: KIT_TOOL, standalone: true },
    plain: { path: Routes.plain, tool: KIT_TOOL, standalone: true },
    everything: { path: Routes.everything, tool: EVERYTHING_TOOL, standalone: false },
    v2: { path: Routes.v2, tool: V2_TOOL, standalone: false, statelessChance: 0.25 },
  },
};
/** The SDK example (`examples/sdk-server`): `stream {count, delayMs}` at `/mcp`; nothing writes to its GET stream. */
export const SDK_EXAMPLE_TARGET: TargetShape = { routes: { store: { path: '/mcp', tool: SDK_EXAMPLE_TOOL, standalone: false } } };

/** The shape of `route` in `target`. @throws Error when the target has no such route (a harness bug). */
export function routeShape(target: TargetShape, route: RouteName): RouteShape {
  const shape = target.routes[route];
  if (shape === undefined) throw new Error(`chaos: the target has no route ${route}`);
  return shape;
}

/**
 * Producer pacing of the `stream_progress` tool. At least 2 ms: the SDK's
 * example InMemoryEventStore orders events by `Date.now()` as text, so two
 * events stored in the same millisecond can replay reordered (a known
 * upstream bug, docs/design.md), which is not Tether's to answer for.
 */
export const MIN_DELAY_MS = 2;

/** Slow consumption: one event per this many producer intervals (DESIGN section 12's 1/20 rate). */
export const SLOW_FACTOR = 20;

/** What every client of a run shares. */
export interface ClientContext {
  /** The balancer, `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  readonly recorder: Recorder;
  /** No new tool call starts after this time (ms since epoch). The run may move it later, never earlier, until every first-pass fault has fired. */
  stopAt: number;
  /** Aborted when the run ends for good: every request is abandoned. */
  readonly hardStop: AbortSignal;
  /** Streams each client must consume slowly, set by the `slow_client` fault. */
  readonly slowStreams: Map<string, number>;
  /** Shape of the load. */
  readonly load: LoadShape;
  /** Paths and tools of what runs behind the balancer. */
  readonly target: TargetShape;
}

/** Knobs of the client load; `defaultLoad` is what the CLI uses. */
export interface LoadShape {
  /** `stream_progress` counts, inclusive. */
  readonly minEvents: number;
  readonly maxEvents: number;
  /** Producer delay between events, inclusive (>= MIN_DELAY_MS). */
  readonly minDelayMs: number;
  readonly maxDelayMs: number;
  /** Chance that a response is cut by the client at a random point. */
  readonly cutChance: number;
  /** Chance that a resume uses an older delivered id than the last one. */
  readonly olderCursorChance: number;
  /** Pause between tool calls of one client. */
  readonly thinkMs: number;
  /** A call's own deadline (SDK request timeout, raw client patience). */
  readonly callTimeoutMs: number;
}

export const defaultLoad: LoadShape = {
  minEvents: 10,
  maxEvents: 80,
  minDelayMs: MIN_DELAY_MS,
  maxDelayMs: 5,
  cutChance: 0.7,
  olderCursorChance: 0.15,
  thinkMs: 20,
  callTimeoutMs: 45_000,
};

/** Takes one slow stream from the client's allowance, if it has any. */
export function takeSlow(ctx: ClientContext, client: string): boolean {
  const left = ctx.slowStreams.get(client) ?? 0;
  if (left <= 0) return false;
  ctx.slowStreams.set(client, left - 1);
  ctx.recorder.fault('slow_stream');
  return true;
}

/** The count and pace of this client's next call (each route's tool makes its arguments from them). */
export function progressArgs(rng: Rng, load: LoadShape): { count: number; delayMs: number } {
  return { count: rng.int(load.minEvents, load.maxEvents), delayMs: Math.max(MIN_DELAY_MS, rng.int(load.minDelayMs, load.maxDelayMs)) };
}
