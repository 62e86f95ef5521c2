/**
 * The reference server, `@modelcontextprotocol/server-everything`, in its
 * Streamable HTTP mode (`dist/transports/streamableHttp.js`, what
 * `mcp-server-everything streamableHttp` runs), in its own process for the
 * chaos harness: its own code, sessions and per-session event store,
 * unchanged. Around it only what a harness needs: it listens on
 * 127.0.0.1 (it would take every address, which `--net hosts` forwards
 * from), on `--port N` (default any: a restart passes its old port), and
 * prints one JSON ready line with the port it got (its own line is on
 * stderr, and says 0 when asked for any). Its per-request chatter on
 * stdout is dropped.
 */
import { createRequire } from 'node:module';
import { Server } from 'node:net';
import { pathToFileURL } from 'node:url';

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
process.env['PORT'] = portAt === -1 ? '0' : String(Number(args[portAt + 1]));

// Express calls `listen(PORT, callback)`: add the host, and report the port once it listens.
const listen = Server.prototype.listen;
Server.prototype.listen = function (this: Server, ...rest: unknown[]): Server {
  this.once('listening', () => {
    const address = this.address();
    if (typeof address === 'object' && address !== null) process.stdout.write(`${JSON.stringify({ msg: 'listening', port: address.port })}\n`);
  });
  const withHost = (typeof rest[0] === 'number' || typeof rest[0] === 'string') && typeof rest[1] === 'function' ? [rest[0], '127.0.0.1', rest[1]] : rest;
  return (listen as (...a: unknown[]) => Server).apply(this, withHost);
} as typeof Server.prototype.listen;
console.log = () => undefined;

const entry = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/transports/streamableHttp.js');
await import(pathToFileURL(entry).href);

// Whoever started us SIGKILLs us when it exits; if it was SIGKILLed itself,
// we notice being re-parented and exit on our own.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.exit(0);
}, 2_000).unref();
