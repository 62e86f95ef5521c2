import type { Recorder } from './record.js';
import type { Rng } from '../shared/random.js';

/** The MCP routes of the chaos gateways: one upstream keeps an event store, the other does not. */
export const Routes = {
  /** Upstream with the SDK's InMemoryEventStore: a lost writer is resumed upstream (nested resume). */
  store: '/mcp',
  /** Upstream without an event store: a lost writer ends its stream as `abandoned`. */
  plain: '/plain/mcp',
} as const;
export type RouteName = keyof typeof Routes;

export const PROTOCOL_VERSION = '2025-11-25';

/** What the clients drive: the gateways in front of the test upstreams, or the SDK example's fleet. */
export interface TargetShape {
  /** The MCP path of each route on the balancer. */
  readonly paths: Readonly<Record<RouteName, string>>;
  /** The streaming tool: progress 1..count on the request's token, then its result. */
  readonly progressTool: string;
  /** Whether the server has `notify_standalone` (logging messages on the GET stream). */
  readonly standalone: boolean;
}

/** The gateways: `stream_progress` and `notify_standalone` of the test upstreams, on both routes. */
export const GATEWAY_TARGET: TargetShape = { paths: Routes, progressTool: 'stream_progress', standalone: true };
/** The SDK example (`examples/sdk-server`): `stream {count, delayMs}` at `/mcp`; nothing writes to its GET stream. */
export const SDK_EXAMPLE_TARGET: TargetShape = { paths: { store: '/mcp', plain: '/mcp' }, progressTool: 'stream', standalone: false };

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
  /** No new tool call starts after this time (ms since epoch). */
  readonly stopAt: number;
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

/** A tool call's arguments for this client's next call. */
export function progressArgs(rng: Rng, load: LoadShape): { count: number; delayMs: number } {
  return { count: rng.int(load.minEvents, load.maxEvents), delayMs: Math.max(MIN_DELAY_MS, rng.int(load.minDelayMs, load.maxDelayMs)) };
}
