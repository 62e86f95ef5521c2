import { connect, createServer } from 'node:net';
import type { Server, Socket } from 'node:net';
import { LOOPBACK } from './ports.js';

/**
 * A loopback TCP proxy for one directed cluster route: node `from` dials
 * node `to`'s route port through it. Bytes pass untouched; `block()`
 * destroys every connection on both sides and refuses new ones (accepted
 * and closed at once, so the dialer sees the route drop, as it would on a
 * cut link) until `unblock()`.
 */
export interface RouteProxy {
  /** Index of the dialing node in the cluster's `servers`. */
  readonly from: number;
  /** Index of the node whose route port this forwards to. */
  readonly to: number;
  /** The port `from`'s config names as its route to `to`. */
  readonly port: number;
  readonly blocked: boolean;
  /** Connections open through it now. */
  readonly open: number;
  /**
   * The local ports of the connections it opened to `to`: what `to` lists as
   * the remote port of each route it accepted through this proxy (`/routez`).
   */
  targetSidePorts(): number[];
  /** Destroys every connection and refuses new ones; returns how many were open. */
  block(): number;
  unblock(): void;
  /** Stops listening and destroys every connection. Idempotent. */
  close(): Promise<void>;
}

export async function startRouteProxy(from: number, to: number, targetPort: number): Promise<RouteProxy> {
  const pairs = new Set<{ client: Socket; target: Socket }>();
  let blocked = false;
  let closing: Promise<void> | undefined;

  const server: Server = createServer({ noDelay: true }, (client) => {
    if (blocked || closing !== undefined) {
      client.destroy();
      return;
    }
    const target = connect({ host: LOOPBACK, port: targetPort, noDelay: true });
    const pair = { client, target };
    pairs.add(pair);
    const drop = () => {
      pairs.delete(pair);
      client.destroy();
      target.destroy();
    };
    // Either side ending or failing ends both: a route is one TCP stream.
    for (const socket of [client, target]) {
      socket.on('error', drop);
      socket.on('close', drop);
    }
    client.pipe(target);
    target.pipe(client);
  });
  await new Promise<void>((done, reject) => {
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port: 0 }, () => {
      server.off('error', reject);
      done();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('route proxy: no TCP address after listen');

  const destroyAll = (): number => {
    const open = pairs.size;
    for (const { client, target } of pairs) {
      client.destroy();
      target.destroy();
    }
    pairs.clear();
    return open;
  };

  return {
    from,
    to,
    port: address.port,
    get blocked() {
      return blocked;
    },
    get open() {
      return pairs.size;
    },
    targetSidePorts: () => [...pairs].map(({ target }) => target.localPort).filter((port): port is number => port !== undefined),
    block() {
      blocked = true;
      return destroyAll();
    },
    unblock() {
      blocked = false;
    },
    close() {
      closing ??= new Promise<void>((done) => {
        server.close(() => done());
        destroyAll();
      });
      return closing;
    },
  };
}
