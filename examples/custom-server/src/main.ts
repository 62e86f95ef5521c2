#!/usr/bin/env node
/**
 * `tether-example-custom-server --port 3000 --log 127.0.0.1:50051 --token <t>`
 * (or PORT, TETHER_LOG_TARGET, TETHER_LOG_TOKEN). Prints one JSON line
 * `{"msg":"listening","port":…}` when ready; SIGTERM stops it.
 */
import { parseArgs } from 'node:util';
import { startCustomServer } from './server.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: process.env['PORT'] ?? '0' },
    log: { type: 'string', default: process.env['TETHER_LOG_TARGET'] ?? '127.0.0.1:50051' },
    token: { type: 'string', default: process.env['TETHER_LOG_TOKEN'] },
    instance: { type: 'string' },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('Usage: tether-example-custom-server [--port N] [--log host:port] [--token T] [--instance NAME]\n');
  process.exit(0);
}
const server = await startCustomServer({
  log: values.log,
  port: Number(values.port),
  ...(values.token === undefined ? {} : { token: values.token }),
  ...(values.instance === undefined ? {} : { instance: values.instance }),
});
process.stdout.write(`${JSON.stringify({ msg: 'listening', port: server.port, url: `${server.url}/mcp` })}\n`);
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
process.on('SIGINT', () => void server.close().then(() => process.exit(0)));
