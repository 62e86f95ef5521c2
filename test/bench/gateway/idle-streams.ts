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
 */
import { createWriteStream } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { Agent } from 'node:http';
import { progress } from '../stats.js';
import { natsCounters, withCpu } from './cpu.js';
import type { Processes } from './cpu.js';
import { createEndpoint, initialize, openGet } from './raw-mcp.js';
import type { IdleStream } from './raw-mcp.js';
import { rssKiB } from './stack.js';
import type { GatewayProcess } from './stack.js';
import type { Inspector } from './inspector.js';

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
  readonly gateway: GatewayProcess;
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
      progress(`idle streams: initializing sessions up to ${level}`);
      let started = performance.now();
      const fresh = await inParallel(level - sessions.length, options.initConcurrency, init);
      sessions.push(...fresh);
      const initSeconds = (performance.now() - started) / 1000;
      const beforeKiB = await settledRss(pid);
      const gcBefore = await afterFullGc(options.inspector, pid);
      const snapshot = HEAP_SNAPSHOT !== undefined && levels.length === 0 ? `${HEAP_SNAPSHOT}-${level}` : undefined;
      if (snapshot !== undefined) await heapSnapshot(options.inspector, `${snapshot}-before.heapsnapshot`);
      progress(`idle streams: ${sessions.length} sessions (${initSeconds.toFixed(0)} s), RSS ${beforeKiB} KiB; opening ${fresh.length} GET streams`);
      started = performance.now();
      const opened = await inParallel(fresh.length, options.openConcurrency, async (k) => {
        try {
          return await openGet(ep, agent, fresh[k]!);
        } catch (err) {
          failed += 1;
          // Keep the reason without the port or session id, so equal reasons add up.
          const reason = (err as Error).message.replace(/http:\/\/\S+/g, 'the gateway');
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
        gatewayCores: (quiet.cpuMs['gateway'] ?? Number.NaN) / quiet.wallMs,
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
        `idle streams: ${streams.length} open (${failed} failed, ${closed} closed early), RSS ${afterKiB} KiB, ${sample.perStreamKiB.toFixed(1)} KiB/stream ` +
          `(after full GC: RSS ${afterGc.rssPerStreamKiB.toFixed(1)}, V8 heap ${afterGc.heapPerStreamKiB.toFixed(1)} KiB/stream); ` +
          `idle: gateway ${(idle.gatewayCores * 100).toFixed(0)}% core, ${Math.round(idle.natsMsgsInPerSec)} NATS msgs/s; gateway holds ${gatewayOpenFds} fds; ` +
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
