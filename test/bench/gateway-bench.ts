/**
 * `npm run bench:gateway`: what the gateway costs, each figure beside its
 * baseline measured in the same run (DESIGN section 12):
 *
 * 1. tools/call `echo` latency through the gateway vs the same upstream direct
 *    and through two plain proxies (nginx, and a bare Node.js proxy);
 * 2. latency added per logged SSE event (`stream_progress` 1 vs 200 events),
 *    beside the same through nginx;
 * 3. aggregate events/s of many concurrent streams vs raw JetStream publish-with-ack;
 * 4. gateway RSS per idle SSE stream at 1,000 and 10,000 open, beside the bare
 *    Node.js proxy's;
 * 5. takeover after SIGKILL of the writer: from the kill to the next event at
 *    a client that resumed on another gateway, beside today's lease TTL;
 * 6. what `--auth jwt` adds per request: figure 1's rows through a gateway
 *    that verifies Bearer JWTs from a real issuer, in one rotation with two
 *    gateways without auth, warm tokens and fresh ones (gateway/auth-latency.ts).
 *
 * Real processes on loopback: a private nats-server, the official-SDK upstream
 * (one process answering SSE, one JSON), the gateway as its own process
 * (`services/gateway/dist/main.js`, so its RSS is its own), and Debian's nginx
 * (`/usr/sbin/nginx`, or `NGINX_BIN`) in front of the same upstreams; without
 * nginx the run says so loudly and leaves its columns empty. The bare Node.js
 * proxy (gateway/node-proxy.ts, its own process) is the second reference:
 * what any Node.js hop costs here, beside what the gateway adds. Prints figures
 * (progress on stderr, results on stdout) and writes
 * bench-results/gateway-bench.json. Never asserts.
 *
 * Knobs (environment): BENCH_GATEWAY_ONLY=latency,auth,events,throughput,rss,takeover
 * (default all); BENCH_GATEWAY_CALLS (figure 1, default 500);
 * BENCH_GATEWAY_AUTH_CALLS (figure 6's warm rows, default 2000: the added
 * time is a fraction of a millisecond); BENCH_GATEWAY_FRESH_TOKENS (figure
 * 6's fresh-token row, default 2000);
 * BENCH_GATEWAY_ROUNDS (figure 3, default 3); BENCH_GATEWAY_STREAMS
 * (figure 4 levels, default 1000,10000); BENCH_GATEWAY_CPU_PROF=<dir> (run
 * the gateways with --cpu-prof, profiles written there when they exit);
 * BENCH_GATEWAY_QUIET_WAIT_S (default 120: how long to wait at the start for
 * other processes to use < 0.3 cores; a shared machine skews every figure);
 * BENCH_GATEWAY_TAKEOVER_ROUNDS (figure 5, default 20);
 * BENCH_GATEWAY_TAKEOVER_TIMEOUT_S (figure 5, the cap of one round after the
 * kill, default 30).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, release, totalmem, type } from 'node:os';
import { resolve } from 'node:path';
import { connect } from '@nats-io/transport-node';
import { authSummaryRows, measureAuthLatency, renderAuthLatency } from './gateway/auth-latency.js';
import type { AuthLatencyRow, FreshTokens } from './gateway/auth-latency.js';
import { measureIdleStreamsOn, renderIdleStreams } from './gateway/idle-streams.js';
import type { IdleStreamsResult } from './gateway/idle-streams.js';
import { measureLatencyRows, measureNatsRoundTrips, renderLatency } from './gateway/latency.js';
import type { LatencyRow } from './gateway/latency.js';
import { measurePerEvent } from './gateway/per-event.js';
import type { PerEventResult } from './gateway/per-event.js';
import { waitForQuietMachine } from './gateway/cpu.js';
import type { Processes } from './gateway/cpu.js';
import { findNginx, startNginxProxy } from './gateway/nginx.js';
import type { NginxProxy } from './gateway/nginx.js';
import { startNodeProxy } from './gateway/node-proxy.js';
import type { NodeProxy } from './gateway/node-proxy.js';
import { openFilesLimit, startBenchStack } from './gateway/stack.js';
import { summarize95 } from './gateway/summary.js';
import type { Summary95 } from './gateway/summary.js';
import { measureTakeover, TakeoverOutcome } from './gateway/takeover.js';
import type { TakeoverResult } from './gateway/takeover.js';
import { measureGatewayThroughput, ThroughputTarget } from './gateway/throughput.js';
import type { ThroughputRow } from './gateway/throughput.js';
import { int, ms, progress, ratio, table } from './stats.js';

const PHASES = new Set((process.env['BENCH_GATEWAY_ONLY'] ?? 'latency,auth,events,throughput,rss,takeover').split(',').map((p) => p.trim()));
const CALLS = Number(process.env['BENCH_GATEWAY_CALLS'] ?? 500);
const AUTH_CALLS = Number(process.env['BENCH_GATEWAY_AUTH_CALLS'] ?? 2000);
const FRESH_TOKENS = Number(process.env['BENCH_GATEWAY_FRESH_TOKENS'] ?? 2000);
const ROUNDS = Number(process.env['BENCH_GATEWAY_ROUNDS'] ?? 3);
const STREAM_LEVELS = (process.env['BENCH_GATEWAY_STREAMS'] ?? '1000,10000').split(',').map(Number);
const CPU_PROF_DIR = process.env['BENCH_GATEWAY_CPU_PROF'];
const QUIET_WAIT_S = Number(process.env['BENCH_GATEWAY_QUIET_WAIT_S'] ?? 120);
const TAKEOVER_ROUNDS = Number(process.env['BENCH_GATEWAY_TAKEOVER_ROUNDS'] ?? 20);
const TAKEOVER_TIMEOUT_S = Number(process.env['BENCH_GATEWAY_TAKEOVER_TIMEOUT_S'] ?? 30);
const THROUGHPUT_CONCURRENCY = [16, 64];
const EVENTS_PER_LANE = 500;

/** DESIGN section 12 and issue 12. */
const TARGET = {
  latencyRatioP50: 1.5,
  jsonLatencyRatioP50: 1.15,
  addedPerEventMs: 0.2,
  throughputShare: 0.7,
  rssPerStreamKiB: 20,
  takeoverP50Ms: 300,
  takeoverP99Ms: 1000,
  authAddedP50Ms: 0.05,
} as const;

