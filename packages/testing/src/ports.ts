import { readdir, readFile, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';

/** Loopback only: tests never expose a server beyond this machine. */
export const LOOPBACK = '127.0.0.1';

/**
 * Returns `count` distinct ports that were free a moment ago: each is bound
 * on 127.0.0.1 port 0 and released once all are bound (so they differ).
 *
 * Race: between our close() and nats-server's bind, another process may take
 * the port. The window is a few milliseconds and the kernel hands out
 * ephemeral ports round-robin, so it is rare; callers that can retry (the
 * cluster launcher) do so on "address already in use". Ports we can leave to
 * nats-server (`-p -1`) never take this path.
 */
export async function getFreePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    const ports: number[] = [];
    for (let i = 0; i < count; i += 1) {
      const server = createServer();
      servers.push(server);
      ports.push(await listenOnRandomPort(server));
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

function listenOnRandomPort(server: Server): Promise<number> {
  return new Promise((resolvePort, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port: 0, exclusive: true }, () => {
      const address = server.address();
      if (address === null || typeof address === 'string') reject(new Error('no TCP address after listen'));
      else resolvePort(address.port);
    });
  });
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
