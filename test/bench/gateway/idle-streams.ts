/**
 * Figure 4: gateway RSS per idle SSE stream. For each level, sessions are
 * initialized first (unmeasured), the gateway's VmRSS is read once it
 * settles, then one idle GET stream per session is opened and VmRSS is read
 * again: (after − before) / streams. At both points the gateway's full GCs
 * are also forced (inspector) and RSS and V8 heap use read again, since a
 * settled RSS mostly says when V8 last collected.
 *
 * One stream per session, because that is all a session can hold: a GET
 * stream (fresh, or resumed with `Last-Event-ID`) publishes `superseded` for
 * the session's stream `0`, and every older GET of that session is ended
 * (handlers/get.ts; the MCP spec allows one standalone stream per session).
 * So each stream's cost includes what its session's first GET starts on the
 * instance: the lease-held upstream GET listener (an upstream connection, a
 * pump, a lease renewed every third of its TTL) and the control-subject watch.
 *
 * The same measurement runs on the bare Node.js proxy (node-proxy.ts) in
 * front of the same upstream, the reference for what any Node.js process
 * holding an idle proxied stream costs: there a stream is the client socket,
 * the upstream GET on node:http and the pipe between them.
 */
import { createWriteStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { int, progress, table } from '../stats.js';
import { natsCounters, withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { connectInspector, inspectorUrl } from './inspector.js';
import type { Inspector } from './inspector.js';
import { createEndpoint, initialize, openGet, PROTOCOL_VERSION } from './raw-mcp.js';
import type { Endpoint, IdleStream } from './raw-mcp.js';
import { openFilesLimit, rssKiB } from './stack.js';
import type { GatewayProcess } from './stack.js';

export interface IdleLevel {
  /** Idle streams (= sessions) open on the gateway at this level. */
  readonly streams: number;
  /** RSS once this level's sessions were initialized, before their GETs. */
  readonly beforeKiB: number;
  /** RSS once this level's GETs were open. */
  readonly afterKiB: number;
  /** Sum over levels so far of (after − before) / streams. */
  readonly perStreamKiB: number;
  readonly initSeconds: number;
  readonly openSeconds: number;
  /** GETs that failed to open (so far; they lower the level reached). */
  readonly failed: number;
  /** Why GETs failed: message → count (the gateway's status, or our timeout). */
  readonly failures: Record<string, number>;
  /** Streams the gateway ended before RSS was read (so far): must be 0, or the level is not idle streams. */
  readonly closedEarly: number;
  /** Initializes that failed and were retried (a loaded gateway answering 502/503); a third failure ends the run. */
  readonly initRetries: number;
  /**
   * The same two points after forcing full GCs in the gateway (inspector
   * `HeapProfiler.collectGarbage`): RSS then, and V8 heap in use (retained
   * objects). Both per stream are cumulative like `perStreamKiB`.
   */
  readonly afterGc: {
    readonly rssBeforeKiB: number;
    readonly rssAfterKiB: number;
    readonly rssPerStreamKiB: number;
    readonly heapBeforeKiB: number;
    readonly heapAfterKiB: number;
    readonly heapPerStreamKiB: number;
  };
  /** Descriptors the gateway holds once settled: one client socket per stream, plus one upstream socket per live listener. */
  readonly gatewayOpenFds: number;
  /** Warnings and errors among the gateway's last 500 log lines at this point: message → count. */
  readonly gatewayWarnings: Record<string, number>;
  /** What the "idle" streams cost meanwhile, over a quiet window after RSS settled. */
  readonly idle: { readonly gatewayCores: number; readonly natsServerCores: number; readonly natsMsgsInPerSec: number; readonly otherCores: number };
}

export interface IdleStreamsResult {
  readonly levels: readonly IdleLevel[];
  /** Why the largest level asked for was not reached, if it was not. */
  readonly cappedBecause: string | undefined;
}

export interface IdleStreamsOptions {
  /** A gateway route; the JSON upstream's route makes initialize a pass-through (twice the rate of a logged one). */
  readonly gatewayUrl: string;
  /** The process measured: the gateway, or the node proxy in the reference run (same shape); the `gateway…` fields of a level are its. */
  readonly gateway: GatewayProcess;
  /** Its name in `processes` and in progress lines. Default `gateway`. */
  readonly role?: string;
  /**
   * When a GET counts as open: at its first SSE event (default; the
   * gateway's priming event), or at its 200 answer (the SDK upstream
   * behind a plain proxy sends nothing on a standalone GET until it has a
   * message).
   */
  readonly streamStarts?: 'event' | 'headers';
  /** The gateway's inspector, to force full GCs and read heap use. */
  readonly inspector: Inspector;
  readonly levels: readonly number[];
  /** Most streams the processes' open-file limits allow, and why. */
  readonly maxStreams: { readonly count: number; readonly why: string };
  readonly initConcurrency: number;
  readonly openConcurrency: number;
  readonly processes: Processes;
  readonly natsMonitorPort: number;
}

/**
 * The quiet window the idle CPU is read over (BENCH_GATEWAY_IDLE_WINDOW_S, default 5 s). Heartbeats are due
 * every `heartbeatMs` (15 s) and, for streams opened together, come in one burst: a window shorter than
 * that either holds the burst or not, so set it to 15 or more for an average.
 */
const IDLE_WINDOW_MS = Number(process.env['BENCH_GATEWAY_IDLE_WINDOW_S'] ?? 5) * 1000;

/**
 * BENCH_GATEWAY_HEAP_SNAPSHOT=<prefix>: at the first level, heap snapshots of
 * the gateway after the full GCs, before and after the GETs open
 * (`<prefix>-<streams>-before.heapsnapshot`, `-after`), for
 * `heap-diff.ts`. Taking one costs time and memory: use a run of its own.
 */
const HEAP_SNAPSHOT = process.env['BENCH_GATEWAY_HEAP_SNAPSHOT'];

export async function measureIdleStreams(options: IdleStreamsOptions): Promise<IdleStreamsResult> {
  const ep = createEndpoint(options.gatewayUrl);
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity });
  const sessions: string[] = [];
  const streams: IdleStream[] = [];
  let closed = 0;
  let failed = 0;
  const failures: Record<string, number> = {};
  let perStreamSum = 0;
  let gcRssSum = 0;
  let heapSum = 0;
  let retries = 0;
  const pid = options.gateway.pid;
  const role = options.role ?? 'gateway';
  const open = options.streamStarts === 'headers' ? openGetAnswered : openGet;
  const init = async (): Promise<string> => {
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await initialize(ep);
      } catch (err) {
        // A loaded gateway can fail one upstream call (502) or one log call (503); the benchmark wants sessions, not a verdict.
        if (attempt >= 3) throw err;
        retries += 1;
        await new Promise((resolve) => setTimeout(resolve, 200 * attempt));
      }
    }
  };
  const levels: IdleLevel[] = [];
  let cappedBecause: string | undefined;
  try {
    for (const wanted of options.levels) {
      const level = Math.min(wanted, options.maxStreams.count);
      if (level < wanted) cappedBecause = `asked for ${wanted} streams; ${options.maxStreams.why}`;
      if (level <= streams.length) break;
      progress(`idle streams (${role}): initializing sessions up to ${level}`);
      let started = performance.now();
      const fresh = await inParallel(level - sessions.length, options.initConcurrency, init);
      sessions.push(...fresh);
      const initSeconds = (performance.now() - started) / 1000;
      const beforeKiB = await settledRss(pid);
      const gcBefore = await afterFullGc(options.inspector, pid);
      const snapshot = HEAP_SNAPSHOT !== undefined && levels.length === 0 ? `${HEAP_SNAPSHOT}${role === 'gateway' ? '' : `-${role}`}-${level}` : undefined;
      if (snapshot !== undefined) await heapSnapshot(options.inspector, `${snapshot}-before.heapsnapshot`);
      progress(`idle streams (${role}): ${sessions.length} sessions (${initSeconds.toFixed(0)} s), RSS ${beforeKiB} KiB; opening ${fresh.length} GET streams`);
      started = performance.now();
      const opened = await inParallel(fresh.length, options.openConcurrency, async (k) => {
        try {
          return await open(ep, agent, fresh[k]!);
        } catch (err) {
          failed += 1;
          // Keep the reason without the port or session id, so equal reasons add up.
          const reason = (err as Error).message.replace(/http:\/\/\S+/g, `the ${role}`);
          failures[reason] = (failures[reason] ?? 0) + 1;
          return undefined;
        }
      });
      const openSeconds = (performance.now() - started) / 1000;
      for (const s of opened) {
        if (s === undefined) continue;
        streams.push(s);
        void s.closed.then(() => {
          closed += 1;
        });
      }
      const afterKiB = await settledRss(pid);
      perStreamSum += afterKiB - beforeKiB;
      const gcAfter = await afterFullGc(options.inspector, pid);
      if (snapshot !== undefined) await heapSnapshot(options.inspector, `${snapshot}-after.heapsnapshot`);
      gcRssSum += gcAfter.rssKiB - gcBefore.rssKiB;
      heapSum += gcAfter.heapKiB - gcBefore.heapKiB;
      const n = Math.max(1, streams.length);
      const afterGc = {
        rssBeforeKiB: gcBefore.rssKiB,
        rssAfterKiB: gcAfter.rssKiB,
        rssPerStreamKiB: gcRssSum / n,
        heapBeforeKiB: gcBefore.heapKiB,
        heapAfterKiB: gcAfter.heapKiB,
        heapPerStreamKiB: heapSum / n,
      };
      const natsBefore = await natsCounters(options.natsMonitorPort);
      const quiet = await withCpu(options.processes, () => new Promise((resolve) => setTimeout(resolve, IDLE_WINDOW_MS)));
      const natsAfter = await natsCounters(options.natsMonitorPort);
      const idle = {
        gatewayCores: (quiet.cpuMs[role] ?? Number.NaN) / quiet.wallMs,
        natsServerCores: (quiet.cpuMs['nats-server'] ?? Number.NaN) / quiet.wallMs,
        natsMsgsInPerSec: (natsAfter.inMsgs - natsBefore.inMsgs) / (quiet.wallMs / 1000),
        otherCores: quiet.otherMs / quiet.wallMs,
      };
      const gatewayOpenFds = (await readdir(`/proc/${pid}/fd`)).length;
      const gatewayWarnings: Record<string, number> = {};
      for (const line of options.gateway.process.stdoutJson) {
        if (typeof line['level'] === 'number' && line['level'] >= 40) gatewayWarnings[String(line['msg'])] = (gatewayWarnings[String(line['msg'])] ?? 0) + 1;
      }
      const sample: IdleLevel = {
        gatewayOpenFds,
        gatewayWarnings,
        streams: streams.length,
        beforeKiB,
        afterKiB,
        perStreamKiB: perStreamSum / Math.max(1, streams.length),
        initSeconds,
        openSeconds,
        failed,
        failures: { ...failures },
        closedEarly: closed,
        initRetries: retries,
        afterGc,
        idle,
      };
      levels.push(sample);
      progress(
        `idle streams (${role}): ${streams.length} open (${failed} failed, ${closed} closed early), RSS ${afterKiB} KiB, ${sample.perStreamKiB.toFixed(1)} KiB/stream ` +
          `(after full GC: RSS ${afterGc.rssPerStreamKiB.toFixed(1)}, V8 heap ${afterGc.heapPerStreamKiB.toFixed(1)} KiB/stream); ` +
          `idle: ${role} ${(idle.gatewayCores * 100).toFixed(0)}% core, ${Math.round(idle.natsMsgsInPerSec)} NATS msgs/s; ${role} holds ${gatewayOpenFds} fds; ` +
          `warnings in its last log lines: ${JSON.stringify(gatewayWarnings)}`,
      );
      if (level < wanted) break;
    }
    return { levels, cappedBecause };
  } finally {
    for (const s of streams) s.close();
    agent.destroy();
    ep.agent.destroy();
  }
}

