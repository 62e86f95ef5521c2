/**
 * `npm run bench:grpc`: what the gRPC hop costs, each figure beside the
 * in-process session-log library measured in the same run:
 *
 * 1. Append throughput: library `append` vs unary `Append` vs `AppendBatch`,
 *    at 1 stream and at 64 streams appending at once;
 * 2. Resume latency for a 100-event backlog: library `resume()` + `events()`
 *    vs the `Resume` RPC, on the same cursors, alternating;
 * 3. the gateway's latency per logged SSE event with `--nats` (library
 *    in-process) and with `--log grpc://` (this service), beside the
 *    upstream called directly.
 *
 * Real processes on loopback: a private nats-server, `tether-session-log`
 * (built dist), two gateways; the official-SDK upstream runs in this process.
 * Prints tables (progress on stderr) and writes bench-results/grpc-bench.json.
 * Never asserts. Knobs: BENCH_GRPC_EVENTS (events per throughput run,
 * default 6000), BENCH_GRPC_RESUMES (default 200), BENCH_GRPC_REPEATS
 * (per-event repeats, default 20).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { connect as h2connect, createServer as h2server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Metadata } from '@grpc/grpc-js';
import { callUnary, createCursorClient, EventKind } from '@tether/cursor-proto';
import type { AppendRequest, CursorServiceClient, ResumeResponse } from '@tether/cursor-proto';
import { principalDigest, SessionLog } from '@tether/session-log';
import { startMcpUpstream, startNatsServer, startServiceProcess } from '@tether/testing';
import type { ServiceProcess } from '@tether/testing';
import { endpoint, initialize, streamProgress } from './mcp-client.js';
import { int, ms, pct, progress, summarize, table } from './stats.js';
import type { Summary } from './stats.js';

const SERVICE_MAIN = fileURLToPath(new URL('../dist/main.js', import.meta.url));
const GATEWAY_MAIN = fileURLToPath(new URL('../../gateway/dist/main.js', import.meta.url));
const TOKEN = 'bench-token-0123456789abcdef';
const EVENTS = Number(process.env['BENCH_GRPC_EVENTS'] ?? 6000);
const RESUMES = Number(process.env['BENCH_GRPC_RESUMES'] ?? 200);
const REPEATS = Number(process.env['BENCH_GRPC_REPEATS'] ?? 20);
const PAYLOAD = Buffer.from(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 'bench', progress: 1, total: 100, message: 'x'.repeat(120) } }));
const BACKLOG = 100;

type Appender = (sessionId: string, stream: string, seq: number) => Promise<unknown>;

async function main(): Promise<void> {
  const started = performance.now();
  const nats = await startNatsServer();
  const processes: ServiceProcess[] = [];
  const upstream = await startMcpUpstream();
  let log: SessionLog | undefined;
  let client: CursorServiceClient | undefined;
  try {
    progress('starting tether-session-log');
    const service = await startServiceProcess({ name: 'session-log', command: process.execPath, args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `bench:${TOKEN}`, '--log-level', 'info'], readyLine: (o) => o.msg === 'listening' });
    processes.push(service);
    log = await SessionLog.create({ servers: nats.url });
    client = createCursorClient({ target: `127.0.0.1:${service.port}`, token: TOKEN });
    const grpc = client;
    // Sessions of the library and of the service are separate (the service scopes them by caller).
    const libSession = async (): Promise<string> => (await log!.createSession(principalDigest('bench'))).sessionId;
    const rpcSession = async (): Promise<string> => (await callUnary(grpc.openSession.bind(grpc), { principal: 'bench', meta: {} })).session!.sessionId;
    const entry = (sessionId: string, stream: string, seq: number): AppendRequest => ({ sessionId, stream, kind: EventKind.EVENT, payload: PAYLOAD, upstreamId: undefined, endReason: 0, traceparent: undefined, expectedSeq: seq });

    // 0. The floor of any hop on this machine: a bare HTTP/2 request/response on loopback.
    const floor = await http2RoundTrip();
    // A call the service answers without asking NATS (a malformed session id is refused up front).
    const grpcEmpty = summarize(await timed(300, () => callUnary(grpc.getSession.bind(grpc), { sessionId: 'x', principal: '' }).catch(() => undefined)));

    // 1. Append throughput.
    const library: Appender = (s, stream) => log!.append(s, stream, 'event', PAYLOAD);
    const unary: Appender = (s, stream, seq) => callUnary(grpc.append.bind(grpc), entry(s, stream, seq));
    const throughput: Record<string, number>[] = [];
    for (const streams of [1, 64]) {
      const row: Record<string, number> = { streams };
      for (const [name, newSession, append] of [['library', libSession, library], ['unary', rpcSession, unary]] as const) {
        progress(`append throughput: ${name}, ${streams} stream(s)`);
        row[name] = await lanes(streams, EVENTS, newSession, append);
      }
      progress(`append throughput: AppendBatch, ${streams} stream(s)`);
      row['batch'] = await batched(grpc, streams, EVENTS, rpcSession, entry);
      throughput.push(row);
    }

    // 2. Resume latency, 100-event backlog.
    progress(`resume latency: writing ${40} streams of ${BACKLOG + 50} events for each side`);
    const libStreams = await fill(40, libSession, library);
    const rpcStreams = await fill(40, rpcSession, unary);
    const libTimes: number[] = [];
    const rpcTimes: number[] = [];
    const rpcAck: number[] = [];
    for (let i = 0; i < RESUMES + 10; i += 1) {
      const k = Math.floor(Math.random() * 40);
      const at = Math.floor(Math.random() * 50);
      const runLib = async (): Promise<void> => {
        const t0 = performance.now();
        const result = await log!.resume(libStreams[k]!.sessionId, libStreams[k]!.ids[at]!, principalDigest('bench'));
        if (result.verdict !== 'resumed') throw new Error(`library resume: ${result.verdict}`);
        let n = 0;
        for await (const event of result.events()) if (++n === BACKLOG || event.kind === 'end') break;
        if (i >= 10) libTimes.push(performance.now() - t0);
      };
      const runRpc = async (): Promise<void> => {
        const t0 = performance.now();
        const times = await resumeRpc(grpc, rpcStreams[k]!.sessionId, rpcStreams[k]!.ids[at]!);
        if (i >= 10) {
          rpcTimes.push(times.last - t0);
          rpcAck.push(times.ack - t0);
        }
      };
      if (i % 2 === 0) await runLib().then(runRpc);
      else await runRpc().then(runLib);
    }
    const resume = { library: summarize(libTimes), grpc: summarize(rpcTimes), grpcAck: summarize(rpcAck) };

    // 3. Gateway per-event latency in both log modes.
    const gateway = async (name: string, args: string[]): Promise<ServiceProcess> => {
      const proc = await startServiceProcess({ name, command: process.execPath, args: [GATEWAY_MAIN, '--port', '0', '--upstream', upstream.url, '--instance-id', name, ...args], readyLine: (o) => o.msg === 'listening' });
      processes.push(proc);
      return proc;
    };
    progress('starting gateways (--nats and --log grpc://)');
    const local = await gateway('gw-local', ['--nats', nats.url]);
    const remote = await gateway('gw-grpc', ['--log', `grpc://127.0.0.1:${service.port}`, '--log-token', TOKEN]);
    const perEvent = await measurePerEvent({ direct: upstream.url, local: `http://127.0.0.1:${local.port}/mcp`, grpc: `http://127.0.0.1:${remote.port}/mcp` });

    await report({ floor, grpcEmpty, throughput, resume, perEvent, seconds: (performance.now() - started) / 1000 });
  } finally {
    client?.close();
    await log?.close();
    await Promise.all(processes.map((p) => p.stop('SIGTERM', 15_000).catch(() => undefined)));
    await upstream.close();
    await nats.cleanup();
  }
}

async function timed(n: number, f: () => Promise<unknown>): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i += 1) {
    const t0 = performance.now();
    await f();
    out.push(performance.now() - t0);
  }
  return out;
}

/** Round trips of a bare node:http2 POST on loopback, in-process: what any RPC costs here before gRPC does anything. */
async function http2RoundTrip(): Promise<Summary> {
  const server = h2server((_req, res) => res.end('x'));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const session = h2connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const req = session.request({ ':path': '/', ':method': 'POST' });
      req.on('data', () => undefined);
      req.on('end', resolve);
      req.end('y');
    });
  const samples = await timed(300, one);
  session.close();
  server.close();
  return summarize(samples);
}

