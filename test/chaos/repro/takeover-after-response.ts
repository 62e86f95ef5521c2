/**
 * Reproduces finding 2 of docs/reliability.md: a POST stream whose writer
 * died after recording the final response but before the `end` marker (a
 * SIGKILL between the two appends) is "taken over" as if the response were
 * still owed. The gateway appends a second response for the same request
 * (JSON-RPC -32001 "upstream response stream was lost", `tether: abandoned`)
 * and `end abandoned`, refuses the resume with 404 `abandoned`, and
 * terminates the session.
 *
 *   npx tsc -b && npx tsx test/chaos/repro/takeover-after-response.ts [--from-response]
 *
 * The dead writer's records are written with `SessionLog.append` exactly as
 * the gateway's pump writes them (opening prime owing request 5, a progress
 * event, the result), by no live writer, as after a SIGKILL. The client
 * resumes from the progress event (it missed the result) or, with
 * `--from-response`, from the result itself. Exit 1 when reproduced.
 */
import { fileURLToPath } from 'node:url';
import { SseParser } from '@tether/protocol';
import { SessionLog } from '@tether/session-log';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';

const fromResponse = process.argv.includes('--from-response');
const nats = await startNatsServer();
const upstream = await startMcpUpstream({ eventStore: false });
const gateway = await startServiceProcess({
  name: 'gateway',
  command: process.execPath,
  args: [fileURLToPath(new URL('../../../services/gateway/dist/main.js', import.meta.url)), '--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--namespace', 'repro_takeover'],
  readyLine: (json) => json.msg === 'listening',
});
const url = `http://127.0.0.1:${gateway.port}/mcp`;
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'repro', version: '0' } } }) });
const sessionId = init.headers.get('mcp-session-id')!;
await init.text();
await (await fetch(url, { method: 'POST', headers: { ...headers, 'mcp-session-id': sessionId }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();

const log = await SessionLog.create({ servers: nats.url, namespace: 'repro_takeover' });
const stream = log.newStreamId();
await log.append(sessionId, stream, 'prime', Buffer.from(JSON.stringify({ requests: ['5'] })));
const progress = await log.append(sessionId, stream, 'event', Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'p5', progress: 1, total: 1 } })));
const result = await log.append(sessionId, stream, 'event', Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 5, result: { content: [{ type: 'text', text: 'done 1' }] } })));
const cursor = fromResponse ? result.id : progress.id;
console.log(`the dead writer recorded the result of request 5 (${result.id}) but no end marker; resuming from ${cursor}`);
const appended: string[] = [];
const sub = log.connection.subscribe(`${log.config.subjectPrefix}.live.${sessionId}.${stream}`);
void (async () => {
  for await (const m of sub) appended.push(`${m.headers?.get('Tether-Kind')} ${m.headers?.get('Tether-End') ?? ''} ${new TextDecoder().decode(m.data)}`.replace(/\s+/g, ' '));
})();

const res = await fetch(url, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId, 'last-event-id': cursor, 'mcp-protocol-version': '2025-11-25' }, signal: AbortSignal.timeout(8_000) });
console.log(`resume answered ${res.status}, Tether-Resume: ${res.headers.get('tether-resume')}`);
const parser = new SseParser();
for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) for (const m of parser.push(chunk)) console.log(`  delivered id=${m.id} data=${m.data}`);
await new Promise((done) => setTimeout(done, 300));
console.log('appended by the takeover:');
for (const line of appended) console.log(`  ${line}`);
const state = (await log.getSession(sessionId))?.state;
console.log(`session: ${state}`);
sub.unsubscribe();
await log.close();
await gateway.kill();
await upstream.close();
await nats.cleanup();
const reproduced = appended.some((line) => line.includes('"id":5,"error"'));
console.log(reproduced ? 'REPRODUCED: a second response for request 5 was appended after its result' : 'not reproduced');
process.exit(reproduced ? 1 : 0);