/** Runs `count` tasks, at most `concurrency` at a time; results in index order. */
async function inParallel<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(count);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      out[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  return out;
}

/**
 * Forces full GCs in the gateway, then reads its V8 heap in use and, once
 * V8 has had a moment to hand freed pages back, its VmRSS.
 */
async function afterFullGc(inspector: Inspector, pid: number): Promise<{ rssKiB: number; heapKiB: number }> {
  // Twice: the first pass can leave objects that only die after finalizers ran.
  await inspector.call('HeapProfiler.collectGarbage');
  await inspector.call('HeapProfiler.collectGarbage');
  const usage = await inspector.call('Runtime.getHeapUsage');
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  return { rssKiB: await rssKiB(pid), heapKiB: Number(usage['usedSize']) / 1024 };
}

/** Writes a heap snapshot of the gateway (it collects garbage first) to `file`. */
async function heapSnapshot(inspector: Inspector, file: string): Promise<void> {
  const out = createWriteStream(file);
  const off = inspector.on('HeapProfiler.addHeapSnapshotChunk', (params) => out.write(String(params['chunk'])));
  try {
    await inspector.call('HeapProfiler.takeHeapSnapshot', { reportProgress: false });
  } finally {
    off();
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  }
  progress(`idle streams: heap snapshot written to ${file}`);
}

