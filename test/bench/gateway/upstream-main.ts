/**
 * The benchmark's MCP upstream as its own process, so the upstream, the
 * benchmark client and the gateway each get an event loop (and the client's
 * CPU never counts against the upstream). Prints one JSON ready line with the
 * port; closes on SIGTERM/SIGINT. Flags: `--json` (enableJsonResponse),
 * `--no-event-store`.
 */
import { startMcpUpstream } from '@tether/testing';

const args = process.argv.slice(2);
const upstream = await startMcpUpstream({ eventStore: !args.includes('--no-event-store'), jsonResponse: args.includes('--json') });
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: upstream.port, url: upstream.url })}\n`);

let stopping = false;
const stop = (): void => {
  if (stopping) return;
  stopping = true;
  upstream.close().finally(() => process.exit(0));
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// The benchmark SIGKILLs us when it exits; if it was SIGKILLed itself, we
// notice being re-parented and stop on our own.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) stop();
}, 2_000).unref();
