/**
 * `npm run bench:audit`: what recording one audit event costs the process
 * that records it, beside what one logged event (an append) costs the same
 * process, measured in the same run on the same log (issue 14: "recording
 * one must not slow the hot path measurably").
 *
 * Both log modes of the gateway:
 * - in-process (`--log nats`): `SessionLog.recordAudit` (a JSON encode and a
 *   core publish, not awaited) beside `SessionLog.append` (publish with ack,
 *   awaited, as the gateway records every upstream event);
 * - `--log grpc://`: one `RecordAudit` call per event, not awaited (what
 *   grpc-log.ts did first), and the same events through `AuditBatcher` as
 *   `RecordAuditBatch` calls (what it does now), beside an awaited `Append`,
 *   to a session-log service in its own process, whose CPU is read from
 *   /proc as well.
 *
 * CPU is the recording process's user+system time per operation
 * (`process.cpuUsage`), over batches of N operations (audit events are sent
 * back to back and then flushed; appends one at a time, as a stream's writer
 * does). Real processes on loopback: a private nats-server (current), the
 * service from services/session-log/dist. Rounds alternate the kinds, so a
 * drift of the machine hits both. Prints a table, writes
 * bench-results/audit-cost.json. Never asserts.
 *
 * Knobs: BENCH_AUDIT_N (operations per batch, default 5000),
 * BENCH_AUDIT_ROUNDS (default 5).
 */
import { readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, release, totalmem, type } from 'node:os';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Metadata } from '@grpc/grpc-js';
import { callUnary, createCursorClient, EndReason, EventKind as WireKind } from '@tether/cursor-proto';
import { newStreamId } from '@tether/protocol';
import { SessionLog } from '@tether/session-log';
import type { AuditEvent } from '@tether/session-log';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import { AuditBatcher } from '../../services/gateway/src/log/audit-batcher.js';
import { progress } from './stats.js';

const N = Number(process.env['BENCH_AUDIT_N'] ?? '5000');
const ROUNDS = Number(process.env['BENCH_AUDIT_ROUNDS'] ?? '5');
const SERVICE_MAIN = fileURLToPath(new URL('../../services/session-log/dist/main.js', import.meta.url));
const TOKEN = 'bench-audit-token-0123456789';
const PAYLOAD = new Uint8Array(512).fill(0x61);
/** A `delivered` event as a gateway records it: every common field set. */
const event = (i: number): AuditEvent => ({ v: 1, atMs: Date.now(), instance: 'bench-gw-1', kind: 'delivered', stream: 'abcdefgh', status: 200, events: i, conn: 'c0nn1d', reason: 'ended' });

interface Sample {
  readonly cpuUsPerOp: number;
  readonly wallUsPerOp: number;
  readonly serviceCpuUsPerOp?: number;
}

const cpuUs = (): number => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

/** utime + stime of a process, µs (Linux /proc; clock ticks of 100 Hz). */
function procCpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function measure(run: () => Promise<void>, servicePid?: number): Promise<Sample> {
  const service0 = servicePid === undefined ? 0 : procCpuUs(servicePid);
  const cpu0 = cpuUs();
  const t0 = process.hrtime.bigint();
  await run();
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  const sample: Sample = { cpuUsPerOp: (cpuUs() - cpu0) / N, wallUsPerOp: wallUs / N };
  if (servicePid === undefined) return sample;
  // Let the service finish what it was sent (fire-and-forget calls) before reading its clock.
  await new Promise((r) => setTimeout(r, 300));
  return { ...sample, serviceCpuUsPerOp: (procCpuUs(servicePid) - service0) / N };
}

