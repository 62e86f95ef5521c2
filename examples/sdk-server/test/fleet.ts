import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startRoundRobinProxy, startServiceProcess } from '@tether/testing';
import type { NatsServer, RoundRobinProxy, ServiceProcess } from '@tether/testing';

/** The built bin's target: tests run what `npx tether-sdk-example` runs. */
export const EXAMPLE_MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));

export function assertBuilt(): void {
  if (!existsSync(EXAMPLE_MAIN)) throw new Error(`${EXAMPLE_MAIN} is missing: run \`npx tsc -b\` first (npm test does)`);
}

/** Example instances as child processes behind the round-robin balancer, which sends each request to the next one. */
export interface Fleet {
  readonly instances: readonly ServiceProcess[];
  readonly proxy: RoundRobinProxy;
  /** `${proxy.url}/mcp` */
  readonly url: string;
  /** The instance behind a proxy target (`http://127.0.0.1:<port>`). */
  instanceAt(target: string | undefined): ServiceProcess;
  targetOf(instance: ServiceProcess): string;
  /** SIGKILL by PID, taken out of the rotation first; resolves once the process is gone. */
  sigkill(instance: ServiceProcess): Promise<void>;
  close(): Promise<void>;
}

/** One example process on `nats`, with `args` after the common ones. */
export async function startInstance(nats: NatsServer, name: string, args: readonly string[] = []): Promise<ServiceProcess> {
  assertBuilt();
  return startServiceProcess({
    name,
    command: process.execPath,
    // Short liveness timers so a killed producer is noticed quickly; the retry hint makes SDK clients reconnect at once.
    args: [EXAMPLE_MAIN, '--port', '0', '--nats', nats.url, '--instance', name, '--retry-ms', '20', '--writer-check-ms', '100', '--writer-silence-ms', '1000', ...args],
    env: { CI: '1', TETHER_LOG_LEVEL: 'info' },
    readyLine: (o) => o.msg === 'listening',
  });
}

export interface FleetOptions {
  /** More flags for every instance (e.g. `--auth jwt …`). */
  readonly args?: readonly string[];
  /** A balancer started beforehand (its URL may be in `args`, as the resource URI); its targets become the instances. */
  readonly proxy?: RoundRobinProxy;
}

export async function startFleet(nats: NatsServer, count: number, tag: string, options: FleetOptions = {}): Promise<Fleet> {
  const instances: ServiceProcess[] = [];
  for (let i = 0; i < count; i += 1) instances.push(await startInstance(nats, `${tag}-${String.fromCharCode(97 + i)}`, options.args));
  const targetOf = (instance: ServiceProcess): string => `http://127.0.0.1:${instance.port}`;
  const proxy = options.proxy ?? (await startRoundRobinProxy([]));
  proxy.setTargets(instances.map(targetOf));
  return {
    instances,
    proxy,
    url: `${proxy.url}/mcp`,
    targetOf,
    instanceAt(target) {
      const found = instances.find((i) => targetOf(i) === target);
      if (found === undefined) throw new Error(`no instance behind ${String(target)}`);
      return found;
    },
    async sigkill(instance) {
      proxy.markDown(targetOf(instance));
      process.kill(instance.pid, 'SIGKILL');
      const status = await instance.exited;
      if (status.signal !== 'SIGKILL') throw new Error(`${instance.name} exited with ${JSON.stringify(status)}, not by SIGKILL`);
    },
    async close() {
      await proxy.close();
      for (const instance of instances) await instance.stop();
    },
  };
}

/** Resolves once `predicate` holds, checked on every `poke()` (event-driven, no timers). */
export function whenTrue(predicate: () => boolean): { poke(): void; reached: Promise<void> } {
  let resolve!: () => void;
  const reached = new Promise<void>((r) => (resolve = r));
  return {
    poke() {
      if (predicate()) resolve();
    },
    reached,
  };
}

/** 1..n */
export const upTo = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
