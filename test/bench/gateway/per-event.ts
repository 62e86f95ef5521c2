/**
 * Figure 2: latency added per logged SSE event. A `stream_progress` call
 * with 1 and with 200 events (delayMs 0), through the gateway, direct and
 * (when there is one) through nginx, repeated; each repeat runs every call
 * back to back, so `((gw200 - gw1) - (direct200 - direct1)) / 199` is taken
 * within one repeat and the p50 is over repeats. Times are to the JSON-RPC
 * response, which comes after the last progress event.
 */
import { median } from '../stats.js';
import { withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { createEndpoint, initialize, streamProgress } from './raw-mcp.js';
import type { Endpoint } from './raw-mcp.js';
import { summarize95 } from './summary.js';
import type { Summary95 } from './summary.js';

/** One side's two sizes. */
export interface PerEventSide {
  readonly small: Summary95;
  readonly large: Summary95;
  /** p50 over repeats of (large - small) / (L - S): the side's own cost per event, ms. */
  readonly perEventMs: number;
}

export interface PerEventResult {
  readonly small: number;
  readonly large: number;
  readonly repeats: number;
  readonly gatewaySmall: Summary95;
  readonly gatewayLarge: Summary95;
  readonly directSmall: Summary95;
  readonly directLarge: Summary95;
  /** Per repeat: ((gwL - gwS) - (dL - dS)) / (L - S), ms. */
  readonly addedPerEventMs: Summary95;
  /** The same from the four medians (a cross-check). */
  readonly addedPerEventFromMediansMs: number;
  /** p50 of (gwL - gwS) / (L - S) and of (dL - dS) / (L - S): each side's own cost per event. */
  readonly gatewayPerEventMs: number;
  readonly directPerEventMs: number;
  /** The same upstream through nginx; undefined without nginx. */
  readonly nginx: (PerEventSide & { readonly addedPerEventMs: Summary95 }) | undefined;
  /** Cores used by everything else on the machine meanwhile. */
  readonly otherCores: number;
  /** Gateway CPU ms per call (over every measured call of both sizes). */
  readonly gatewayCpuMsPerCall: number;
}

export interface PerEventOptions {
  readonly gatewayUrl: string;
  readonly directUrl: string;
  /** The same upstream behind nginx; omitted: no nginx row. */
  readonly nginxUrl?: string;
  readonly small: number;
  readonly large: number;
  readonly warmup: number;
  readonly repeats: number;
  readonly processes: Processes;
}

type Key = 'gS' | 'gL' | 'dS' | 'dL' | 'nS' | 'nL';

export async function measurePerEvent(options: PerEventOptions): Promise<PerEventResult> {
  const g = createEndpoint(options.gatewayUrl);
  const d = createEndpoint(options.directUrl);
  const n = options.nginxUrl === undefined ? undefined : createEndpoint(options.nginxUrl);
  try {
    const [gs, ds, ns] = await Promise.all([initialize(g), initialize(d), n === undefined ? undefined : initialize(n)]);
    const steps: [Key, Endpoint, string, number][] = [
      ['gS', g, gs, options.small],
      ['gL', g, gs, options.large],
      ['dS', d, ds, options.small],
      ['dL', d, ds, options.large],
    ];
    if (n !== undefined && ns !== undefined) steps.push(['nS', n, ns, options.small], ['nL', n, ns, options.large]);
    const run = async (repeat: number): Promise<Record<Key, number>> => {
      // Rotate the order within a repeat so no call always follows the same one.
      const out: Record<Key, number> = { gS: 0, gL: 0, dS: 0, dL: 0, nS: Number.NaN, nL: Number.NaN };
      for (let i = 0; i < steps.length; i += 1) {
        const [key, ep, sessionId, count] = steps[(i + repeat) % steps.length]!;
        out[key] = (await streamProgress(ep, sessionId, count)).responseAt;
      }
      return out;
    };
    for (let i = 0; i < options.warmup; i += 1) await run(i);
    const samples: Record<Key, number>[] = [];
    const measured = await withCpu(options.processes, async () => {
      for (let i = 0; i < options.repeats; i += 1) samples.push(await run(i));
    });
    const span = options.large - options.small;
    const pick = (key: Key): number[] => samples.map((s) => s[key]);
    const added = samples.map((s) => (s.gL - s.gS - (s.dL - s.dS)) / span);
    return {
      small: options.small,
      large: options.large,
      repeats: options.repeats,
      gatewaySmall: summarize95(pick('gS')),
      gatewayLarge: summarize95(pick('gL')),
      directSmall: summarize95(pick('dS')),
      directLarge: summarize95(pick('dL')),
      addedPerEventMs: summarize95(added),
      addedPerEventFromMediansMs: (median(pick('gL')) - median(pick('gS')) - (median(pick('dL')) - median(pick('dS')))) / span,
      gatewayPerEventMs: median(samples.map((s) => (s.gL - s.gS) / span)),
      directPerEventMs: median(samples.map((s) => (s.dL - s.dS) / span)),
      nginx:
        n === undefined
          ? undefined
          : {
              small: summarize95(pick('nS')),
              large: summarize95(pick('nL')),
              perEventMs: median(samples.map((s) => (s.nL - s.nS) / span)),
              addedPerEventMs: summarize95(samples.map((s) => (s.nL - s.nS - (s.dL - s.dS)) / span)),
            },
      otherCores: measured.otherMs / measured.wallMs,
      gatewayCpuMsPerCall: (measured.cpuMs['gateway'] ?? Number.NaN) / (2 * options.repeats),
    };
  } finally {
    g.agent.destroy();
    d.agent.destroy();
    n?.agent.destroy();
  }
}
