import { readFileSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';

/** Loopback only: tests never expose a server beyond this machine. */
export const LOOPBACK = '127.0.0.1';

/**
 * Returns `count` distinct ports that were free a moment ago, chosen at
 * random below the kernel's ephemeral range and each checked by binding it
 * on 127.0.0.1 (released once all are bound, so they differ).
 *
 * Why below that range: a server killed and started again on its port (the
 * faults tests make) finds it taken if an outgoing connection got it as its
 * source port meanwhile, and the kernel hands those out only from the
 * ephemeral range (seen in CI: a restarted cluster node exited "bind:
 * address already in use" on a port it had been given by `-p -1`). A port
 * outside it can be taken only by another such choice.
 *
 * Race: between our close() and the server's bind, another test may choose
 * the same port. Callers that can choose again do so on "address already in
 * use" (the first start of a `ManagedNatsServer`, the cluster launcher).
 */
export async function getFreePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    while (ports.length < count) {
      const { server, port } = await listenBelowEphemeral();
      servers.push(server);
      ports.push(port);
    }
    return ports;
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((done) => server.close(() => done()))));
  }
}

/** One free port; see {@link getFreePorts} for the race. */
export async function getFreePort(): Promise<number> {
  const [port] = await getFreePorts(1);
  if (port === undefined) throw new Error('unreachable: getFreePorts(1) returned nothing');
  return port;
}

/** Ports below this are never chosen (well-known and registered services crowd the low end). */
const LOWEST_CHOSEN_PORT = 10_000;
/** Random tries in the range before falling back to a port the kernel picks. */
const TRIES = 50;

/** The first port of the kernel's ephemeral range (Linux); 49152 (IANA) elsewhere. Read once. */
let ephemeralLowCached: number | undefined;
function ephemeralLow(): number {
  ephemeralLowCached ??= readEphemeralLow();
  return ephemeralLowCached;
}

function readEphemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(low) && low > 0) return low;
  } catch {
    // Not Linux, or no /proc: the IANA default.
  }
  return 49_152;
}

/**
 * A server listening on a random free port in [10000, ephemeral low), or,
 * when that range is too small or full, on one the kernel picks.
 */
async function listenBelowEphemeral(): Promise<{ server: Server; port: number }> {
  const high = ephemeralLow() - 1;
  if (high - LOWEST_CHOSEN_PORT >= 1_000) {
    for (let i = 0; i < TRIES; i += 1) {
      const server = createServer();
      const port = LOWEST_CHOSEN_PORT + Math.floor(Math.random() * (high - LOWEST_CHOSEN_PORT + 1));
      try {
        return { server, port: await listen(server, port) };
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code !== 'EADDRINUSE' && code !== 'EACCES') throw err;
      }
    }
  }
  const server = createServer();
  return { server, port: await listen(server, 0) };
}

function listen(server: Server, port: number): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ host: LOOPBACK, port, exclusive: true }, () => {
      server.off('error', onError);
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error('no TCP address after listen'));
      else resolvePort(address.port);
    });
  });
}

/** Whether a start failed because a port was taken (nats-server prints "bind: address already in use"). */
export function isPortTaken(stderrTail: readonly string[]): boolean {
  return stderrTail.some((line) => line.includes('address already in use'));
}

/** The port a start found taken (`listen tcp 127.0.0.1:<port>: bind: address already in use`), if its stderr names one. */
export function takenPort(stderrTail: readonly string[]): number | undefined {
  for (const line of stderrTail) {
    const port = /listen tcp [^\s]*:(\d+): bind: address already in use/.exec(line)?.[1];
    if (port !== undefined) return Number(port);
  }
  return undefined;
}

/** What nats-server writes to `<ports_file_dir>/<executable>_<pid>.ports` once it listens. */
export interface ServerPorts {
  readonly clientPort: number;
  readonly monitorPort: number | undefined;
}

/**
 * Reads the ports file of process `pid`, or undefined while it is not there
 * (or half-written: the server does not write it atomically). The file name
 * starts with the executable's base name, which differs when NATS_SERVER_BIN
 * is e.g. `nats-server-2.10`, so we match on the `_<pid>.ports` suffix.
 */
export async function readPortsFile(dir: string, pid: number): Promise<ServerPorts | undefined> {
  const file = await findPortsFile(dir, pid);
  if (file === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(await readFile(file, 'utf8'));
  } catch {
    return undefined;
  }
  const clientPort = firstPort(parsed, 'nats');
  if (clientPort === undefined) return undefined;
  return { clientPort, monitorPort: firstPort(parsed, 'monitoring') };
}

/** Removes the ports file a killed server left behind (a clean stop removes its own). */
export async function removePortsFile(dir: string, pid: number): Promise<void> {
  const file = await findPortsFile(dir, pid);
  if (file !== undefined) await rm(file, { force: true });
}

async function findPortsFile(dir: string, pid: number): Promise<string | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return undefined;
  }
  const name = names.find((n) => n.endsWith(`_${pid}.ports`));
  return name === undefined ? undefined : join(dir, name);
}

function firstPort(parsed: unknown, key: string): number | undefined {
  if (typeof parsed !== 'object' || parsed === null) return undefined;
  const urls: unknown = (parsed as Record<string, unknown>)[key];
  if (!Array.isArray(urls) || typeof urls[0] !== 'string') return undefined;
  try {
    const port = Number(new URL(urls[0]).port);
    return Number.isInteger(port) && port > 0 ? port : undefined;
  } catch {
    return undefined;
  }
}