/**
 * VmRSS once it stops moving: sampled every second until the last four
 * samples are within 1% (or 512 KiB) of each other, at most 30 s.
 */
async function settledRss(pid: number): Promise<number> {
  const samples: number[] = [];
  const deadline = performance.now() + 30_000;
  for (;;) {
    samples.push(await rssKiB(pid));
    const last = samples.slice(-4);
    if (last.length === 4) {
      const spread = Math.max(...last) - Math.min(...last);
      if (spread <= Math.max(512, 0.01 * Math.max(...last))) return last[last.length - 1]!;
    }
    if (performance.now() > deadline) return samples[samples.length - 1]!;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

/**
 * A GET stream that counts as open at its 200 answer: what the SDK upstream
 * sends on a standalone GET (headers, then nothing until it has a message),
 * as a plain proxy passes it on.
 */
function openGetAnswered(ep: Endpoint, agent: Agent, sessionId: string, timeoutMs = 30_000): Promise<IdleStream> {
  const headers = { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'mcp-protocol-version': PROTOCOL_VERSION };
  return new Promise((resolve, reject) => {
    const req = request({ host: ep.url.hostname, port: ep.url.port, path: ep.url.pathname, method: 'GET', headers, agent });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`GET stream at ${ep.url.href} did not answer within ${timeoutMs} ms`));
    }, timeoutMs);
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.on('response', (res) => {
      clearTimeout(timer);
      if (res.statusCode !== 200 || !String(res.headers['content-type'] ?? '').startsWith('text/event-stream')) {
        res.resume();
        reject(new Error(`GET stream at ${ep.url.href} answered ${res.statusCode ?? 0} ${String(res.headers['content-type'] ?? '')}`));
        return;
      }
      res.on('error', () => undefined);
      res.resume();
      resolve({ firstId: undefined, closed: new Promise<void>((done) => res.once('close', () => done())), close: () => req.destroy() });
    });
    req.end();
  });
}

