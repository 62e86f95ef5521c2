#!/usr/bin/env node
// Demo upstream MCP server for deploy/compose (image: deploy/docker/demo-upstream.Dockerfile).
//
// It is the official-SDK server of the test kit (`startMcpUpstream` from
// @tether/testing, built workspace): Streamable HTTP on /mcp, an event store
// (SSE ids, priming events, resumable), and the tools
//   stream_progress {count, delayMs}    progress notifications on the call's own stream
//   notify_standalone {count, delayMs}  server-initiated messages on the GET stream
//   echo {text}
// The kit binds 127.0.0.1 only, so this file puts a small streaming HTTP
// front on DEMO_UPSTREAM_HOST:DEMO_UPSTREAM_PORT (defaults 127.0.0.1:3001;
// the image sets 0.0.0.0) that also answers GET /healthz.
//
//   node deploy/demo-upstream/server.mjs      (after `npx tsc -b`)
import { createServer, request } from 'node:http';
import { startMcpUpstream, UpstreamTools } from '@tether/testing';

const host = process.env.DEMO_UPSTREAM_HOST ?? '127.0.0.1';
const port = Number(process.env.DEMO_UPSTREAM_PORT ?? 3001);
const log = (level, msg, fields = {}) => process.stdout.write(`${JSON.stringify({ level, time: Date.now(), service: 'tether-demo-upstream', msg, ...fields })}\n`);

const upstream = await startMcpUpstream({ eventStore: true });

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/healthz') return void res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
  const inner = request({ host: '127.0.0.1', port: upstream.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
    res.writeHead(answer.statusCode ?? 502, answer.headers);
    // SSE: headers now, then every chunk as the SDK writes it.
    res.flushHeaders();
    answer.pipe(res);
    answer.on('error', () => res.destroy());
  });
  inner.on('error', (err) => {
    if (res.headersSent) return void res.destroy();
    res.writeHead(502, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32603, message: `demo upstream: ${err.message}` } }));
  });
  // A client (a gateway) that goes away closes the inner request too, as a direct connection would.
  res.on('close', () => inner.destroy());
  req.pipe(inner);
});

server.listen(port, host, () => {
  const address = server.address();
  log(30, 'listening', { host, port: typeof address === 'object' && address !== null ? address.port : port, path: '/mcp', tools: Object.values(UpstreamTools) });
});

const stop = (signal) => {
  log(30, 'stopping', { signal });
  server.close();
  server.closeAllConnections();
  upstream.close().then(() => process.exit(0), () => process.exit(1));
};
process.once('SIGTERM', () => stop('SIGTERM'));
process.once('SIGINT', () => stop('SIGINT'));