/** `streams` lanes, each appending one event after another to its own stream, all at once; events/s. */
async function lanes(streams: number, total: number, newSession: () => Promise<string>, append: Appender): Promise<number> {
  const per = Math.ceil(total / streams);
  const ids = await Promise.all(Array.from({ length: streams }, () => newSession()));
  await Promise.all(ids.map((s) => append(s, '0', 1))); // opens each writer: not timed
  const t0 = performance.now();
  await Promise.all(ids.map(async (s) => {
    for (let seq = 2; seq <= per + 1; seq += 1) await append(s, '0', seq);
  }));
  return (per * streams) / ((performance.now() - t0) / 1000);
}

/** AppendBatch, one call at a time, each carrying 100 events of every stream (in order within a stream); events/s. */
async function batched(grpc: CursorServiceClient, streams: number, total: number, newSession: () => Promise<string>, entry: (s: string, stream: string, seq: number) => AppendRequest): Promise<number> {
  const ids = await Promise.all(Array.from({ length: streams }, () => newSession()));
  await callUnary(grpc.appendBatch.bind(grpc), { entries: ids.map((s) => entry(s, '0', 1)) });
  const perCall = Math.max(1, Math.floor(Math.min(1000, total) / streams));
  let seq = 2;
  let sent = 0;
  const t0 = performance.now();
  while (sent < total) {
    const entries: AppendRequest[] = [];
    for (let i = 0; i < perCall; i += 1) for (const s of ids) entries.push(entry(s, '0', seq + i));
    const { results } = await callUnary(grpc.appendBatch.bind(grpc), { entries });
    if (results.some((r) => r.error !== undefined)) throw new Error(`AppendBatch failed: ${results.find((r) => r.error)?.error?.message}`);
    seq += perCall;
    sent += entries.length;
  }
  return sent / ((performance.now() - t0) / 1000);
}

