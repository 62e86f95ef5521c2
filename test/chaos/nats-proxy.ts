/**
 * A TCP proxy between one NATS client process (a gateway, a session-log
 * service, an SDK example instance) and the NATS cluster, on loopback: one
 * listener per node, each forwarding to that node, so the client's own
 * reconnect logic still moves between nodes. The `gateway_nats_cut` fault
 * uses it to cut that one process off from NATS without root tricks:
 *
 * - `freeze()`: stop forwarding in both directions and keep every socket
 *   open. Bytes wait in the proxy (and then in the kernel's buffers); the
 *   client sees no error, its requests time out, its presence stops
 *   answering, and the server does not notice for up to 2 × its ping
 *   interval. New connections are accepted and held the same way.
 * - `thaw()`: forward again, held bytes first, in order.
 * - `reset(refuseMs)`: destroy every connection on both sides and refuse
 *   new ones for `refuseMs` (accepted, then closed at once): the client sees
 *   a dead connection and reconnects, the server drops its interest at once.
 *
 * The cluster must run with `cluster { no_advertise: true }`, or the client
 * learns the nodes' own URLs from INFO and may reconnect around the proxy.
 */
import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';

export interface NatsProxy {
  /** `nats://127.0.0.1:<port>`, one per node, in the order of the targets. */
  readonly urls: readonly string[];
  readonly frozen: boolean;
  /** Connections accepted so far, bytes forwarded each way, resets done. */
  readonly stats: { connections: number; toServer: number; toClient: number; resets: number; refused: number };
  /** Connections open now. */
  readonly open: number;
  freeze(): void;
  thaw(): void;
  /** Destroys every connection; refuses new ones for `refuseMs` (default 0). Returns how many were open. */
  reset(refuseMs?: number): number;
  close(): Promise<void>;
}

interface Pipe {
  readonly client: Socket;
  readonly server: Socket;
  /** Chunks read while frozen, to be written on thaw, in order. */
  readonly held: { toServer: Buffer[]; toClient: Buffer[] };
}

/** Starts a proxy with one loopback listener per `targets` port (the NATS nodes' client ports). */
export async function startNatsProxy(targets: readonly number[], host = '127.0.0.1'): Promise<NatsProxy> {
  const pipes = new Set<Pipe>();
  const stats = { connections: 0, toServer: 0, toClient: 0, resets: 0, refused: 0 };
  let frozen = false;
  let refuseUntil = 0;
  const servers: Server[] = [];

  const forward = (from: Socket, to: Socket, held: Buffer[], count: 'toServer' | 'toClient'): void => {
    from.on('data', (chunk: Buffer) => {
      if (frozen) {
        // A chunk read just before pause() took effect: keep it, in order.
        held.push(chunk);
        from.pause();
        return;
      }
      stats[count] += chunk.length;
      if (!to.write(chunk)) from.pause();
    });
    to.on('drain', () => {
      if (!frozen) from.resume();
    });
  };

  const accept = (port: number) => (client: Socket): void => {
    stats.connections += 1;
    if (Date.now() < refuseUntil) {
      stats.refused += 1;
      client.destroy();
      return;
    }
    const server = connect({ host, port });
    const pipe: Pipe = { client, server, held: { toServer: [], toClient: [] } };
    pipes.add(pipe);
    const end = (): void => {
      if (!pipes.delete(pipe)) return;
      client.destroy();
      server.destroy();
    };
    for (const s of [client, server]) {
      s.setNoDelay(true);
      s.on('error', end);
      s.on('close', end);
    }
    forward(client, server, pipe.held.toServer, 'toServer');
    forward(server, client, pipe.held.toClient, 'toClient');
    if (frozen) {
      client.pause();
      server.pause();
    }
  };

  try {
    for (const port of targets) {
      const listener = createServer({ noDelay: true }, accept(port));
      await new Promise<void>((resolve, reject) => {
        listener.once('error', reject);
        listener.listen(0, host, () => {
          listener.off('error', reject);
          resolve();
        });
      });
      servers.push(listener);
    }
  } catch (err) {
    for (const s of servers) s.close();
    throw err;
  }

  const urls = servers.map((s) => {
    const address = s.address();
    if (address === null || typeof address === 'string') throw new Error('the proxy listener has no port');
    return `nats://${host}:${address.port}`;
  });

  return {
    urls,
    stats,
    get frozen() {
      return frozen;
    },
    get open() {
      return pipes.size;
    },
    freeze() {
      frozen = true;
      for (const pipe of pipes) {
        pipe.client.pause();
        pipe.server.pause();
      }
    },
    thaw() {
      if (!frozen) return;
      frozen = false;
      for (const pipe of pipes) {
        for (const [held, to, count] of [
          [pipe.held.toServer, pipe.server, 'toServer'],
          [pipe.held.toClient, pipe.client, 'toClient'],
        ] as const) {
          for (const chunk of held.splice(0)) {
            stats[count] += chunk.length;
            to.write(chunk);
          }
        }
        pipe.client.resume();
        pipe.server.resume();
      }
    },
    reset(refuseMs = 0) {
      const n = pipes.size;
      stats.resets += 1;
      refuseUntil = Date.now() + refuseMs;
      for (const pipe of [...pipes]) {
        pipes.delete(pipe);
        pipe.client.destroy();
        pipe.server.destroy();
      }
      return n;
    },
    async close() {
      frozen = false;
      for (const pipe of [...pipes]) {
        pipes.delete(pipe);
        pipe.client.destroy();
        pipe.server.destroy();
      }
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    },
  };
}
