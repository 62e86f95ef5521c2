/**
 * Figure 1: tools/call `echo` latency through the gateway beside the same
 * upstream called directly and through two plain proxies (nginx, when there
 * is one, and the bare Node.js proxy of node-proxy.ts), with the same client
 * on every side, the calls of one round in an order that rotates so drift and
 * GC hit every side alike.
 */
import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { connectSdkClient } from '@tether/testing';
import { ms, progress, ratio, summarize, table } from '../stats.js';
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
  readonly upstreamAnswer: UpstreamAnswer;
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
  /** The same upstream through the bare Node.js proxy (node-proxy.ts); undefined when not measured. */
  readonly nodeProxy: Summary95 | undefined;
  /** gateway / node proxy, p50 and p99 (NaN without it). */
  readonly ratioToNodeProxyP50: number;
  readonly ratioToNodeProxyP99: number;
  /** node proxy p50 / direct p50: what a Node.js hop that only forwards costs (NaN without it). */
  readonly nodeProxyRatioP50: number;
  /** Per process: CPU ms per measured round (one call each way: direct, gateway, and each proxy present). */
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
  /** The same upstream behind the bare Node.js proxy; omitted: no node proxy column. */
  readonly nodeProxyUrl?: string;
  readonly warmup: number;
  readonly calls: number;
  readonly processes: Processes;
  readonly natsMonitorPort: number;
}

/** One call; resolves with its latency in ms (start to the JSON-RPC response). */
type Call = () => Promise<number>;

type Side = 'direct' | 'gateway' | 'nginx' | 'node-proxy';

