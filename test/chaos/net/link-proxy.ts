/**
 * A TCP fault proxy for the links between hosts, where the kernel cannot
 * make the fault (no netem here): one listener per link, each forwarding
 * every connection to its target, with a shape the harness changes while
 * connections stay open:
 *
 * - `delayMs` + `jitterMs`: every chunk is held `delay + U(0, jitter)` ms
 *   (seeded), never overtaking the one before it (a TCP stream stays in
 *   order: the jitter shows as bursts, as it does on a real link);
 * - `bytesPerSec`: a bandwidth cap, per connection and direction;
 * - `stall`: `up` (towards the target), `down` (back), or `both`: nothing
 *   forwarded that way, every socket kept open (a one-way stall, or the
 *   freeze of `nats-proxy.ts`), the held bytes sent in order when it ends;
 * - `reset(refuseMs)`: every connection destroyed on both sides, new ones
 *   refused (accepted and closed) for `refuseMs`.
 *
 * `nats-proxy.ts` keeps the loopback-only freeze/reset of the
 * `gateway_nats_cut` fault as it was; this one is what `--net hosts` runs
 * inside the hosts (`link-proxy-main.ts`), and its controller offers the
 * same freeze/thaw/reset, so that fault works there too.
 */
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { createRng } from '../../shared/random.js';

export interface LinkSpec {
  /** `nats1` (to NATS node 1), `route2`, `upstream`, … */
  readonly name: string;
  readonly listenHost: string;
  /** 0: any free port (see {@link LinkProxy.ports}). */
  readonly listenPort: number;
  readonly targetHost: string;
  readonly targetPort: number;
}

export type Stall = 'none' | 'up' | 'down' | 'both';

export interface LinkShape {
  readonly delayMs: number;
  readonly jitterMs: number;
  /** 0: no cap. */
  readonly bytesPerSec: number;
  readonly stall: Stall;
}

export const CLEAR: LinkShape = { delayMs: 0, jitterMs: 0, bytesPerSec: 0, stall: 'none' };

export interface LinkStats {
  connections: number;
  up: number;
  down: number;
  resets: number;
  refused: number;
  open: number;
}

export interface LinkProxy {
  /** Each link's listening port, by name. */
  readonly ports: Readonly<Record<string, number>>;
  /** Changes the shape of `links` (default all): the fields given, the others kept. Delays apply to bytes read from now on. */
  shape(shape: Partial<LinkShape>, links?: readonly string[]): void;
  /** Destroys every connection of `links` (default all); refuses new ones for `refuseMs`. Returns how many were open. */
  reset(refuseMs: number, links?: readonly string[]): number;
  stats(): Record<string, LinkStats>;
  close(): Promise<void>;
}

/** Above this many bytes waiting in one direction, the proxy stops reading that side. */
const HIGH_WATER = 1 << 20;

interface Direction {
  readonly from: Socket;
  readonly to: Socket;
  readonly way: 'up' | 'down';
  readonly queue: Array<{ chunk: Buffer; at: number }>;
  queued: number;
  /** When the last queued chunk leaves: no chunk may leave before it. */
  lastAt: number;
  timer: NodeJS.Timeout | undefined;
}

interface Link {
  readonly spec: LinkSpec;
  shape: LinkShape;
  refuseUntil: number;
  readonly pipes: Set<{ client: Socket; server: Socket; dirs: Direction[] }>;
  readonly stats: LinkStats;
  server: Server | undefined;
}

