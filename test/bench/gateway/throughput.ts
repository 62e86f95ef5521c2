/**
 * Figure 3: aggregate events/s with many concurrent streams through one
 * gateway, beside raw JetStream publish-with-ack at the same concurrency on
 * the same nats-server, and beside the same upstream called directly (the
 * ceiling the upstream itself sets). Targets alternate within each round.
 */
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { median, progress } from '../stats.js';
import { progressPayload } from '../payload.js';
import { natsCounters, withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { createEndpoint, initialize, streamProgress } from './raw-mcp.js';

export const ThroughputTarget = {
  /** `js.publish` awaiting each ack, one sequential publisher per lane, to a plain file stream. */
  rawJetStream: 'raw-jetstream',
  /** `stream_progress` calls straight to the SDK upstream. */
  direct: 'direct',
  /** `stream_progress` calls through the gateway (each event appended to the log, then served from it). */
  gateway: 'gateway',
} as const;
export type ThroughputTarget = (typeof ThroughputTarget)[keyof typeof ThroughputTarget];

export interface ThroughputRow {
  readonly target: ThroughputTarget;
  readonly concurrency: number;
  readonly eventsPerLane: number;
  /** Events per second of each round, in run order. */
  readonly roundsPerSec: readonly number[];
  readonly medianPerSec: number;
  /** Per process: CPU ms per event (median of rounds). */
  readonly cpuMsPerEvent: Record<string, number>;
  /** Per process: CPU time / wall time (1 = one core busy), median of rounds. */
  readonly cpuUtilization: Record<string, number>;
  /** Cores used by everything else on the machine meanwhile (median of rounds). */
  readonly otherCores: number;
  /** nats-server counters per event (median of rounds): messages in, messages out, JetStream API requests. */
  readonly natsPerEvent: { readonly inMsgs: number; readonly outMsgs: number; readonly apiCalls: number };
}

export interface ThroughputOptions {
  readonly natsUrl: string;
  readonly gatewayUrl: string;
  readonly directUrl: string;
  readonly concurrencies: readonly number[];
  readonly eventsPerLane: number;
  readonly rounds: number;
  /** Processes whose CPU time is accounted per round. */
  readonly processes: Processes;
  readonly natsMonitorPort: number;
}

type Lane = (events: number) => Promise<void>;

export async function measureGatewayThroughput(options: ThroughputOptions): Promise<ThroughputRow[]> {
  const nc = await connect({ servers: options.natsUrl, noAsyncTraces: true });
  const g = createEndpoint(options.gatewayUrl);
  const d = createEndpoint(options.directUrl);
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'GW_BENCH_RAW', subjects: ['gwbench.raw.>'], storage: StorageType.File, num_replicas: 1 });
    const js = jetstream(nc);
    let laneNo = 0;
    const makeLanes = async (target: ThroughputTarget, c: number): Promise<Lane[]> =>
      Promise.all(
        Array.from({ length: c }, async (): Promise<Lane> => {
          laneNo += 1;
          const token = `lane-${laneNo}`;
          if (target === ThroughputTarget.rawJetStream) {
            let n = 0;
            return async (events) => {
              for (let i = 0; i < events; i += 1) await js.publish(`gwbench.raw.${token}`, progressPayload(token, n++));
            };
          }
          // One session per lane: the gateway caps open streams per session, and real clients are separate sessions.
          const ep = target === ThroughputTarget.gateway ? g : d;
          const sessionId = await initialize(ep);
          return async (events) => {
            await streamProgress(ep, sessionId, events);
          };
        }),
      );

    const targets = [ThroughputTarget.rawJetStream, ThroughputTarget.direct, ThroughputTarget.gateway];
    const rows: ThroughputRow[] = [];
    for (const c of options.concurrencies) {
      const lanes = new Map<ThroughputTarget, Lane[]>();
      for (const target of targets) lanes.set(target, await makeLanes(target, c));
      // Warm-up: every lane once, untimed (connections, writers, JIT).
      for (const target of targets) await Promise.all(lanes.get(target)!.map((lane) => lane(20)));
      const perSec = new Map<ThroughputTarget, number[]>(targets.map((t) => [t, []]));
      const cpu = new Map<ThroughputTarget, { cpuMs: Record<string, number>; wallMs: number; otherMs: number }[]>(targets.map((t) => [t, []]));
      const nats = new Map<ThroughputTarget, { inMsgs: number; outMsgs: number; apiCalls: number }[]>(targets.map((t) => [t, []]));
      const events = c * options.eventsPerLane;
      for (let round = 1; round <= options.rounds; round += 1) {
        for (const target of targets) {
          const before = await natsCounters(options.natsMonitorPort);
          const run = await withCpu(options.processes, () => Promise.all(lanes.get(target)!.map((lane) => lane(options.eventsPerLane))));
          const after = await natsCounters(options.natsMonitorPort);
          nats.get(target)!.push({ inMsgs: (after.inMsgs - before.inMsgs) / events, outMsgs: (after.outMsgs - before.outMsgs) / events, apiCalls: (after.apiTotal - before.apiTotal) / events });
          const rate = events / (run.wallMs / 1000);
          perSec.get(target)!.push(rate);
          cpu.get(target)!.push(run);
          const busy = [...Object.entries(run.cpuMs), ['other', run.otherMs] as const].map(([name, used]) => `${name} ${((100 * used) / run.wallMs).toFixed(0)}%`).join(', ');
          progress(`throughput round ${round}/${options.rounds}: ${target} c=${c}: ${Math.round(rate)} events/s (CPU: ${busy})`);
        }
      }
      for (const target of targets) {
        const rounds = perSec.get(target)!;
        const runs = cpu.get(target)!;
        const per = (f: (run: { cpuMs: Record<string, number>; wallMs: number; otherMs: number }, name: string) => number): Record<string, number> =>
          Object.fromEntries(Object.keys(options.processes).map((name) => [name, median(runs.map((run) => f(run, name)))]));
        rows.push({
          target,
          concurrency: c,
          eventsPerLane: options.eventsPerLane,
          roundsPerSec: rounds,
          medianPerSec: median(rounds),
          cpuMsPerEvent: per((run, name) => (run.cpuMs[name] ?? 0) / events),
          cpuUtilization: per((run, name) => (run.cpuMs[name] ?? 0) / run.wallMs),
          otherCores: median(runs.map((run) => run.otherMs / run.wallMs)),
          natsPerEvent: {
            inMsgs: median(nats.get(target)!.map((x) => x.inMsgs)),
            outMsgs: median(nats.get(target)!.map((x) => x.outMsgs)),
            apiCalls: median(nats.get(target)!.map((x) => x.apiCalls)),
          },
        });
      }
    }
    return rows;
  } finally {
    g.agent.destroy();
    d.agent.destroy();
    await nc.close().catch(() => undefined);
  }
}
