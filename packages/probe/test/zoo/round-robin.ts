import { createServer, request } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** A balancer that sends each request to the next target in turn. */
export interface RoundRobin {
  /** `http://127.0.0.1:<port>/mcp`. */
  readonly url: string;
  /** Target base URL of each request so far, in order. */
  readonly routed: readonly string[];
  close(): Promise<void>;
}

/**
 * A tiny round-robin HTTP proxy on 127.0.0.1: strict alternation, no
 * stickiness, bodies streamed both ways, and a client that goes away takes
 * its upstream request with it. Consecutive requests of one session land on
 * different instances, which is what exposes a per-process log.
 */
export async function startRoundRobin(targets: readonly string[]): Promise<RoundRobin> {
  if (targets.length === 0) throw new TypeError('startRoundRobin needs at least one target');
  const routed: string[] = [];
  const sockets = new Set<Socket>();
  let next = 0;
  const server = createServer((req, res) => {
    const target = new URL(targets[next % targets.length] as string);
    next += 1;
    routed.push(target.origin);
    const upstream = request(
      { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { ...req.headers, host: target.host } },
      (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        res.flushHeaders();
        up.pipe(res);
      },
    );
    upstream.on('error', () => {
      if (!res.headersSent) res.writeHead(502).end();
      else res.destroy();
    });
    res.on('close', () => upstream.destroy());
    req.pipe(upstream);
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    routed,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}
