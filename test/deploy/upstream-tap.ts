/**
 * A pass-through HTTP proxy between the gateways and the upstream MCP server
 * that notes when each progress notification *left the upstream*. Tests
 * compare that with when the client received it: "the first event arrived
 * before the last one was produced" is then a fact about this run, not a
 * guess from wall-clock budgets on a busy machine.
 */
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface UpstreamTap {
  /** `http://127.0.0.1:<port>/mcp`: give this to the gateways as their upstream. */
  readonly url: string;
  /** When progress `n` (of any request since the last `reset()`) was first seen leaving the upstream. */
  producedAt(progress: number): number | undefined;
  reset(): void;
  close(): Promise<void>;
}

const PROGRESS = /notifications\/progress[^\n]*?"progress":(\d+)/g;

export async function startUpstreamTap(target: string): Promise<UpstreamTap> {
  const targetUrl = new URL(target);
  let produced = new Map<number, number>();
  const sockets = new Set<Socket>();
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const upstreamReq = request(
      { host: targetUrl.hostname, port: targetUrl.port, method: req.method, path: req.url, headers: req.headers },
      (upstreamRes) => {
        res.writeHead(upstreamRes.statusCode ?? 502, upstreamRes.headers);
        res.flushHeaders();
        let tail = '';
        upstreamRes.on('data', (chunk: Buffer) => {
          const now = Date.now();
          const text = tail + chunk.toString('utf8');
          for (const m of text.matchAll(PROGRESS)) {
            const n = Number(m[1]);
            if (!produced.has(n)) produced.set(n, now);
          }
          tail = text.slice(-200);
          res.write(chunk);
        });
        upstreamRes.on('end', () => res.end());
        upstreamRes.on('error', () => res.destroy());
      },
    );
    upstreamReq.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    res.on('close', () => upstreamReq.destroy());
    req.pipe(upstreamReq);
  });
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}${targetUrl.pathname}`,
    producedAt: (n) => produced.get(n),
    reset: () => void (produced = new Map()),
    close: () =>
      new Promise<void>((done) => {
        server.close(() => done());
        for (const s of sockets) s.destroy();
      }),
  };
}
