/**
 * `npm start`: brings up Tether's local stack and says what is running.
 * scripts/start.sh runs it on Node 24 (fetched into .tether/node24/ when the
 * machine's node is another), and every process it starts on the same binary.
 *
 * - NATS: the one at TETHER_NATS_URL, or else an embedded nats-server child
 *   process with JetStream and its data under `.tether/nats` (or
 *   `$TETHER_DATA_DIR/nats`).
 * - A demo upstream MCP server (official SDK, with an event store): tools
 *   `stream_progress`, `notify_standalone`, `echo`.
 * - The session-log gRPC service (cursor API for custom servers) on
 *   TETHER_GRPC_PORT (default 50051), with a random bearer token printed here.
 * - Two gateway processes on TETHER_PORT (default 8080) and the next port.
 * Then it checks a cross-instance resume end to end and prints the endpoints.
 * Ctrl-C stops everything this script started.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isResumeAck, SseParser } from '@tether/protocol';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';
import type { McpUpstream, NatsServer, ServiceProcess } from '@tether/testing';

const say = (line: string): void => {
  process.stdout.write(`[tether] ${line}\n`);
};
const GATEWAY_MAIN = fileURLToPath(new URL('../services/gateway/dist/main.js', import.meta.url));
const SESSION_LOG_MAIN = fileURLToPath(new URL('../services/session-log/dist/main.js', import.meta.url));

/**
 * A current nats-server (2.11 or later, what Tether needs): scripts/nats-server.sh
 * finds or fetches one (Debian unstable's package into .tether/). It never
 * settles for an older one such as Debian 12's 2.9.10: it says on stderr what
 * it found and how to get a current one, and exits 1.
 */
function newestNatsServer(): string {
  const script = fileURLToPath(new URL('./nats-server.sh', import.meta.url));
  try {
    return execFileSync('bash', [script, 'current'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
  } catch {
    throw new Error('no nats-server 2.11 or later to embed (scripts/nats-server.sh said why above); or point TETHER_NATS_URL at a running one');
  }
}

async function main(): Promise<void> {
  const started: { stop(): Promise<unknown> }[] = [];
  let stopping = false;
  const stop = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      say('stopping');
      for (const part of started.reverse()) await part.stop().catch(() => undefined);
    }
    process.exit(code);
  };
  process.on('SIGINT', () => void stop(0));
  process.on('SIGTERM', () => void stop(0));

  try {
    say(`node        ${process.version}  (${process.execPath}; the gateways and the session-log service run on it too)`);
    let natsUrl = process.env.TETHER_NATS_URL ?? '';
    if (natsUrl === '') {
      const storeDir = resolve(process.env.TETHER_DATA_DIR ?? '.tether', 'nats');
      mkdirSync(storeDir, { recursive: true });
      const nats: NatsServer = await startNatsServer({ storeDir, bin: newestNatsServer() });
      started.push({ stop: () => nats.stop() });
      natsUrl = nats.url;
      say(`nats        ${natsUrl}  (embedded nats-server ${nats.version} at ${nats.bin}, pid ${nats.pid}, data in ${storeDir})`);
    } else {
      say(`nats        ${natsUrl}  (from TETHER_NATS_URL)`);
    }

    const upstream: McpUpstream = await startMcpUpstream({ eventStore: true });
    started.push({ stop: () => upstream.close() });
    say(`upstream    ${upstream.url}  (demo MCP server: stream_progress, notify_standalone, echo)`);

    const token = randomBytes(18).toString('base64url');
    const grpcPort = process.env.TETHER_GRPC_PORT ?? '50051';
    const sessionLog = await startServiceProcess({
      name: 'session-log',
      command: process.execPath,
      args: [SESSION_LOG_MAIN, '--port', grpcPort, '--nats', natsUrl, '--token', `demo:${token}`],
      readyLine: (json) => json.msg === 'listening',
    });
    started.push({ stop: () => sessionLog.stop('SIGTERM', 10_000) });
    say(`session-log grpc://127.0.0.1:${sessionLog.port}  (cursor API; bearer token ${token})`);

    const basePort = Number(process.env.TETHER_PORT ?? 8080);
    const gateways: ServiceProcess[] = [];
    for (const [i, name] of ['gateway-a', 'gateway-b'].entries()) {
      const port = basePort === 0 ? 0 : basePort + i;
      const gateway = await startServiceProcess({
        name,
        command: process.execPath,
        args: [GATEWAY_MAIN, '--port', String(port), '--nats', natsUrl, '--upstream', upstream.url, '--instance-id', name],
        readyLine: (json) => json.msg === 'listening',
      });
      started.push({ stop: () => gateway.stop('SIGTERM', 10_000) });
      gateways.push(gateway);
      say(`${name}   http://127.0.0.1:${gateway.port}/mcp  (pid ${gateway.pid})`);
    }
    const [a, b] = gateways.map((g) => `http://127.0.0.1:${g.port}/mcp`) as [string, string];
    await crossInstanceCheck(a, b);
    say('ready. Point an MCP client at either gateway; resume on the other one after a dropped connection.');
    say(`see a cross-instance resume:  npx tether-probe ${a} --via ${b} --tool stream_progress --args '{"count":20,"delayMs":20}'`);
    say('press Ctrl-C to stop');
  } catch (err) {
    process.stderr.write(`[tether] failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
    await stop(1);
  }
}

/** A tool call streamed by gateway A, resumed on gateway B after its second event: B must continue exactly. */
async function crossInstanceCheck(a: string, b: string): Promise<void> {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  const init = await fetch(a, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tether-start', version: '0' } } }),
  });
  const sessionId = init.headers.get('mcp-session-id') ?? '';
  await init.arrayBuffer();
  const call = await fetch(a, {
    method: 'POST',
    headers: { ...headers, 'mcp-session-id': sessionId },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'stream_progress', arguments: { count: 5, delayMs: 20 }, _meta: { progressToken: 1 } } }),
  });
  const onA = (await events(call.body)).filter((m) => m.data !== '').map((m) => m.id);
  const resumed = await fetch(b, { headers: { ...headers, 'mcp-session-id': sessionId, 'last-event-id': onA[1]! } });
  const [ack, ...rest] = await events(resumed.body);
  const onB = rest.filter((m) => m.data !== '').map((m) => m.id);
  const expected = onA.slice(2).join(' ');
  // A resumed stream opens with its acknowledgment: `event: resume`, the cursor as its id.
  const acked = ack !== undefined && isResumeAck(ack) && ack.id === onA[1];
  if (resumed.headers.get('tether-resume') !== 'resumed' || !acked || onB.join(' ') !== expected) {
    throw new Error(`cross-instance resume check failed: gateway B sent ${acked ? 'its resume acknowledgment, then ' : 'no resume acknowledgment, '}${onB.join(' ') || 'nothing'}, expected ${expected}`);
  }
  await fetch(a, { method: 'DELETE', headers: { 'mcp-session-id': sessionId } });
  say(`self-check passed: a stream recorded via gateway A resumed on gateway B after event 2 with exactly the ${onB.length} events that followed`);
}

async function events(body: ReadableStream<Uint8Array> | null): Promise<{ id: string | undefined; event: string | undefined; data: string }[]> {
  const out: { id: string | undefined; event: string | undefined; data: string }[] = [];
  const parser = new SseParser();
  if (body === null) return out;
  for await (const chunk of body) for (const m of parser.push(chunk)) if (m.id !== undefined) out.push({ id: m.id, event: m.event, data: m.data });
  return out;
}

void main();