async function fill(count: number, newSession: () => Promise<string>, append: Appender): Promise<{ sessionId: string; ids: string[] }[]> {
  const out: { sessionId: string; ids: string[] }[] = [];
  await Promise.all(Array.from({ length: count }, async () => {
    const sessionId = await newSession();
    const ids: string[] = [];
    for (let seq = 1; seq <= BACKLOG + 50; seq += 1) ids.push(((await append(sessionId, 'abcdefgh', seq)) as { id: string }).id);
    out.push({ sessionId, ids });
  }));
  return out;
}

function resumeRpc(grpc: CursorServiceClient, sessionId: string, lastEventId: string): Promise<{ ack: number; last: number }> {
  return new Promise((resolve, reject) => {
    const call = grpc.resume({ sessionId, lastEventId, principal: 'bench' }, new Metadata());
    let ack = 0;
    let n = 0;
    call.on('data', (m: ResumeResponse) => {
      if (m.ack !== undefined) ack = performance.now();
      else if (++n === BACKLOG) {
        resolve({ ack, last: performance.now() });
        call.cancel();
      }
    });
    call.on('error', (err: { code?: number }) => (err.code === 1 ? undefined : reject(err)));
  });
}

async function measurePerEvent(urls: { direct: string; local: string; grpc: string }) {
  const eps = { direct: endpoint(urls.direct), local: endpoint(urls.local), grpc: endpoint(urls.grpc) };
  for (const ep of Object.values(eps)) await initialize(ep);
  const keys = ['direct', 'local', 'grpc'] as const;
  const samples: Record<(typeof keys)[number], number[]> = { direct: [], local: [], grpc: [] };
  for (let r = 0; r < REPEATS + 3; r += 1) {
    progress(`gateway per-event latency: repeat ${r + 1}/${REPEATS + 3}`);
    for (let i = 0; i < keys.length; i += 1) {
      const key = keys[(i + r) % keys.length]!;
      const small = await streamProgress(eps[key], 1);
      const large = await streamProgress(eps[key], 200);
      if (r >= 3) samples[key].push((large - small) / 199);
    }
  }
  for (const ep of Object.values(eps)) ep.agent.destroy();
  return { direct: summarize(samples.direct), local: summarize(samples.local), grpc: summarize(samples.grpc) };
}