interface Results {
  /** nginx's version, or why there is no nginx column. */
  nginx: { readonly version: string } | { readonly missing: string } | undefined;
  /** The bare Node.js proxy's node version, when it ran (figures 1 and 4). */
  nodeProxy: { readonly node: string } | undefined;
  latency: LatencyRow[];
  natsRoundTrips: Awaited<ReturnType<typeof measureNatsRoundTrips>> | undefined;
  perEvent: PerEventResult | undefined;
  throughput: ThroughputRow[];
  idle: IdleStreamsResult | undefined;
  /** Figure 4 on the bare Node.js proxy, at the same levels. */
  nodeProxyIdle: IdleStreamsResult | undefined;
  takeover: TakeoverResult | undefined;
  /** Figure 6: with and without `--auth jwt`. */
  auth: AuthLatencyRow[];
  authFresh: FreshTokens | undefined;
}

async function main(): Promise<void> {
  const started = performance.now();
  progress(`waiting (at most ${QUIET_WAIT_S} s) for the machine to be quiet: other processes using < 0.3 cores`);
  const waitStarted = performance.now();
  const otherCoresAtStart = await waitForQuietMachine(0.3, QUIET_WAIT_S * 1000, (busy) => progress(`machine busy: ${busy.toFixed(2)} cores used by other processes; waiting`));
  const waitedS = (performance.now() - waitStarted) / 1000;
  progress('starting nats-server, upstreams');
  const stack = await startBenchStack();
  const results: Results = { nginx: undefined, nodeProxy: undefined, latency: [], natsRoundTrips: undefined, perEvent: undefined, throughput: [], idle: undefined, nodeProxyIdle: undefined, takeover: undefined, auth: [], authFresh: undefined };
  let machine: Record<string, unknown> = {};
  let failure: unknown;
  let nginx: NginxProxy | undefined;
  let nodeProxy: NodeProxy | undefined;
  const upstreamRoutes = [
    { name: 'sse', origin: new URL(stack.sseUpstream.url).origin },
    { name: 'json', origin: new URL(stack.jsonUpstream.url).origin },
  ];
  try {
    if (PHASES.has('latency') || PHASES.has('events')) {
      const started = await startReferenceProxy(upstreamRoutes);
      nginx = started.proxy;
      results.nginx = started.proxy === undefined ? { missing: started.missing ?? 'unknown' } : { version: started.proxy.version };
    }
    if (PHASES.has('latency') || PHASES.has('rss')) results.nodeProxy = { node: process.version };
    if (PHASES.has('latency')) {
      nodeProxy = await startNodeProxy({ routes: upstreamRoutes });
      progress(`node proxy (pid ${nodeProxy.pid}) in front of both upstreams: ${nodeProxy.url('sse')}, ${nodeProxy.url('json')}`);
    }
    const fdLimit = await openFilesLimit();
    machine = {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      memoryGiB: Math.round(totalmem() / 2 ** 30),
      os: `${type()} ${release()}`,
      node: process.version,
      natsServer: await serverVersion(stack.nats.url),
      openFilesLimit: fdLimit,
      otherCoresAtStart,
      waitedForQuietS: waitedS,
    };
    const header = [
      '# Tether gateway benchmark (`npm run bench:gateway`)',
      '',
      `machine: ${String(machine['cpus'])} × ${String(machine['cpuModel'])}, ${String(machine['memoryGiB'])} GiB RAM, ${String(machine['os'])}`,
      `node ${process.version}; nats-server ${String(machine['natsServer'])} (private, single node, file storage); open files limit ${fdLimit}`,
      ...(results.nginx === undefined
        ? []
        : ['version' in results.nginx
            ? `reference proxy: ${results.nginx.version} (one worker, proxy_buffering off, keep-alive upstream, no access log)`
            : `!!! NO NGINX: ${results.nginx.missing}. The "via nginx" columns are empty. !!!`]),
      ...(results.nodeProxy === undefined
        ? []
        : [`second reference: a bare Node.js proxy, node ${results.nodeProxy.node} (own process; node:http server, undici request() for POSTs, node:http keep-alive agent for GETs, no logging)`]),
      'all on one machine, loopback: benchmark client, SDK upstream (own process), gateway (own process), nats-server',
      `other processes used ${otherCoresAtStart.toFixed(2)} cores just before the run (each figure below says how busy the rest of the machine was while it ran)`,
    ].join('\n');
    process.stdout.write(`${header}\n\n`);
    const nodeArgs = CPU_PROF_DIR === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${resolve(CPU_PROF_DIR)}`];

    if (PHASES.has('latency') || PHASES.has('auth') || PHASES.has('events') || PHASES.has('throughput')) {
      const gw = await stack.startGateway({ name: 'gw-bench', nodeArgs, args: ['--route', `/json=${stack.jsonUpstream.url}`] });
      const sseVia = `${gw.origin}/mcp`;
      const jsonVia = `${gw.origin}/json`;
      const references = { ...((await nginx?.processes()) ?? {}), ...(nodeProxy === undefined ? {} : { 'node-proxy': nodeProxy.pid }) };
      const processes = (upstreamPid: number): Processes => ({ gateway: gw.pid, upstream: upstreamPid, 'nats-server': stack.nats.pid ?? process.pid, bench: process.pid, ...references });
      if (PHASES.has('latency')) {
        await measureLatencyRows({
          gatewayUrl: { sse: sseVia, json: jsonVia },
          directUrl: { sse: stack.sseUpstream.url, json: stack.jsonUpstream.url },
          upstreamPid: { sse: stack.sseUpstream.process.pid, json: stack.jsonUpstream.process.pid },
          nginx,
          nodeProxy,
          processes,
          warmup: 50,
          calls: CALLS,
          natsMonitorPort: stack.nats.monitorPort,
          onRow: (row) => results.latency.push(row),
        });
        results.natsRoundTrips = await measureNatsRoundTrips(stack.nats.url, 300);
      }
      if (PHASES.has('auth')) {
        const on = { stack, nodeArgs, processes, warmup: 50, calls: AUTH_CALLS, freshCalls: FRESH_TOKENS };
        results.authFresh = await measureAuthLatency({ ...on, onRow: (row) => results.auth.push(row) });
      }
      if (PHASES.has('events')) {
        progress('per-event: stream_progress 1 vs 200 events');
        const nginxUrl = nginx?.url('sse');
        results.perEvent = await measurePerEvent({
          gatewayUrl: sseVia,
          directUrl: stack.sseUpstream.url,
          ...(nginxUrl === undefined ? {} : { nginxUrl }),
          small: 1,
          large: 200,
          warmup: 3,
          repeats: 30,
          processes: processes(stack.sseUpstream.process.pid),
        });
        progress(`per-event: added ${ms(results.perEvent.addedPerEventMs.p50)} ms per event (p50)`);
      }
      if (PHASES.has('throughput')) {
        results.throughput = await measureGatewayThroughput({
          natsUrl: stack.nats.url,
          gatewayUrl: sseVia,
          directUrl: stack.sseUpstream.url,
          concurrencies: THROUGHPUT_CONCURRENCY,
          eventsPerLane: EVENTS_PER_LANE,
          rounds: ROUNDS,
          processes: processes(stack.sseUpstream.process.pid),
          natsMonitorPort: stack.nats.monitorPort,
        });
      }
      await gw.process.stop('SIGTERM', 15_000);
    }
    // Not needed by the phases below: they would only sit in the CPU figures.
    await nginx?.stop();
    await nodeProxy?.stop();

    if (PHASES.has('takeover')) {
      progress(`takeover: ${TAKEOVER_ROUNDS} rounds, SIGKILL of the writer mid-stream, resume on another gateway (cap ${TAKEOVER_TIMEOUT_S} s a round)`);
      results.takeover = await measureTakeover({
        stack,
        rounds: TAKEOVER_ROUNDS,
        roundTimeoutMs: TAKEOVER_TIMEOUT_S * 1000,
        eventIntervalMs: 10,
        killAfter: { min: 5, max: 300 },
        nodeArgs,
        seed: 7,
        onRound: (r) =>
          progress(
            `takeover: round ${r.round}: ${r.outcome} (${r.verdict}) after ${r.killedAfterEvents} events; next event ${ms(r.toNextEventMs)} ms after the kill, first stored after it ${ms(r.toFirstAfterKillMs)} ms`,
          ),
      });
    }

    if (PHASES.has('rss')) {
      // A fresh gateway: RSS must not carry the heap grown by the phases above.
      // The inspector (loopback, random port) lets us force full GCs before reading RSS, and read V8 heap use.
      const inspect = '--inspect=127.0.0.1:0';
      const on = { upstreamPid: stack.jsonUpstream.process.pid, natsPid: stack.nats.pid ?? process.pid, natsMonitorPort: stack.nats.monitorPort, levels: STREAM_LEVELS };
      const gw = await stack.startGateway({ name: 'gw-idle', nodeArgs: [...nodeArgs, inspect], args: ['--route', `/json=${stack.jsonUpstream.url}`] });
      const measured = await measureIdleStreamsOn({ ...on, target: gw, role: 'gateway', url: `${gw.origin}/json`, streamStarts: 'event' });
      results.idle = measured.result;
      machine['openFilesLimits'] = measured.openFilesLimits;
      await gw.process.stop('SIGTERM', 15_000);
      // Then the same on the bare Node.js proxy, alone beside the upstream (the gateway's streams are closed).
      nodeProxy = await startNodeProxy({ routes: upstreamRoutes, nodeArgs: [inspect] });
      const proxied = await measureIdleStreamsOn({ ...on, target: nodeProxy, role: 'node-proxy', url: nodeProxy.url('json'), streamStarts: 'headers' });
      results.nodeProxyIdle = proxied.result;
      machine['openFilesLimits'] = { ...measured.openFilesLimits, ...proxied.openFilesLimits };
      await nodeProxy.stop();
    }
  } catch (err) {
    // Print what was measured before the failure, then fail.
    failure = err;
  } finally {
    await nginx?.stop();
    await nodeProxy?.stop();
    await stack.close();
  }
  const runtimeS = (performance.now() - started) / 1000;
  process.stdout.write(`${render(results, runtimeS, waitedS)}\n`);
  await mkdir('bench-results', { recursive: true });
  const error = failure === undefined ? undefined : String((failure as Error).stack ?? failure);
  await writeFile('bench-results/gateway-bench.json', `${JSON.stringify({ at: new Date().toISOString(), machine, targets: TARGET, ...results, runtimeS, error }, null, 2)}\n`);
  progress(`wrote bench-results/gateway-bench.json (${runtimeS.toFixed(0)} s)`);
  if (failure !== undefined) throw failure;
}

/**
 * nginx in front of both upstreams (`/sse/mcp`, `/json/mcp`), or, when it is
 * missing or cannot start, a loud line and no nginx columns: the reference
 * is worth having, not worth failing the run for.
 */
async function startReferenceProxy(routes: readonly { name: string; origin: string }[]): Promise<{ proxy?: NginxProxy; missing?: string }> {
  const bin = findNginx();
  const loud = (why: string): { missing: string } => {
    const line = `!!! NO NGINX: ${why}. The "via nginx" columns stay empty. (CI installs it: apt-get install nginx) !!!`;
    progress(line);
    process.stdout.write(`${line}\n`);
    return { missing: why };
  };
  if (bin === undefined) return loud('nginx not found (NGINX_BIN, PATH, /usr/sbin/nginx)');
  try {
    const proxy = await startNginxProxy(bin, routes);
    progress(`nginx ${proxy.version} (${bin}, pid ${proxy.pid}) in front of both upstreams: ${proxy.url('sse')}, ${proxy.url('json')}`);
    return { proxy };
  } catch (err) {
    return loud(`${bin} did not start: ${(err as Error).message.split('\n').slice(0, 3).join(' ')}`);
  }
}

function verdict(met: boolean | undefined): string {
  return met === undefined ? 'n/a' : met ? 'met' : 'missed';
}

function render(r: Results, runtimeS: number, waitedS: number): string {
  const out: string[] = [];
  const summary: string[][] = [];
  for (const row of r.latency) {
    const limit = row.upstreamAnswer === 'sse' ? TARGET.latencyRatioP50 : TARGET.jsonLatencyRatioP50;
    const target = row.client === 'sdk' ? `≤ ${limit}× p50` : 'diagnostic';
    summary.push([
      `tools/call echo p50, ${row.name}`,
      `${ms(row.gateway.p50)} ms`,
      `${ms(row.direct.p50)} ms direct${row.nginx === undefined ? '' : `; ${ms(row.nginx.p50)} ms via nginx`}${row.nodeProxy === undefined ? '' : `; ${ms(row.nodeProxy.p50)} ms via node proxy (${ratio(row.nodeProxyRatioP50)} direct)`}`,
      `${ratio(row.ratioP50)}${row.nginx === undefined ? '' : `; ${ratio(row.ratioToNginxP50)} nginx`}${row.nodeProxy === undefined ? '' : `; ${ratio(row.ratioToNodeProxyP50)} node proxy`}`,
      target,
      row.client === 'sdk' ? verdict(row.ratioP50 <= limit) : '',
    ]);
  }
  if (r.perEvent !== undefined) {
    const p = r.perEvent;
    summary.push([
      `added latency per logged SSE event, p50 (${p.small} vs ${p.large} events)`,
      `${ms(p.addedPerEventMs.p50)} ms`,
      `${ms(p.directPerEventMs)} ms/event direct${p.nginx === undefined ? '' : `; nginx adds ${ms(p.nginx.addedPerEventMs.p50)} ms`}`,
      `gw ${ms(p.gatewayPerEventMs)} ms/event`,
      `≤ ${TARGET.addedPerEventMs} ms`,
      verdict(p.addedPerEventMs.p50 <= TARGET.addedPerEventMs),
    ]);
  }
  for (const c of THROUGHPUT_CONCURRENCY) {
    const gw = r.throughput.find((t) => t.target === ThroughputTarget.gateway && t.concurrency === c);
    const raw = r.throughput.find((t) => t.target === ThroughputTarget.rawJetStream && t.concurrency === c);
    if (gw === undefined || raw === undefined) continue;
    const share = gw.medianPerSec / raw.medianPerSec;
    summary.push([
      `events/s, ${c} concurrent streams × ${gw.eventsPerLane} events`,
      int(gw.medianPerSec),
      `${int(raw.medianPerSec)} raw JetStream`,
      `${(share * 100).toFixed(0)}%`,
      `≥ ${TARGET.throughputShare * 100}%`,
      verdict(share >= TARGET.throughputShare),
    ]);
  }
  if (r.idle !== undefined) {
    for (const l of r.idle.levels) {
      const proxied = r.nodeProxyIdle?.levels.find((p) => p.streams === l.streams);
      // Per stream divides by the streams that were open; a few failed GETs only lower the level reached.
      const valid = l.closedEarly === 0;
      const judge = (kib: number): string =>
        valid ? `${verdict(kib <= TARGET.rssPerStreamKiB)}${l.failed > 0 ? ` (${l.failed} GETs failed)` : ''}` : `invalid: ${l.closedEarly} streams closed early`;
      summary.push([
        `RSS per idle SSE stream, ${int(l.streams)} open (one per session), after full GC`,
        `${l.afterGc.rssPerStreamKiB.toFixed(1)} KiB`,
        `${int(l.afterGc.rssBeforeKiB)} KiB before the GETs${proxied === undefined ? '' : `; node proxy ${proxied.afterGc.rssPerStreamKiB.toFixed(1)} KiB/stream`}`,
        `V8 heap ${l.afterGc.heapPerStreamKiB.toFixed(1)} KiB/stream`,
        `≤ ${TARGET.rssPerStreamKiB} KB`,
        judge(l.afterGc.rssPerStreamKiB),
      ]);
      // For reference only: without a forced GC, RSS mostly says when V8 last collected (it can even come out negative).
      summary.push([`RSS per idle SSE stream, ${int(l.streams)} open, as settled (no forced GC)`, `${l.perStreamKiB.toFixed(1)} KiB`, `${int(l.beforeKiB)} KiB before the GETs`, '', 'reference', '']);
    }
  }
  if (r.takeover !== undefined) {
    const t = r.takeover;
    const ttl = t.leaseTtl === null ? 'n/a (no lease)' : `lease TTL ${t.leaseTtl} today`;
    const timedOut = t.outcomes[TakeoverOutcome.timeout];
    const judge = (value: number, limit: number): string => (t.toNextEventMs.n === 0 ? 'n/a' : `${verdict(value <= limit && timedOut === 0)}${timedOut > 0 ? ` (${timedOut} timed out)` : ''}`);
    summary.push([
      `takeover after SIGKILL of the writer, kill → next event at the resumed client, p50 (${t.toNextEventMs.n} of ${t.rounds.length} rounds)`,
      `${ms(t.toNextEventMs.p50)} ms`,
      ttl,
      '',
      `≤ ${TARGET.takeoverP50Ms} ms`,
      judge(t.toNextEventMs.p50, TARGET.takeoverP50Ms),
    ]);
    summary.push([`takeover, p99`, `${ms(t.toNextEventMs.p99)} ms`, ttl, '', `≤ ${TARGET.takeoverP99Ms / 1000} s`, judge(t.toNextEventMs.p99, TARGET.takeoverP99Ms)]);
  }
  summary.push(...authSummaryRows(r.auth, TARGET.authAddedP50Ms, verdict));
  out.push('## Summary (DESIGN section 12 targets)', '', table(['figure', 'gateway', 'baseline (same run)', 'ratio', 'target', ''], summary), '');
  if (r.idle?.cappedBecause !== undefined) out.push(`Idle streams capped: ${r.idle.cappedBecause}.`, '');

  out.push(...renderLatency(r.latency, r.natsRoundTrips));
  if (r.perEvent !== undefined) {
    const p = r.perEvent;
    out.push(`## 2. Latency per logged SSE event (ms to the response; ${p.repeats} repeats, raw client)`, '');
    const row = (name: string, small: Summary95, large: Summary95, perEvent: number): string[] => [name, ms(small.p50), ms(large.p50), ms(large.p95), ms(large.p99), ms(perEvent)];
    out.push(
      table(
        ['', `${p.small} event p50`, `${p.large} events p50`, `${p.large} events p95`, `${p.large} events p99`, 'per event'],
        [
          row('direct', p.directSmall, p.directLarge, p.directPerEventMs),
          p.nginx === undefined ? ['via nginx', '', '', '', '', ''] : row('via nginx', p.nginx.small, p.nginx.large, p.nginx.perEventMs),
          row('gateway', p.gatewaySmall, p.gatewayLarge, p.gatewayPerEventMs),
          ['added by the gateway', '', '', '', '', `${ms(p.addedPerEventMs.p50)} p50, ${ms(p.addedPerEventMs.p90)} p90 (from medians: ${ms(p.addedPerEventFromMediansMs)})`],
          ['added by nginx', '', '', '', '', p.nginx === undefined ? '' : `${ms(p.nginx.addedPerEventMs.p50)} p50, ${ms(p.nginx.addedPerEventMs.p90)} p90`],
          ['gateway ÷ nginx, per event', '', '', '', '', p.nginx === undefined ? '' : ratio(p.gatewayPerEventMs / p.nginx.perEventMs)],
        ],
      ),
      '',
      `Gateway CPU per call (both sizes together): ${ms(p.gatewayCpuMsPerCall)} ms. Other load on the machine meanwhile: ${p.otherCores.toFixed(2)} cores.`,
      '',
    );
  }
  if (r.throughput.length > 0) {
    out.push('## 3. Aggregate events/s, many concurrent streams (median of rounds)', '');
    out.push(
      table(
        ['concurrency', 'raw JetStream publish+ack', 'direct to upstream', 'through the gateway', 'gateway / raw', 'gateway / direct', 'rounds (gateway)'],
        THROUGHPUT_CONCURRENCY.map((c) => {
          const get = (t: ThroughputTarget): ThroughputRow | undefined => r.throughput.find((x) => x.target === t && x.concurrency === c);
          const raw = get(ThroughputTarget.rawJetStream);
          const direct = get(ThroughputTarget.direct);
          const gw = get(ThroughputTarget.gateway);
          return [
            String(c),
            int(raw?.medianPerSec ?? Number.NaN),
            int(direct?.medianPerSec ?? Number.NaN),
            int(gw?.medianPerSec ?? Number.NaN),
            `${(((gw?.medianPerSec ?? Number.NaN) / (raw?.medianPerSec ?? Number.NaN)) * 100).toFixed(0)}%`,
            `${(((gw?.medianPerSec ?? Number.NaN) / (direct?.medianPerSec ?? Number.NaN)) * 100).toFixed(0)}%`,
            (gw?.roundsPerSec ?? []).map((x) => int(x)).join(' / '),
          ];
        }),
      ),
      '',
      'raw JetStream: one sequential `js.publish` (awaiting the ack) per lane, 200-byte payloads, plain file stream on the same server.',
      'direct / gateway: one session per lane, `stream_progress {count: 500, delayMs: 0}`, timed until every stream ended.',
      '',
      'Where the CPU went (median of rounds): CPU ms per event, and % of one core, per process.',
      '',
    );
    const names = Object.keys(r.throughput[0]?.cpuMsPerEvent ?? {});
    out.push(
      table(
        ['target', 'concurrency', ...names.map((n) => `${n} ms/event`), ...names.map((n) => `${n} %core`), 'other %core', 'NATS in / out / API per event'],
        r.throughput.map((t) => [
          t.target,
          String(t.concurrency),
          ...names.map((n) => (t.cpuMsPerEvent[n] ?? Number.NaN).toFixed(3)),
          ...names.map((n) => `${((t.cpuUtilization[n] ?? Number.NaN) * 100).toFixed(0)}%`),
          `${(t.otherCores * 100).toFixed(0)}%`,
          `${t.natsPerEvent.inMsgs.toFixed(2)} / ${t.natsPerEvent.outMsgs.toFixed(2)} / ${t.natsPerEvent.apiCalls.toFixed(3)}`,
        ]),
      ),
      '',
    );
  }
  if (r.idle !== undefined) out.push(...renderIdleStreams(r.idle, r.nodeProxyIdle));
  if (r.takeover !== undefined) out.push(...renderTakeover(r.takeover));
  out.push(...renderAuthLatency(r.auth, r.authFresh, TARGET.authAddedP50Ms));
  out.push(`runtime: ${runtimeS.toFixed(0)} s, of which ${waitedS.toFixed(0)} s waiting for a quiet machine`);
  return out.join('\n');
}

