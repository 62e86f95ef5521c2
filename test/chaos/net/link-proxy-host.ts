/**
 * Starts `link-proxy-main.ts` inside a host of a {@link HostNetwork} and
 * drives it over its stdin: the harness's handle on one host's links.
 * The process ends when the harness closes its stdin (`close()`), or dies.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { killOnExit } from './hosts.js';
import type { HostNetwork } from './hosts.js';
import type { LinkShape, LinkSpec, LinkStats } from './link-proxy.js';
import { CLEAR } from './link-proxy.js';

const MAIN = fileURLToPath(new URL('./link-proxy-main.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const COMMAND_TIMEOUT_MS = 5_000;

export interface HostLinkProxy {
  readonly host: string;
  readonly ports: Readonly<Record<string, number>>;
  readonly pid: number;
  /** The fields given, the others kept. */
  shape(shape: Partial<LinkShape>, links?: readonly string[]): Promise<void>;
  clear(links?: readonly string[]): Promise<void>;
  reset(refuseMs: number, links?: readonly string[]): Promise<number>;
  stats(): Promise<Record<string, LinkStats>>;
  close(): Promise<void>;
}

export async function startHostLinkProxy(net: HostNetwork, host: string, links: readonly LinkSpec[], seed: number): Promise<HostLinkProxy> {
  const args = ['--import', 'tsx', MAIN, '--seed', String(seed), ...links.flatMap((l) => ['--link', `${l.name}=${l.listenHost}:${l.listenPort}>${l.targetHost}:${l.targetPort}`])];
  const wrapped = net.wrap(host, process.execPath, args);
  const child = spawn(wrapped.command, wrapped.args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  const kill = (): void => {
    child.kill('SIGKILL');
  };
  killOnExit(child);
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (d: string) => {
    stderr = (stderr + d).slice(-2_000);
  });
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  let nextId = 1;
  let ready: ((ports: Record<string, number>) => void) | undefined;
  const readyPromise = new Promise<Record<string, number>>((resolve, reject) => {
    ready = resolve;
    child.once('exit', (code, signal) => {
      const err = new Error(`link proxy in ${host} exited (${signal ?? code}): ${stderr.trim()}`);
      reject(err);
      for (const p of pending.values()) p.reject(err);
      pending.clear();
    });
    setTimeout(() => reject(new Error(`link proxy in ${host} not listening within 30 s: ${stderr.trim()}`)), 30_000).unref();
  });
  createInterface({ input: child.stdout }).on('line', (line) => {
    let msg: { msg?: string; ports?: Record<string, number>; id?: number; ok?: boolean; result?: unknown; error?: string };
    try {
      msg = JSON.parse(line) as typeof msg;
    } catch {
      return;
    }
    if (msg.msg === 'listening' && msg.ports !== undefined) ready?.(msg.ports);
    else if (msg.id !== undefined) {
      const p = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.ok === true) p?.resolve(msg.result);
      else p?.reject(new Error(`link proxy in ${host}: ${msg.error ?? 'failed'}`));
    }
  });
  let ports: Record<string, number>;
  try {
    ports = await readyPromise;
  } catch (err) {
    kill();
    throw err;
  }
  const send = (cmd: Record<string, unknown>): Promise<unknown> =>
    new Promise((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`link proxy in ${host}: no answer to ${String(cmd['op'])} within ${COMMAND_TIMEOUT_MS}ms`));
      }, COMMAND_TIMEOUT_MS);
      pending.set(id, {
        resolve: (v) => {
          clearTimeout(timer);
          resolve(v);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      child.stdin.write(`${JSON.stringify({ id, ...cmd })}\n`);
    });
  const onlyIf = (links: readonly string[] | undefined) => (links === undefined ? {} : { links });
  return {
    host,
    ports,
    pid: child.pid!,
    async shape(shape, links) {
      await send({ op: 'shape', shape, ...onlyIf(links) });
    },
    async clear(links) {
      await send({ op: 'shape', shape: CLEAR, ...onlyIf(links) });
    },
    async reset(refuseMs, links) {
      return (await send({ op: 'reset', refuseMs, ...onlyIf(links) })) as number;
    },
    async stats() {
      return (await send({ op: 'stats' })) as Record<string, LinkStats>;
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.stdin.end();
      const timer = setTimeout(kill, 3_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
