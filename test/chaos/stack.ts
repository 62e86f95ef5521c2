/**
 * The chaos stack, all real processes on loopback: a 3-node NATS cluster
 * (the log at R3), two SDK upstreams in their own processes (one with an
 * event store, one without), three gateway processes, and the test kit's
 * round-robin balancer in front (every request to the next gateway).
 *
 *   clients ─▶ balancer ─▶ gateway ×3 ─▶ upstream /mcp (event store)  | upstream /plain/mcp (none)
 *                             │
 *                             ▼
 *                  nats-server ×3 (JetStream R3: TETHER log, sessions)
 */
import { createWriteStream } from 'node:fs';
import type { WriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { namespaceNames } from '@tether/session-log';
import { startNatsCluster, startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { NatsCluster, RoundRobinProxy, ServiceProcess } from '@tether/testing';
import { Routes } from './client-context.js';
import { sleep } from './util.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
const UPSTREAM_MAIN = fileURLToPath(new URL('../shared/mcp-upstream-main.ts', import.meta.url));

export type UpstreamName = 'store' | 'plain';

export interface Upstream {
  readonly name: UpstreamName;
  readonly port: number;
  readonly url: string;
  process: ServiceProcess;
}

export interface GatewaySlot {
  readonly slot: number;
  /** Restarts so far; names the instance (`gw1.0`, `gw1.1`, …). */
  generation: number;
  process: ServiceProcess | undefined;
  origin: string | undefined;
}

export interface ChaosStackOptions {
  /** The log's namespace (one per run): `--namespace` of every gateway. */
  readonly namespace: string;
  /** Writes every gateway's stdout (pino JSON) to `<dir>/<instance>.log`. */
  readonly gatewayLogDir?: string | undefined;
}

export interface ChaosStack {
  readonly cluster: NatsCluster;
  readonly streamName: string;
  readonly proxy: RoundRobinProxy;
  /** The balancer, `http://127.0.0.1:<port>`. */
  readonly baseUrl: string;
  readonly upstreams: Readonly<Record<UpstreamName, Upstream>>;
  readonly gateways: readonly GatewaySlot[];
  /** SIGKILL (the balancer first stops sending it requests, as a health check would). */
  killGateway(slot: number): Promise<void>;
  /** SIGTERM: the gateway drains (ends client streams with a retry hint, releases its streams) and exits. */
  drainGateway(slot: number): Promise<{ code: number | null; signal: string | null; ms: number }>;
  /** A new gateway process in the slot (new port), put in the balancer's rotation. */
  startGateway(slot: number): Promise<void>;
  /** Crash and restart an upstream on the same port: it forgets every session. */
  restartUpstream(name: UpstreamName, downMs: number): Promise<void>;
  teardown(): Promise<void>;
}

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const cluster = await startNatsCluster({ size: 3, readyTimeoutMs: 30_000 });
  const started: ServiceProcess[] = [];
  const logs: WriteStream[] = [];
  if (options.gatewayLogDir !== undefined) await mkdir(options.gatewayLogDir, { recursive: true });
  try {
    const startUpstream = async (name: UpstreamName, port: number): Promise<ServiceProcess> => {
      const proc = await startServiceProcess({
        name: `upstream-${name}`,
        command: process.execPath,
        args: ['--import', 'tsx', UPSTREAM_MAIN, '--port', String(port), ...(name === 'store' ? ['--event-store'] : [])],
        cwd: ROOT,
        readyLine: (json) => json.msg === 'listening',
        readyTimeoutMs: 30_000,
      });
      started.push(proc);
      return proc;
    };
    const upstreams = {} as Record<UpstreamName, Upstream>;
    for (const name of ['store', 'plain'] as const) {
      const proc = await startUpstream(name, 0);
      upstreams[name] = { name, port: proc.port!, url: `http://127.0.0.1:${proc.port}/mcp`, process: proc };
    }

    const gateways: GatewaySlot[] = [0, 1, 2].map((slot) => ({ slot, generation: 0, process: undefined, origin: undefined }));
    const launch = async (slot: GatewaySlot): Promise<void> => {
      const instance = `gw${slot.slot + 1}.${slot.generation}`;
      slot.generation += 1;
      const proc = await startServiceProcess({
        name: instance,
        command: process.execPath,
        args: [
          GATEWAY_MAIN,
          ...['--port', '0', '--nats', cluster.urls.join(','), '--log-replicas', '3', '--namespace', options.namespace],
          ...['--upstream', upstreams.store.url, '--route', `${Routes.plain}=${upstreams.plain.url}`],
          ...['--instance-id', instance, '--heartbeat', '1s', '--retry', '200', '--drain-timeout', '5s'],
        ],
        cwd: ROOT,
        readyLine: (json) => json.msg === 'listening',
        readyTimeoutMs: 30_000,
      });
      started.push(proc);
      if (options.gatewayLogDir !== undefined) teeLines(proc, join(options.gatewayLogDir, `${instance}.log`), logs);
      slot.process = proc;
      slot.origin = `http://127.0.0.1:${proc.port}`;
    };
    // One at a time: the first creates the log stream and buckets, the others verify them.
    for (const slot of gateways) await launch(slot);
    const proxy = await startRoundRobinProxy(gateways.map((g) => g.origin!), { historySize: 100 });
    const rotate = (): void => proxy.setTargets(gateways.flatMap((g) => (g.origin === undefined ? [] : [g.origin])));

    return {
      cluster,
      streamName: namespaceNames(options.namespace).streamName,
      proxy,
      baseUrl: proxy.url,
      upstreams,
      gateways,
      async killGateway(i) {
        const slot = gateways[i]!;
        if (slot.origin !== undefined) proxy.markDown(slot.origin);
        slot.origin = undefined;
        rotate();
        await slot.process?.kill();
        slot.process = undefined;
      },
      async drainGateway(i) {
        const slot = gateways[i]!;
        if (slot.origin !== undefined) proxy.markDown(slot.origin);
        slot.origin = undefined;
        rotate();
        const began = Date.now();
        const status = (await slot.process?.stop('SIGTERM', 15_000)) ?? { code: null, signal: null };
        slot.process = undefined;
        return { code: status.code, signal: status.signal, ms: Date.now() - began };
      },
      async startGateway(i) {
        const slot = gateways[i]!;
        for (let attempt = 1; ; attempt += 1) {
          try {
            await launch(slot);
            break;
          } catch (err) {
            // A gateway can fail to start while NATS elects a leader; try again.
            if (attempt >= 4) throw err;
            await sleep(1_000);
          }
        }
        rotate();
      },
      async restartUpstream(name, downMs) {
        const upstream = upstreams[name];
        await upstream.process.kill();
        await sleep(downMs);
        for (let attempt = 1; ; attempt += 1) {
          try {
            upstream.process = await startUpstream(name, upstream.port);
            return;
          } catch (err) {
            if (attempt >= 4) throw err;
            await sleep(500);
          }
        }
      },
      async teardown() {
        await proxy.close();
        await Promise.all(started.map((p) => p.stop('SIGKILL', 2_000).catch(() => undefined)));
        for (const log of logs) log.end();
        await cluster.cleanup();
      },
    };
  } catch (err) {
    await Promise.all(started.map((p) => p.stop('SIGKILL', 2_000).catch(() => undefined)));
    await cluster.cleanup();
    throw err;
  }
}

/** Copies every stdout line of a process to a file (the kit keeps only the last 500 in memory). */
function teeLines(proc: ServiceProcess, path: string, logs: WriteStream[]): void {
  const out = createWriteStream(path, { flags: 'a' });
  logs.push(out);
  for (const line of proc.stdoutLines) out.write(`${line}\n`);
  // A matcher that never matches sees every later line; it ends when the process exits.
  proc
    .waitForLine(
      (_json, line) => {
        out.write(`${line}\n`);
        return false;
      },
      { timeoutMs: 24 * 3_600_000 },
    )
    .catch(() => undefined);
}