export interface IdleStreamsOnOptions {
  /** The gateway or the node proxy, started with `--inspect=127.0.0.1:0` (it prints the inspector URL on stderr). */
  readonly target: GatewayProcess;
  /** `gateway` or `node-proxy`: its name in the CPU figures and progress lines. */
  readonly role: string;
  /** Its route to the JSON upstream. */
  readonly url: string;
  readonly upstreamPid: number;
  readonly natsPid: number;
  readonly natsMonitorPort: number;
  readonly levels: readonly number[];
  readonly streamStarts: 'event' | 'headers';
}

/**
 * Figure 4 on one process: connects to its inspector, caps the levels by
 * everyone's open-file limits (one socket per stream here and in the
 * upstream, two in the target: client and upstream), measures, disconnects.
 */
export async function measureIdleStreamsOn(o: IdleStreamsOnOptions): Promise<{ result: IdleStreamsResult; openFilesLimits: Record<string, number> }> {
  const wsUrl = inspectorUrl(o.target.process.stderrLines);
  if (wsUrl === undefined) throw new Error(`the ${o.role} printed no inspector URL`);
  const inspector = await connectInspector(wsUrl);
  try {
    const limits = { bench: await openFilesLimit(), [o.role]: await openFilesLimit(o.target.pid), upstream: await openFilesLimit(o.upstreamPid) };
    const target = limits[o.role]!;
    const caps = [
      { count: limits.bench - 300, why: `this process may open ${limits.bench} files (ulimit -n; it cannot raise its own limit)` },
      { count: Math.floor((target - 300) / 2), why: `the ${o.role} may open ${target} files and needs two per stream` },
      { count: limits.upstream - 300, why: `the upstream may open ${limits.upstream} files` },
    ];
    const result = await measureIdleStreams({
      gatewayUrl: o.url,
      gateway: o.target,
      role: o.role,
      streamStarts: o.streamStarts,
      inspector,
      levels: o.levels,
      maxStreams: caps.reduce((a, b) => (b.count < a.count ? b : a)),
      initConcurrency: 32,
      openConcurrency: 64,
      processes: { [o.role]: o.target.pid, upstream: o.upstreamPid, 'nats-server': o.natsPid, bench: process.pid },
      natsMonitorPort: o.natsMonitorPort,
    });
    return { result, openFilesLimits: limits };
  } finally {
    inspector.close();
  }
}

