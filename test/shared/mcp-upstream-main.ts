/**
 * The test kit's official-SDK MCP upstream (`startMcpUpstream`) in its own
 * process, for the gateway benchmark and the chaos harness: the upstream, the
 * client and the gateway each get an event loop (the client's CPU never counts
 * against the upstream), and a chaos run can crash and restart it like a real
 * server. Prints one JSON ready line with the port; closes on SIGTERM/SIGINT.
 *
 * Flags: `--port N` (default any; a restart passes its old port),
 * `--event-store` (the SDK's `InMemoryEventStore`), `--json` (`enableJsonResponse`).
 */
import { startMcpUpstream } from '@tether/testing';
import { stopWith } from './stop-with.js';

const args = process.argv.slice(2);
const portAt = args.indexOf('--port');
const port = portAt === -1 ? 0 : Number(args[portAt + 1]);
const upstream = await startMcpUpstream({ eventStore: args.includes('--event-store'), jsonResponse: args.includes('--json'), port });
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: upstream.port, url: upstream.url })}\n`);

stopWith(() => upstream.close());
