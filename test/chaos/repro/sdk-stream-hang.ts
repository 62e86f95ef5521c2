/**
 * Reproduces a hang the chaos run found with `--target sdk-example`: an SDK
 * example instance streams a tool call's progress when the log stream's
 * leader is SIGKILLed (and restarted a second later). In about half the
 * runs the call's POST response then neither continues nor ends: no event,
 * no JSON-RPC error, no `end` in the log; the instance stays alive (its
 * presence answers), so no reader elsewhere takes the stream over either,
 * and the client waits until its own timeout, told nothing. The gateway
 * under the same faults ends such streams (`log_failed`) and is resumed.
 *
 *   npx tsc -b && npx tsx test/chaos/repro/sdk-stream-hang.ts [--freeze-ms 5000] [--no-kill]
 *
 * A 3-node cluster with the log at R3, one `tether-sdk-example` (the chaos
 * launcher) whose `--nats` goes through the chaos harness's TCP proxy, and
 * a raw POST of `stream {count: 200, delayMs: 20}`. After the 20th event
 * the proxy freezes for `--freeze-ms` (default 0: not at all) and, 1 s
 * later, the log stream's leader is SIGKILLed and restarted (`--no-kill`:
 * not). Prints what the stream delivered and how it ended; exit 1 when it
 * hung (no event or end for 15 s).
 */
import { fileURLToPath } from 'node:url';
import { SseParser } from '@tether/protocol';
import { startNatsCluster, startServiceProcess } from '@tether/testing';
import { streamLeaderIndex } from '../faults.js';
import { startNatsProxy } from '../nats-proxy.js';

const at = process.argv.indexOf('--freeze-ms');
const freezeMs = at === -1 ? 0 : Number(process.argv[at + 1]);
const killLeader = !process.argv.includes('--no-kill');
const cluster = await startNatsCluster({ size: 3, clusterLines: ['no_advertise: true'] });
const proxy = await startNatsProxy(cluster.servers.map((s) => s.port));
const example = await startServiceProcess({
  name: 'sdk-example',
  command: process.execPath,
  args: ['--import', 'tsx', fileURLToPath(new URL('../sdk-example-main.ts', import.meta.url)), '--port', '0', '--nats', proxy.urls.join(','), '--instance', 'repro'],
  env: { TETHER_CHAOS_LOG_REPLICAS: '3', TETHER_CHAOS_NAMESPACE: 'repro_hang' },
  readyLine: (json) => json.msg === 'listening',
  readyTimeoutMs: 30_000,
});
const url = `http://127.0.0.1:${example.port}/mcp`;
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'repro', version: '0' } } }) });
const sessionId = init.headers.get('mcp-session-id')!;
await init.text();
await (await fetch(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();

const abort = new AbortController();
const res = await fetch(url, {
  method: 'POST',
  headers: { ...headers, 'mcp-session-id': sessionId },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'stream', arguments: { count: 200, delayMs: 20 }, _meta: { progressToken: 't' } } }),
  signal: abort.signal,
});
const parser = new SseParser();
let events = 0;
let last = '';
let lastAt = Date.now();
let thawedAt: number | undefined;
let ended = 'open';
const watchdog = setInterval(() => {
  if (thawedAt !== undefined && Date.now() - Math.max(lastAt, thawedAt) > 15_000) {
    ended = 'hung';
    abort.abort();
  }
}, 500);
try {
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    for (const msg of parser.push(chunk)) {
      events += 1;
      last = msg.data.slice(0, 120);
      lastAt = Date.now();
      if (events === 20) {
        if (freezeMs > 0) {
          proxy.freeze();
          process.stdout.write(`froze the example's NATS connection after 20 events, for ${freezeMs} ms\n`);
        }
        if (killLeader) {
          setTimeout(() => {
            void (async () => {
              const i = (await streamLeaderIndex(cluster, 'TETHER_LOG_repro_hang')) ?? 0;
              process.stdout.write(`SIGKILL nats${i + 1} (the log stream's leader), restart\n`);
              await cluster.servers[i]!.kill();
              await new Promise((r) => setTimeout(r, 1_000));
              await cluster.servers[i]!.restart();
              process.stdout.write(`nats${i + 1} back\n`);
            })();
          }, 1_000);
        }
        setTimeout(() => {
          proxy.thaw();
          thawedAt = Date.now();
          if (freezeMs > 0) process.stdout.write('thawed\n');
        }, freezeMs);
      }
    }
  }
  ended = 'closed by the server';
} catch {
  if (ended === 'open') ended = 'broken';
}
clearInterval(watchdog);
process.stdout.write(`${events} events, then ${ended}; last event: ${last}\n`);
await example.stop();
await proxy.close();
await cluster.cleanup();
process.exit(ended === 'hung' ? 1 : 0);