async function report(r: { floor: Summary; grpcEmpty: Summary; throughput: Record<string, number>[]; resume: Record<string, Summary>; perEvent: Record<string, Summary>; seconds: number }): Promise<void> {
  const machine = { cpus: cpus().length, cpuModel: cpus()[0]?.model.trim(), memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, loadAvg: loadavg().map((x) => Number(x.toFixed(2))) };
  const out = [
    `\n## gRPC cursor API (npm run bench:grpc), ${machine.cpus} × ${machine.cpuModel}, node ${machine.node}, load ${machine.loadAvg.join(' / ')}\n`,
    `Floor of one hop here: bare node:http2 round trip p50 ${ms(r.floor.p50)} ms (p90 ${ms(r.floor.p90)}); a gRPC call the service answers without NATS (GetSession of a malformed id) p50 ${ms(r.grpcEmpty.p50)} ms (p90 ${ms(r.grpcEmpty.p90)}).\n`,
    `### Append throughput (events/s, ${int(EVENTS)} events per run)\n`,
    table(['streams', 'library append', 'gRPC Append (unary)', 'unary / library', 'gRPC AppendBatch', 'batch / library'],
      r.throughput.map((t) => [String(t['streams']), int(t['library']!), int(t['unary']!), pct(t['unary']! / t['library']!), int(t['batch']!), pct(t['batch']! / t['library']!)])),
    `\n### Resume latency, ${BACKLOG}-event backlog (ms, ${r.resume['library']!.n} samples each, same cursors, alternating)\n`,
    table(['', 'p50', 'p90', 'p99'], [
      ['library resume() + events()', ms(r.resume['library']!.p50), ms(r.resume['library']!.p90), ms(r.resume['library']!.p99)],
      ['gRPC Resume, to the 100th event', ms(r.resume['grpc']!.p50), ms(r.resume['grpc']!.p90), ms(r.resume['grpc']!.p99)],
      ['gRPC Resume, to the ack', ms(r.resume['grpcAck']!.p50), ms(r.resume['grpcAck']!.p90), ms(r.resume['grpcAck']!.p99)],
      ['gRPC / library (p50)', `${(r.resume['grpc']!.p50 / r.resume['library']!.p50).toFixed(2)}×`, '', ''],
    ]),
    `\n### Gateway latency per logged SSE event (ms, stream_progress 200 vs 1, ${r.perEvent['direct']!.n} repeats)\n`,
    table(['', 'per event p50', 'p90', 'added vs direct (p50)'], (['direct', 'local', 'grpc'] as const).map((k) => [
      k === 'direct' ? 'upstream direct' : k === 'local' ? 'gateway --nats (library)' : 'gateway --log grpc://',
      ms(r.perEvent[k]!.p50), ms(r.perEvent[k]!.p90), k === 'direct' ? '' : ms(r.perEvent[k]!.p50 - r.perEvent['direct']!.p50),
    ])),
    `\nran ${r.seconds.toFixed(0)} s`,
  ];
  process.stdout.write(`${out.join('\n')}\n`);
  await mkdir('bench-results', { recursive: true });
  await writeFile('bench-results/grpc-bench.json', JSON.stringify({ machine, ...r }, null, 2));
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:grpc failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