function renderTakeover(t: TakeoverResult): string[] {
  const o = t.outcomes;
  const line = (name: string, x: Summary95, target: string): string[] => [name, String(x.n), ms(x.p50), ms(x.p95), ms(x.p99), ms(x.max), target];
  const of = (pick: (round: TakeoverResult['rounds'][number]) => number): Summary95 =>
    summarize95(t.rounds.map(pick).filter((x) => Number.isFinite(x)));
  return [
    `## 5. Takeover after SIGKILL of the writer (ms from the kill; ${t.rounds.length} rounds, each capped at ${t.roundTimeoutMs / 1000} s)`,
    '',
    `Today's lease TTL (--lease-ttl default, services/gateway/src/config.ts): ${t.leaseTtl ?? 'n/a (no lease)'}.`,
    `Outcomes: ${o.continued} continued, ${o.ended} ended explicitly, ${o.timeout} timed out, ${o.failed} failed to run.`,
    '',
    table(
      ['from the kill to', 'n', 'p50', 'p95', 'p99', 'max', 'target'],
      [
        line('the next new event at the client', t.toNextEventMs, `p50 ≤ ${TARGET.takeoverP50Ms} ms, p99 ≤ ${TARGET.takeoverP99Ms / 1000} s`),
        line('the first new event the log stored after the kill', t.toFirstAfterKillMs, ''),
        line("the resume's HTTP answer (on the other gateway)", of((x) => x.answeredMs), ''),
        line("the resume's acknowledgment frame", of((x) => x.ackMs), ''),
      ],
    ),
    '',
    table(
      ['round', 'killed after', 'outcome', 'verdict', 'answered', 'next event', 'first stored after kill', 'new events stored before kill', 'duplicates'],
      t.rounds.map((x) => [
        String(x.round),
        `${x.killedAfterEvents} events`,
        x.outcome,
        x.verdict,
        ms(x.answeredMs),
        ms(x.toNextEventMs),
        ms(x.toFirstAfterKillMs),
        String(x.storedBeforeKill),
        String(x.duplicates),
      ]),
    ),
    '',
    `Each round: a fresh writer gateway W (own process, new port, new instance id) and one reader gateway R, on one nats-server and the SDK upstream with`,
    `its event store. A raw node:http client (no reconnection backoff) calls stream_progress on W (one event every ${t.eventIntervalMs} ms), SIGKILLs W by pid`,
    'in the tick its Nth event arrives (N drawn per round, so the kill lands at every phase of the writer\'s periodic work), and at once resumes on R with',
    "Last-Event-ID = that event's id. Frames with empty data (the resume's priming echo of the cursor) and `event: resume` frames are not events.",
    "'first stored after the kill': the first new event whose JetStream timestamp is later than the kill, i.e. one the new writer recorded; a new",
    'event stored before the kill was appended by W just before it died and needed no takeover.',
    `Other load on the machine while rounds waited for the takeover: ${t.otherCores.toFixed(2)} cores.`,
    '',
  ];
}

async function serverVersion(url: string): Promise<string> {
  const nc = await connect({ servers: url });
  const version = nc.info?.version ?? 'unknown';
  await nc.close();
  return version;
}

// Every child process handle is unref'd (the test kit's choice, so a server
// never keeps vitest alive): without this, waiting on a child's exit could
// let the event loop empty and Node exit quietly, and with code 0, mid-run.
const keepAlive = setInterval(() => undefined, 60_000);
main()
  .catch((err: unknown) => {
    process.stderr.write(`bench:gateway failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => clearInterval(keepAlive));

