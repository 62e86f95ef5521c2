/**
 * Reproduces the task finding of docs/reliability.md ("a runner that cannot
 * store its outcome drops it"): a gateway whose task call ends while it
 * cannot reach NATS (here its NATS connection is frozen for 6 s, past the
 * task table's 5 s request timeout; in the chaos runs a power loss or a
 * leader election did it) logs "could not store a task outcome" and forgets
 * the call. The upstream's result is gone. The task stays `working` with
 * the live instance as its runner: every other instance probes the runner,
 * finds it alive and answers `working`, until the TTL (1 h). Only a read
 * that lands on the runner itself settles it, `failed` with
 * `runner_lost` ("the gateway instance running this task stopped before the
 * upstream answered"), which is not what happened.
 *
 *   npx tsc -b && npx tsx test/chaos/repro/task-outcome-lost.ts [--poll-s 30]
 *
 * Two gateways on one nats-server; gateway A reaches it through the chaos
 * harness's TCP proxy (`nats-proxy.ts`). A `slow_compute {seconds: 2}` task
 * is created on A, A's proxy is frozen from 1.2 s to 7.2 s (the upstream
 * answers at 2 s), then the task is polled through B only. Exit 1 when
 * reproduced (B still answers `working` after `--poll-s` seconds).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { startNatsServer, startServiceProcess, startTaskUpstream } from '@tether/testing';
import { startNatsProxy } from '../nats-proxy.js';

const pollS = Number(process.argv[process.argv.indexOf('--poll-s') + 1] ?? '30') || 30;
const MAIN = fileURLToPath(new URL('../../../services/gateway/dist/main.js', import.meta.url));
const PROTOCOL = '2026-07-28';
const META = {
  'io.modelcontextprotocol/protocolVersion': PROTOCOL,
  'io.modelcontextprotocol/clientInfo': { name: 'repro', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

const nats = await startNatsServer();
const upstream = await startTaskUpstream();
const proxy = await startNatsProxy([nats.port]);
const gateway = (name: string, natsUrl: string) =>
  startServiceProcess({
    name,
    command: process.execPath,
    args: [MAIN, '--port', '0', '--nats', natsUrl, '--namespace', 'repro_outcome', '--upstream', upstream.url, '--instance-id', name],
    readyLine: (json) => json.msg === 'listening',
  });
const a = await gateway('a', proxy.urls[0]!);
const b = await gateway('b', nats.url);
let id = 1;
const rpc = async (port: number, method: string, name: string, params: Record<string, unknown>): Promise<any> => {
  const res = await fetch(`http://127.0.0.1:${port}/mcp`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': PROTOCOL, 'mcp-method': method, 'mcp-name': name },
    body: JSON.stringify({ jsonrpc: '2.0', id: id++, method, params: { ...params, _meta: META } }),
  });
  return JSON.parse(await res.text());
};

let reproduced = false;
try {
  const created = await rpc(a.port!, 'tools/call', 'slow_compute', { name: 'slow_compute', arguments: { seconds: 2, label: 'repro' } });
  const taskId = created.result?.taskId as string;
  console.log(`created on A: ${JSON.stringify(created.result)}`);
  await sleep(1_200);
  proxy.freeze();
  console.log('A cut off from NATS (frozen) at 1.2 s; the upstream answers at 2 s');
  await sleep(6_000);
  proxy.thaw();
  console.log(`A reconnected at 7.2 s; upstream slow_compute calls ${upstream.calls('slow_compute')}, aborted ${upstream.aborts('slow_compute')} (it did the work)`);
  const warned = a.stdoutJson.filter((l) => l.msg === 'could not store a task outcome; the next reader settles it as lost').length;
  console.log(`A logged "could not store a task outcome" ${warned} time(s)`);
  const until = Date.now() + pollS * 1000;
  let last: any;
  let polls = 0;
  while (Date.now() < until) {
    last = (await rpc(b.port!, 'tasks/get', taskId, { taskId })).result;
    polls += 1;
    if (last?.status !== 'working') break;
    await sleep(100);
  }
  console.log(`B after ${polls} polls over ${pollS} s: ${last?.status} (${JSON.stringify(last).slice(0, 200)})`);
  reproduced = last?.status === 'working';
  const viaA = (await rpc(a.port!, 'tasks/get', taskId, { taskId })).result;
  console.log(`one read through A, the runner: ${viaA?.status} ${JSON.stringify(viaA?.error ?? viaA?.result)}`);
  console.log(reproduced ? 'REPRODUCED: the outcome was dropped; another instance answers working with no end in sight' : 'not reproduced');
} finally {
  await Promise.all([a.stop('SIGKILL', 2_000), b.stop('SIGKILL', 2_000)]).catch(() => undefined);
  await proxy.close();
  await upstream.close();
  await nats.cleanup();
}
process.exit(reproduced ? 1 : 0);