export async function measureLatency(options: LatencyOptions): Promise<LatencyRow> {
  const urls: [Side, string][] = [
    ['direct', options.directUrl],
    ['gateway', options.gatewayUrl],
    ...(options.nginxUrl === undefined ? [] : [['nginx', options.nginxUrl] as [Side, string]]),
    ...(options.nodeProxyUrl === undefined ? [] : [['node-proxy', options.nodeProxyUrl] as [Side, string]]),
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
    const nodeProxy = of('node-proxy');
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
      nodeProxy,
      ratioToNodeProxyP50: gateway.p50 / (nodeProxy?.p50 ?? Number.NaN),
      ratioToNodeProxyP99: gateway.p99 / (nodeProxy?.p99 ?? Number.NaN),
      nodeProxyRatioP50: (nodeProxy?.p50 ?? Number.NaN) / directSummary.p50,
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

export type UpstreamAnswer = 'sse' | 'json';

export interface LatencyRowsOptions {
  /** Gateway URL per upstream answer (its `/mcp` and `/json` routes). */
  readonly gatewayUrl: Readonly<Record<UpstreamAnswer, string>>;
  /** The upstreams themselves. */
  readonly directUrl: Readonly<Record<UpstreamAnswer, string>>;
  readonly upstreamPid: Readonly<Record<UpstreamAnswer, number>>;
  /** Reference proxies present, each fronting both upstreams under the names `sse` and `json`. */
  readonly nginx?: { url(name: UpstreamAnswer): string } | undefined;
  readonly nodeProxy?: { url(name: UpstreamAnswer): string } | undefined;
  /** The processes to account CPU to, given the upstream of the row. */
  readonly processes: (upstreamPid: number) => Processes;
  readonly warmup: number;
  readonly calls: number;
  readonly natsMonitorPort: number;
  /** Called with each row as it is measured, so a later failure keeps it. */
  readonly onRow: (row: LatencyRow) => void;
}

/** The four rows of figure 1 (and of figure 6): SDK and raw client, each against the SSE upstream (logged) and the JSON one (pass-through). */
export const LATENCY_ROWS: readonly (readonly [string, 'sdk' | 'raw', UpstreamAnswer])[] = [
  ['SDK client, SSE upstream (logged stream)', 'sdk', 'sse'],
  ['SDK client, JSON upstream (pass-through)', 'sdk', 'json'],
  ['raw client, SSE upstream (logged stream)', 'raw', 'sse'],
  ['raw client, JSON upstream (pass-through)', 'raw', 'json'],
];

export async function measureLatencyRows(options: LatencyRowsOptions): Promise<void> {
  for (const [name, client, answer] of LATENCY_ROWS) {
    progress(`latency: ${name}, ${options.calls} calls each way`);
    const nginxUrl = options.nginx?.url(answer);
    const nodeProxyUrl = options.nodeProxy?.url(answer);
    const row = await measureLatency({
      name,
      client,
      upstreamAnswer: answer,
      gatewayUrl: options.gatewayUrl[answer],
      directUrl: options.directUrl[answer],
      ...(nginxUrl === undefined ? {} : { nginxUrl }),
      ...(nodeProxyUrl === undefined ? {} : { nodeProxyUrl }),
      warmup: options.warmup,
      calls: options.calls,
      processes: options.processes(options.upstreamPid[answer]),
      natsMonitorPort: options.natsMonitorPort,
    });
    progress(
      `latency: ${name}: p50 ${ms(row.gateway.p50)} vs ${ms(row.direct.p50)} ms direct (${ratio(row.ratioP50)}), ${ms(row.nginx?.p50 ?? Number.NaN)} ms via nginx (${ratio(row.ratioToNginxP50)}), ` +
        `${ms(row.nodeProxy?.p50 ?? Number.NaN)} ms via node proxy (${ratio(row.ratioToNodeProxyP50)}; node proxy ÷ direct ${ratio(row.nodeProxyRatioP50)})`,
    );
    options.onRow(row);
  }
}

/** CPU ms per call of the processes named `prefix` or `prefix-…` (nginx and its workers). */
function cpuOf(row: LatencyRow, prefix: string): number {
  return Object.entries(row.cpuMsPerRound)
    .filter(([name]) => name === prefix || name.startsWith(`${prefix}-`))
    .reduce((sum, [, used]) => sum + used, 0);
}

/** Section 1 of the report: percentiles per side, then ratios and CPU. */
export function renderLatency(rows: readonly LatencyRow[], natsRoundTrips: { publishAck: Summary; lastMessageRead: Summary } | undefined): string[] {
  if (rows.length === 0) return [];
  const hasNginx = rows.some((row) => row.nginx !== undefined);
  const hasNodeProxy = rows.some((row) => row.nodeProxy !== undefined);
  const pcts = (x: Summary95 | undefined): string[] => (x === undefined ? ['', '', ''] : [ms(x.p50), ms(x.p95), ms(x.p99)]);
  const cpu = (row: LatencyRow, prefix: string, side: Summary95 | undefined): string => (side === undefined ? '' : `${ms(cpuOf(row, prefix))} ms`);
  const ifAny = (side: Summary95 | undefined, value: number): string => (side === undefined ? '' : ratio(value));
  return [
    '## 1. tools/call `echo` latency (ms): direct, via nginx, via a bare Node.js proxy, through the gateway',
    '',
    table(
      ['client, upstream answer', 'n', 'direct p50', 'direct p95', 'direct p99', 'nginx p50', 'nginx p95', 'nginx p99', 'node proxy p50', 'node proxy p95', 'node proxy p99', 'gw p50', 'gw p95', 'gw p99'],
      rows.map((row) => [row.name, String(row.gateway.n), ...pcts(row.direct), ...pcts(row.nginx), ...pcts(row.nodeProxy), ...pcts(row.gateway)]),
    ),
    '',
    table(
      [
        'client, upstream answer',
        'gw ÷ direct p50',
        'gw ÷ direct p99',
        'gw ÷ nginx p50',
        'gw ÷ nginx p99',
        'nginx ÷ direct p50',
        'gw ÷ node proxy p50',
        'gw ÷ node proxy p99',
        'node proxy ÷ direct p50',
        'gateway CPU per call',
        'nginx CPU per call',
        'node proxy CPU per call',
        'NATS msgs in / out / JS API per call',
        'other load',
      ],
      rows.map((row) => [
        row.name,
        ratio(row.ratioP50),
        ratio(row.ratioP99),
        ifAny(row.nginx, row.ratioToNginxP50),
        ifAny(row.nginx, row.ratioToNginxP99),
        ifAny(row.nginx, row.nginxRatioP50),
        ifAny(row.nodeProxy, row.ratioToNodeProxyP50),
        ifAny(row.nodeProxy, row.ratioToNodeProxyP99),
        ifAny(row.nodeProxy, row.nodeProxyRatioP50),
        `${ms(row.cpuMsPerRound['gateway'] ?? Number.NaN)} ms`,
        cpu(row, 'nginx', row.nginx),
        cpu(row, 'node-proxy', row.nodeProxy),
        `${row.natsPerCall.inMsgs.toFixed(1)} / ${row.natsPerCall.outMsgs.toFixed(1)} / ${row.natsPerCall.apiCalls.toFixed(1)}`,
        `${row.otherCores.toFixed(2)} cores`,
      ]),
    ),
    '',
    hasNginx
      ? 'Calls rotate between direct, the proxies and the gateway, the same client on each; nginx is a plain proxy hop (proxy_buffering off, keep-alive upstream).'
      : '!!! No nginx in this run: its columns are empty. !!!',
    ...(hasNodeProxy
      ? ['The node proxy (test/bench/gateway/node-proxy.ts, own process): node:http server, undici request() for POSTs, node:http keep-alive agent for GETs, no logging:',
         'what any Node.js process in the path costs, with nothing of the gateway in it.']
      : []),
    'SSE upstream: the SDK answers tools/call as SSE, so through the gateway each call is a logged stream',
    "(opening `prime`, the upstream's priming event, the response, `end`: four acked appends, plus a log reader).",
    'JSON upstream (`enableJsonResponse`): the gateway authorizes the session and passes the JSON through, no log writes.',
    ...(natsRoundTrips === undefined
      ? []
      : [
          `Unit costs in the same run (sequential, from the benchmark process): JetStream publish-with-ack p50 ${ms(natsRoundTrips.publishAck.p50)} ms,`,
          `last-message read (what \`head\` does) p50 ${ms(natsRoundTrips.lastMessageRead.p50)} ms.`,
        ]),
    '',
  ];
}

/**
 * A client of `kind` on one session at `url`, and its timed `echo` call.
 * `authorization`, when given, gives the `Authorization` value: the raw
 * client asks for it on every request (the same token, or a fresh one each
 * time); the SDK client asks once and sends it on every request, as an
 * application that configured its transport's headers does.
 */
export async function caller(kind: 'sdk' | 'raw', url: string, authorization?: () => string): Promise<{ call: Call; close: () => Promise<void> }> {
  if (kind === 'sdk') {
    const sdk = await connectSdkClient(url, authorization === undefined ? {} : { headers: { authorization: authorization() } });
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
  const ep = createEndpoint(url, authorization === undefined ? undefined : () => ({ authorization: authorization() }));
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