/** Section 4 of the report: the gateway's levels, and beside each the node proxy's at the same count when it ran. */
export function renderIdleStreams(i: IdleStreamsResult, nodeProxy: IdleStreamsResult | undefined): string[] {
  const proxyAt = (streams: number): IdleLevel | undefined => nodeProxy?.levels.find((p) => p.streams === streams);
  const proxyCells = (l: IdleLevel): string[] => {
    const p = proxyAt(l.streams);
    return nodeProxy === undefined ? [] : p === undefined ? ['', ''] : [p.afterGc.rssPerStreamKiB.toFixed(1), `${(p.idle.gatewayCores * 100).toFixed(0)}% core`];
  };
  // A proxy level the gateway did not reach (its GETs failed, or another cap) still gets its numbers.
  const unmatched = (nodeProxy?.levels ?? []).filter((p) => !i.levels.some((l) => l.streams === p.streams));
  return [
    '## 4. Gateway memory per idle SSE stream (KiB; one GET stream per session)',
    '',
    table(
      [
        'streams open',
        'settled RSS before → after',
        'per stream',
        'after full GC: RSS before → after',
        'per stream',
        'V8 heap in use before → after',
        'per stream',
        'init / open',
        'failed / closed early / init retries',
        'gateway fds',
        'idle: gateway CPU',
        'idle: NATS msgs/s',
        'idle: nats-server CPU',
        ...(nodeProxy === undefined ? [] : ['node proxy: per stream after full GC', 'idle: node proxy CPU']),
      ],
      i.levels.map((l) => [
        int(l.streams),
        `${int(l.beforeKiB)} → ${int(l.afterKiB)}`,
        l.perStreamKiB.toFixed(1),
        `${int(l.afterGc.rssBeforeKiB)} → ${int(l.afterGc.rssAfterKiB)}`,
        l.afterGc.rssPerStreamKiB.toFixed(1),
        `${int(l.afterGc.heapBeforeKiB)} → ${int(l.afterGc.heapAfterKiB)}`,
        l.afterGc.heapPerStreamKiB.toFixed(1),
        `${l.initSeconds.toFixed(0)} s / ${l.openSeconds.toFixed(0)} s`,
        `${l.failed} / ${l.closedEarly} / ${l.initRetries}`,
        int(l.gatewayOpenFds),
        `${(l.idle.gatewayCores * 100).toFixed(0)}% core`,
        int(l.idle.natsMsgsInPerSec),
        `${(l.idle.natsServerCores * 100).toFixed(0)}% core`,
        ...proxyCells(l),
      ]),
    ),
    '',
    ...(nodeProxy === undefined
      ? []
      : [
          'Node proxy (test/bench/gateway/node-proxy.ts, a fresh process, same inspector GCs), in front of the same JSON upstream:',
          '',
          table(
            ['streams open', 'after full GC: RSS before → after', 'per stream', 'V8 heap per stream', 'failed / closed early', 'node proxy fds', 'idle: node proxy CPU'],
            nodeProxy.levels.map((p) => [
              int(p.streams),
              `${int(p.afterGc.rssBeforeKiB)} → ${int(p.afterGc.rssAfterKiB)}`,
              p.afterGc.rssPerStreamKiB.toFixed(1),
              p.afterGc.heapPerStreamKiB.toFixed(1),
              `${p.failed} / ${p.closedEarly}`,
              int(p.gatewayOpenFds),
              `${(p.idle.gatewayCores * 100).toFixed(0)}% core`,
            ]),
          ),
          '',
          ...(unmatched.length === 0 ? [] : [`Node proxy levels with no gateway level of the same count: ${unmatched.map((p) => int(p.streams)).join(', ')}.`]),
          ...(nodeProxy.cappedBecause === undefined ? [] : [`Node proxy capped: ${nodeProxy.cappedBecause}.`]),
          ...nodeProxy.levels.flatMap((p) =>
            p.failed === 0 ? [] : [`Node proxy GETs that failed at ${int(p.streams)}: ${Object.entries(p.failures).map(([why, n]) => `${n} × ${why}`).join('; ')}.`],
          ),
          'Its stream is the bare minimum of a Node.js hop: the client socket, an upstream GET on node:http, a pipe between them.',
          '',
        ]),
    'Each level first initializes its new sessions (route to the JSON upstream: initialize is a pass-through), waits for RSS',
    'to settle, then opens one GET per new session and waits again; per stream = Σ(after − before) / streams.',
    'A session holds one GET stream at a time (a second one, fresh or resumed, supersedes the first), so each stream',
    "carries its session's upstream GET listener on this instance: an upstream socket and a pump (no timer: writer",
    "liveness is per instance). The 'idle' columns are measured over 5 s after RSS settled.",
    'Settled RSS is read once it stops moving; it carries whatever garbage V8 has not collected yet. Then the benchmark',
    "forces two full GCs through the gateway's inspector (loopback, random port), reads V8 heap in use (retained objects)",
    'and, 2 s later, RSS again. All per-stream figures are Σ(after − before) over levels / streams, in KiB.',
    ...(i.cappedBecause === undefined ? [] : [`Capped: ${i.cappedBecause}.`]),
    ...i.levels.flatMap((l) =>
      l.failed === 0 ? [] : [`GETs that failed at ${int(l.streams)}: ${Object.entries(l.failures).map(([why, n]) => `${n} × ${why}`).join('; ')}.`],
    ),
    ...i.levels.flatMap((l) =>
      Object.keys(l.gatewayWarnings).length === 0
        ? []
        : [`Gateway warnings among its last 500 log lines at ${int(l.streams)}: ${Object.entries(l.gatewayWarnings).map(([msg, n]) => `${n} × "${msg}"`).join(', ')}.`],
    ),
    '',
  ];
}
