/**
 * Figure 1: tools/call `echo` latency through the gateway beside the same
 * upstream called directly and through a plain proxy (nginx, when there is
 * one), with the same client on every side, the calls of one round in an
 * order that rotates so drift and GC hit every side alike.
 */
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { connectSdkClient } from '@tether/testing';
import { summarize } from '../stats.js';
import type { Summary } from '../stats.js';
import { natsCounters, withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { createEndpoint, initialize, post } from './raw-mcp.js';
import { summarize95 } from './summary.js';
import type { Summary95 } from './summary.js';

export interface LatencyRow {
  /** What the upstream answers with and which client calls. */
  readonly name: string;
  readonly client: 'sdk' | 'raw';
  readonly upstreamAnswer: 'sse' | 'json';
  readonly gateway: Summary95;
  readonly direct: Summary95;
  /** The same upstream through nginx; undefined when nginx is missing or did not start. */
  readonly nginx: Summary95 | undefined;
  /** gateway p50 / direct p50. */
  readonly ratioP50: number;
  readonly ratioP99: number;
  /** gateway / nginx, p50 and p99 (NaN without nginx). */
  readonly ratioToNginxP50: number;
  readonly ratioToNginxP99: number;
  /** nginx p50 / direct p50: what a plain hop costs (NaN without nginx). */
  readonly nginxRatioP50: number;
  /** Per process: CPU ms per measured round (one call each way: direct, gateway, and nginx when present). */
  readonly cpuMsPerRound: Record<string, number>;
  /** Cores used by everything else on the machine meanwhile. */
  readonly otherCores: number;
  /** nats-server counters per gateway call (only the gateway talks to NATS while this runs). */
  readonly natsPerCall: { readonly inMsgs: number; readonly outMsgs: number; readonly apiCalls: number };
}

export interface LatencyOptions {
  readonly name: string;
  readonly client: 'sdk' | 'raw';
  readonly upstreamAnswer: 'sse' | 'json';
  readonly gatewayUrl: string;
  readonly directUrl: string;
  /** The same upstream behind nginx; omitted: no nginx column. */
  readonly nginxUrl?: string;
  readonly warmup: number;
  readonly calls: number;
  readonly processes: Processes;
  readonly natsMonitorPort: number;
}

/** One call; resolves with its latency in ms (start to the JSON-RPC response). */
type Call = () => Promise<number>;

type Side = 'direct' | 'gateway' | 'nginx';

export async function measureLatency(options: LatencyOptions): Promise<LatencyRow> {
  const urls: [Side, string][] = [
    ['direct', options.directUrl],
    ['gateway', options.gatewayUrl],
    ...(options.nginxUrl === undefined ? [] : [['nginx', options.nginxUrl] as [Side, string]]),
  ];
  const callers = await Promise.all(urls.map(async ([side, url]) => ({ side, samples: [] as number[], ...(await caller(options.client, url)) })));
  try {
    for (let i = 0; i < options.warmup; i += 1) for (const c of callers) await c.call();
    const natsBefore = await natsCounters(options.natsMonitorPort);
    const run = await withCpu(options.processes, async () => {
      for (let i = 0; i < options.calls; i += 1) {
        // Rotate which goes first, so no side always follows the same one (or its GC).
        for (let j = 0; j < callers.length; j += 1) {
          const c = callers[(i + j) % callers.length]!;
          c.samples.push(await c.call());
        }
      }
    });
    const natsAfter = await natsCounters(options.natsMonitorPort);
    const of = (side: Side): Summary95 | undefined => {
      const c = callers.find((x) => x.side === side);
      return c === undefined ? undefined : summarize95(c.samples);
    };
    const gateway = of('gateway')!;
    const directSummary = of('direct')!;
    const nginx = of('nginx');
    return {
      name: options.name,
      client: options.client,
      upstreamAnswer: options.upstreamAnswer,
      gateway,
      direct: directSummary,
      nginx,
      ratioP50: gateway.p50 / directSummary.p50,
      ratioP99: gateway.p99 / directSummary.p99,
      ratioToNginxP50: gateway.p50 / (nginx?.p50 ?? Number.NaN),
      ratioToNginxP99: gateway.p99 / (nginx?.p99 ?? Number.NaN),
      nginxRatioP50: (nginx?.p50 ?? Number.NaN) / directSummary.p50,
      otherCores: run.otherMs / run.wallMs,
      natsPerCall: {
        inMsgs: (natsAfter.inMsgs - natsBefore.inMsgs) / options.calls,
        outMsgs: (natsAfter.outMsgs - natsBefore.outMsgs) / options.calls,
        apiCalls: (natsAfter.apiTotal - natsBefore.apiTotal) / options.calls,
      },
      cpuMsPerRound: Object.fromEntries(Object.entries(run.cpuMs).map(([name, used]) => [name, used / options.calls])),
    };
  } finally {
    await Promise.all(callers.map((c) => c.close()));
  }
}

async function caller(kind: 'sdk' | 'raw', url: string): Promise<{ call: Call; close: () => Promise<void> }> {
  if (kind === 'sdk') {
    const sdk = await connectSdkClient(url);
    return {
      call: async () => {
        const start = performance.now();
        const result = await sdk.client.callTool({ name: 'echo', arguments: { text: 'hello' } });
        const elapsed = performance.now() - start;
        if (result.isError === true) throw new Error(`echo at ${url} failed`);
        return elapsed;
      },
      close: async () => {
        await sdk.transport.terminateSession().catch(() => undefined);
        await sdk.close();
      },
    };
  }
  const ep = createEndpoint(url);
  const sessionId = await initialize(ep);
  let id = 0;
  return {
    call: async () => {
      id += 1;
      const start = performance.now();
      // Timed to the response, like the SDK's callTool; the rest of the
      // stream (the gateway's `end`) is still read before the next call.
      const r = await post(ep, sessionId, { jsonrpc: '2.0', id: `echo-${id}`, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hello' } } });
      if (r.status !== 200 || r.response === undefined) throw new Error(`echo at ${url} answered ${r.status}`);
      return r.responseAt - start;
    },
    close: async () => {
      ep.agent.destroy();
    },
  };
}

/**
 * The unit the gateway pays per log operation: one JetStream publish awaiting
 * its ack, and one leader read of a stream's last message (what `head` and a
 * writer's open do), sequential, from this process, on the same server.
 */
export async function measureNatsRoundTrips(natsUrl: string, count: number): Promise<{ publishAck: Summary; lastMessageRead: Summary }> {
  const nc = await connect({ servers: natsUrl });
  try {
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'GW_BENCH_RTT', subjects: ['gwbench.rtt.>'], storage: StorageType.File, num_replicas: 1 });
    const js = jetstream(nc);
    const payload = new Uint8Array(200);
    const pub: number[] = [];
    const read: number[] = [];
    for (let i = 0; i < count + 20; i += 1) {
      let start = performance.now();
      await js.publish('gwbench.rtt.one', payload);
      if (i >= 20) pub.push(performance.now() - start);
      start = performance.now();
      await jsm.streams.getMessage('GW_BENCH_RTT', { last_by_subj: 'gwbench.rtt.one' });
      if (i >= 20) read.push(performance.now() - start);
    }
    return { publishAck: summarize(pub), lastMessageRead: summarize(read) };
  } finally {
    await nc.close().catch(() => undefined);
  }
}