export async function startLinkProxy(specs: readonly LinkSpec[], seed: number): Promise<LinkProxy> {
  const rng = createRng(seed);
  const links = new Map<string, Link>();
  for (const spec of specs) {
    if (links.has(spec.name)) throw new RangeError(`link ${spec.name} named twice`);
    links.set(spec.name, { spec, shape: CLEAR, refuseUntil: 0, pipes: new Set(), stats: { connections: 0, up: 0, down: 0, resets: 0, refused: 0, open: 0 }, server: undefined });
  }
  const pick = (names: readonly string[] | undefined): Link[] => {
    if (names === undefined) return [...links.values()];
    return names.map((n) => {
      const l = links.get(n);
      if (l === undefined) throw new RangeError(`no link ${n} (links: ${[...links.keys()].join(', ')})`);
      return l;
    });
  };
  const stalled = (link: Link, way: 'up' | 'down'): boolean => link.shape.stall === 'both' || link.shape.stall === way;

  const flush = (link: Link, d: Direction): void => {
    d.timer = undefined;
    if (stalled(link, d.way)) return;
    const now = Date.now();
    while (d.queue.length > 0 && d.queue[0]!.at <= now) {
      const { chunk } = d.queue.shift()!;
      d.queued -= chunk.length;
      link.stats[d.way] += chunk.length;
      d.to.write(chunk);
    }
    if (d.queued < HIGH_WATER / 4 && d.from.isPaused() && !stalled(link, d.way) && d.to.writableLength < HIGH_WATER) d.from.resume();
    if (d.queue.length > 0) d.timer = setTimeout(() => flush(link, d), Math.max(0, d.queue[0]!.at - now));
  };

  const onChunk = (link: Link, d: Direction, chunk: Buffer): void => {
    const { delayMs, jitterMs, bytesPerSec } = link.shape;
    const now = Date.now();
    if (d.queue.length === 0 && delayMs === 0 && jitterMs === 0 && bytesPerSec === 0 && !stalled(link, d.way)) {
      link.stats[d.way] += chunk.length;
      if (!d.to.write(chunk)) d.from.pause();
      return;
    }
    let at = Math.max(d.lastAt, now + delayMs + (jitterMs > 0 ? rng.next() * jitterMs : 0));
    // The link is busy until the previous chunk left; this one takes its own transmission time after that.
    if (bytesPerSec > 0) at = Math.max(at, Math.max(d.lastAt, now) + (chunk.length * 1_000) / bytesPerSec);
    d.lastAt = at;
    d.queue.push({ chunk, at });
    d.queued += chunk.length;
    if (d.queued >= HIGH_WATER) d.from.pause();
    if (d.timer === undefined && !stalled(link, d.way)) d.timer = setTimeout(() => flush(link, d), Math.max(0, at - now));
  };

  const accept = (link: Link) => (client: Socket): void => {
    link.stats.connections += 1;
    if (Date.now() < link.refuseUntil) {
      link.stats.refused += 1;
      client.destroy();
      return;
    }
    const server = connect({ host: link.spec.targetHost, port: link.spec.targetPort });
    const mk = (from: Socket, to: Socket, way: 'up' | 'down'): Direction => ({ from, to, way, queue: [], queued: 0, lastAt: 0, timer: undefined });
    const dirs = [mk(client, server, 'up'), mk(server, client, 'down')];
    const pipe = { client, server, dirs };
    link.pipes.add(pipe);
    link.stats.open = link.pipes.size;
    const end = (): void => {
      if (!link.pipes.delete(pipe)) return;
      link.stats.open = link.pipes.size;
      for (const d of dirs) clearTimeout(d.timer);
      client.destroy();
      server.destroy();
    };
    for (const s of [client, server]) {
      s.setNoDelay(true);
      s.on('error', end);
      s.on('close', end);
    }
    for (const d of dirs) {
      d.from.on('data', (chunk: Buffer) => onChunk(link, d, chunk));
      d.to.on('drain', () => {
        if (d.queued < HIGH_WATER / 4 && !stalled(link, d.way)) d.from.resume();
      });
    }
  };

  try {
    for (const link of links.values()) {
      const server = createServer({ noDelay: true }, accept(link));
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(link.spec.listenPort, link.spec.listenHost, () => {
          server.off('error', reject);
          resolve();
        });
      });
      link.server = server;
    }
  } catch (err) {
    for (const link of links.values()) link.server?.close();
    throw err;
  }

  const ports: Record<string, number> = {};
  for (const link of links.values()) {
    const address = link.server!.address();
    if (address === null || typeof address === 'string') throw new Error(`link ${link.spec.name} has no port`);
    ports[link.spec.name] = address.port;
  }

  const destroyPipes = (link: Link): number => {
    const n = link.pipes.size;
    for (const pipe of [...link.pipes]) {
      link.pipes.delete(pipe);
      for (const d of pipe.dirs) clearTimeout(d.timer);
      pipe.client.destroy();
      pipe.server.destroy();
    }
    link.stats.open = 0;
    return n;
  };

  return {
    ports,
    shape(shape, names) {
      for (const link of pick(names)) {
        link.shape = { ...link.shape, ...shape };
        for (const pipe of link.pipes) {
          for (const d of pipe.dirs) {
            if (stalled(link, d.way)) {
              d.from.pause();
              continue;
            }
            // A stall that ended, or a shape that changed: what waits leaves on its time (already passed for stalled bytes).
            if (d.timer === undefined && d.queue.length > 0) flush(link, d);
            if (d.queue.length === 0 && d.from.isPaused() && d.to.writableLength < HIGH_WATER) d.from.resume();
          }
        }
      }
    },
    reset(refuseMs, names) {
      let n = 0;
      for (const link of pick(names)) {
        link.stats.resets += 1;
        link.refuseUntil = Date.now() + refuseMs;
        n += destroyPipes(link);
      }
      return n;
    },
    stats() {
      return Object.fromEntries([...links.values()].map((l) => [l.spec.name, { ...l.stats }]));
    },
    async close() {
      for (const link of links.values()) destroyPipes(link);
      await Promise.all([...links.values()].map((l) => new Promise<void>((resolve) => (l.server === undefined ? resolve() : l.server.close(() => resolve())))));
    },
  };
}