const median = (xs: readonly number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const log = await SessionLog.create({ servers: nats.url, streamName: 'BENCH_AUDIT', subjectPrefix: 'bench_audit', sessionsBucket: 'bench_audit_sessions', leasesBucket: 'bench_audit_leases', principalsBucket: 'bench_audit_principals' });
  const service = await startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `gw:${TOKEN}`, '--namespace', 'benchaudit'],
    readyLine: (o) => o.msg === 'listening',
  });
  const client = createCursorClient({ target: `127.0.0.1:${service.port}`, token: TOKEN });
  const results: Record<string, Sample[]> = { 'nats: recordAudit': [], 'nats: append': [], 'grpc: RecordAudit': [], 'grpc: RecordAuditBatch': [], 'grpc: Append': [] };
  try {
    const local = await log.createSession('bench');
    const { session } = await callUnary(client.openSession.bind(client), { principal: 'bench', meta: {} });
    const remoteId = session!.sessionId;
    const auditMd = new Metadata();
    auditMd.set('tether-audit', 'self');
    const kinds: Record<string, () => Promise<void>> = {
      'nats: recordAudit': async () => {
        for (let i = 0; i < N; i += 1) log.recordAudit(local.sessionId, event(i));
        await log.connection.flush();
      },
      'nats: append': async () => {
        const s = newStreamId();
        for (let i = 0; i < N; i += 1) await log.append(local.sessionId, s, 'event', PAYLOAD);
      },
      'grpc: RecordAudit': async () => {
        const pending: Promise<unknown>[] = [];
        for (let i = 0; i < N; i += 1) {
          const e = event(i);
          pending.push(callUnary(client.recordAudit.bind(client), { sessionId: remoteId, atMs: e.atMs, instance: e.instance, kind: e.kind, stream: e.stream, cursor: undefined, status: e.status, events: e.events, conn: e.conn, reason: e.reason }, { deadlineMs: 30_000, metadata: auditMd }).catch(() => undefined));
        }
        await Promise.all(pending);
      },
      // What the gateway sends since RecordAuditBatch: the same events through its AuditBatcher (5 ms, 256 at most).
      'grpc: RecordAuditBatch': async () => {
        const batcher = new AuditBatcher(async (events) => {
          await callUnary(client.recordAuditBatch.bind(client), { events }, { deadlineMs: 30_000, metadata: auditMd }).catch(() => undefined);
        });
        for (let i = 0; i < N; i += 1) {
          const e = event(i);
          batcher.add({ sessionId: remoteId, atMs: e.atMs, instance: e.instance, kind: e.kind, stream: e.stream, cursor: undefined, status: e.status, events: e.events, conn: e.conn, reason: e.reason });
        }
        await batcher.flush();
      },
      'grpc: Append': async () => {
        const s = newStreamId();
        for (let i = 0; i < N; i += 1) {
          await callUnary(client.append.bind(client), { sessionId: remoteId, stream: s, kind: WireKind.EVENT, payload: Buffer.from(PAYLOAD), endReason: EndReason.UNSPECIFIED }, { deadlineMs: 30_000 });
        }
      },
    };
    // Warm-up: JIT, connections, the stream's first writes.
    for (const run of Object.values(kinds)) await run();
    for (let round = 1; round <= ROUNDS; round += 1) {
      const order = round % 2 === 0 ? Object.keys(kinds).reverse() : Object.keys(kinds);
      for (const name of order) {
        const sample = await measure(kinds[name]!, name.startsWith('grpc') ? service.pid : undefined);
        results[name]!.push(sample);
        progress(`round ${round} ${name}: ${sample.cpuUsPerOp.toFixed(1)} µs CPU/op, ${sample.wallUsPerOp.toFixed(1)} µs wall/op${sample.serviceCpuUsPerOp === undefined ? '' : `, service ${sample.serviceCpuUsPerOp.toFixed(1)} µs CPU/op`}`);
      }
    }
  } finally {
    client.close();
    await service.stop();
    await log.close();
    await nats.cleanup();
  }

  const row = (name: string): { cpu: number; wall: number; service?: number } => {
    const xs = results[name]!;
    const service = xs.every((x) => x.serviceCpuUsPerOp !== undefined) ? median(xs.map((x) => x.serviceCpuUsPerOp!)) : undefined;
    return { cpu: median(xs.map((x) => x.cpuUsPerOp)), wall: median(xs.map((x) => x.wallUsPerOp)), ...(service === undefined ? {} : { service }) };
  };
  const rows = Object.fromEntries(Object.keys(results).map((k) => [k, row(k)]));
  const lines = [
    `audit event vs logged event, per operation, median of ${ROUNDS} rounds of ${N} (nats-server ${nats.version}, ${cpus().length} cores)`,
    '',
    '| operation | recorder CPU µs | recorder wall µs | service CPU µs |',
    '|---|---|---|---|',
    ...Object.entries(rows).map(([k, r]) => `| ${k} | ${r.cpu.toFixed(1)} | ${r.wall.toFixed(1)} | ${r.service === undefined ? '' : r.service.toFixed(1)} |`),
    '',
    `in-process: one audit event costs the recorder ${((rows['nats: recordAudit']!.cpu / rows['nats: append']!.cpu) * 100).toFixed(0)} % of one append's CPU`,
    ...['grpc: RecordAudit', 'grpc: RecordAuditBatch'].map(
      (k) => `${k}: one event costs the recorder ${((rows[k]!.cpu / rows['grpc: Append']!.cpu) * 100).toFixed(0)} % of one Append's CPU, the service ${((rows[k]!.service! / rows['grpc: Append']!.service!) * 100).toFixed(0)} %`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  const out = resolve(fileURLToPath(new URL('../../bench-results/', import.meta.url)));
  await mkdir(out, { recursive: true });
  await writeFile(resolve(out, 'audit-cost.json'), `${JSON.stringify({ command: 'npm run bench:audit', machine: { os: `${type()} ${release()}`, cores: cpus().length, memGiB: Math.round(totalmem() / 2 ** 30) }, n: N, rounds: ROUNDS, rows, samples: results }, null, 2)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:audit failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
