/**
 * Figure 2: latency added per logged SSE event. A `stream_progress` call
 * with 1 and with 200 events (delayMs 0), through the gateway and direct,
 * repeated; each repeat runs all four back to back, so
 * `((gw200 - gw1) - (direct200 - direct1)) / 199` is taken within one
 * repeat and the p50 is over repeats. Times are to the JSON-RPC response,
 * which comes after the last progress event.
 */
import { median, summarize } from '../stats.js';
import type { Summary } from '../stats.js';
import { withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { createEndpoint, initialize, streamProgress } from './raw-mcp.js';

export interface PerEventResult {
  readonly small: number;
  readonly large: number;
  readonly repeats: number;
  readonly gatewaySmall: Summary;
  readonly gatewayLarge: Summary;
  readonly directSmall: Summary;
  readonly directLarge: Summary;
  /** Per repeat: ((gwL - gwS) - (dL - dS)) / (L - S), ms. */
  readonly addedPerEventMs: Summary;
  /** The same from the four medians (a cross-check). */
  readonly addedPerEventFromMediansMs: number;
  /** p50 of (gwL - gwS) / (L - S) and of (dL - dS) / (L - S): each side's own cost per event. */
  readonly gatewayPerEventMs: number;
  readonly directPerEventMs: number;
  /** Cores used by everything else on the machine meanwhile. */
  readonly otherCores: number;
  /** Gateway CPU ms per call (over every measured call of both sizes). */
  readonly gatewayCpuMsPerCall: number;
}

export interface PerEventOptions {
  readonly gatewayUrl: string;
  readonly directUrl: string;
  readonly small: number;
  readonly large: number;
  readonly warmup: number;
  readonly repeats: number;
  readonly processes: Processes;
}

export async function measurePerEvent(options: PerEventOptions): Promise<PerEventResult> {
  const g = createEndpoint(options.gatewayUrl);
  const d = createEndpoint(options.directUrl);
  try {
    const [gs, ds] = await Promise.all([initialize(g), initialize(d)]);
    const run = async (repeat: number): Promise<{ gS: number; gL: number; dS: number; dL: number }> => {
      // Rotate the order within a repeat so no call always follows the same one.
      const steps = [
        ['gS', () => streamProgress(g, gs, options.small)],
        ['gL', () => streamProgress(g, gs, options.large)],
        ['dS', () => streamProgress(d, ds, options.small)],
        ['dL', () => streamProgress(d, ds, options.large)],
      ] as const;
      const out = { gS: 0, gL: 0, dS: 0, dL: 0 };
      for (let i = 0; i < steps.length; i += 1) {
        const [key, step] = steps[(i + repeat) % steps.length]!;
        out[key] = (await step()).responseAt;
      }
      return out;
    };
    for (let i = 0; i < options.warmup; i += 1) await run(i);
    const samples: { gS: number; gL: number; dS: number; dL: number }[] = [];
    const measured = await withCpu(options.processes, async () => {
      for (let i = 0; i < options.repeats; i += 1) samples.push(await run(i));
    });
    const span = options.large - options.small;
    const pick = (key: 'gS' | 'gL' | 'dS' | 'dL'): number[] => samples.map((s) => s[key]);
    const added = samples.map((s) => (s.gL - s.gS - (s.dL - s.dS)) / span);
    return {
      small: options.small,
      large: options.large,
      repeats: options.repeats,
      gatewaySmall: summarize(pick('gS')),
      gatewayLarge: summarize(pick('gL')),
      directSmall: summarize(pick('dS')),
      directLarge: summarize(pick('dL')),
      addedPerEventMs: summarize(added),
      addedPerEventFromMediansMs: (median(pick('gL')) - median(pick('gS')) - (median(pick('dL')) - median(pick('dS')))) / span,
      gatewayPerEventMs: median(samples.map((s) => (s.gL - s.gS) / span)),
      directPerEventMs: median(samples.map((s) => (s.dL - s.dS) / span)),
      otherCores: measured.otherMs / measured.wallMs,
      gatewayCpuMsPerCall: (measured.cpuMs['gateway'] ?? Number.NaN) / (2 * options.repeats),
    };
  } finally {
    g.agent.destroy();
    d.agent.destroy();
  }
}
