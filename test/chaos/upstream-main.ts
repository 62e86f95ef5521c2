/**
 * A chaos upstream in its own process (so it can crash and restart like a
 * real server, and its CPU is not the harness's): the test kit's official-SDK
 * MCP server on a fixed port. Prints one JSON ready line with the port;
 * closes on SIGTERM/SIGINT. Flags: `--port N` (default any), `--event-store`.
 */
import { startMcpUpstream } from '@tether/testing';

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt === -1 ? 0 : Number(args[portAt + 1]);
const upstream = await startMcpUpstream({ eventStore: args.includes('--event-store'), port });
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: upstream.port, url: upstream.url })}\n`);

let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  upstream.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The harness SIGKILLs us when it exits; if it was SIGKILLed itself, we
// notice being re-parented and stop on our own.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) stop();
}, 2_000).unref();
