/**
 * `npm run bench:memory`: what the log costs the nats-server in memory, the
 * inputs of docs/scale.md's capacity model. On a private single-node server
 * (file store, fresh dir), measured as the server's own RSS (`/varz` `mem`)
 * after each step settles:
 *
 * 1. per open stream: the log's partitions made empty, N = 1 then N = 64
 *    (each partition is a stream and two KV buckets);
 * 2. per stored subject: session streams of one event each (the per-subject
 *    index the server keeps for every subject), then the same subjects with
 *    ten events each (what the events themselves add, file-backed).
 *
 * Go's RSS includes garbage not yet collected and never shrinks much, so
 * each figure is a difference of plateaus, read twice 2 s apart; the report
 * says so. Prints a table; never asserts.
 *
 * Knobs: BENCH_MEMORY_SUBJECTS (default 100000), BENCH_MEMORY_PARTITIONS
 * (default 64).
 */
import { EventKind } from '@tether/protocol';
import { principalDigest, SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { int, progress, table } from './stats.js';

const SUBJECTS = Number(process.env['BENCH_MEMORY_SUBJECTS'] ?? '100000');
const PARTITIONS = Number(process.env['BENCH_MEMORY_PARTITIONS'] ?? '64');
const CONCURRENCY = 256;
const PAYLOAD = new Uint8Array(200).fill(0x61);

async function rss(server: NatsServer): Promise<number> {
  const read = async (): Promise<number> => ((await (await fetch(`http://127.0.0.1:${server.monitorPort}/varz`)).json()) as { mem: number }).mem;
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  const first = await read();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  return Math.max(first, await read());
}

const kib = (bytes: number): string => (bytes / 1024).toFixed(1);

async function main(): Promise<void> {
  const server = await startNatsServer({});
  const rows: string[][] = [];
  try {
    progress(`nats-server ${server.version}, store ${server.storeDir}`);
    const base = await rss(server);
    // 1. Streams: one unpartitioned log, then one of PARTITIONS partitions (a stream and two buckets each).
    const one = await SessionLog.create({ servers: server.url, namespace: 'mem_one' });
    const afterOne = await rss(server);
    const many = await SessionLog.create({ servers: server.url, namespace: 'mem_many', partitions: PARTITIONS });
    const afterMany = await rss(server);
    const perPartition = (afterMany - afterOne) / PARTITIONS;
    rows.push(['empty log, 1 partition (stream + 3 buckets)', kib(afterOne - base), '']);
    rows.push([`empty log, ${PARTITIONS} partitions`, kib(afterMany - afterOne), `${kib(perPartition)} KiB per partition (stream + 2 buckets)`]);
    await many.close();

    // 2. Subjects: SUBJECTS session streams with one event each, in the one-partition log.
    const principal = principalDigest('bench-memory');
    const write = async (perSubject: number, streams: { sessionId: string; stream: string }[]): Promise<void> => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = next++; i < streams.length; i = next++) {
            const target = streams[i]!;
            for (let k = 0; k < perSubject; k += 1) await one.append(target.sessionId, target.stream, EventKind.event, PAYLOAD);
          }
        }),
      );
    };
    const streams: { sessionId: string; stream: string }[] = [];
    // Ten streams per session: the registry holds SUBJECTS / 10 sessions.
    for (let i = 0; i < SUBJECTS / 10; i += 1) {
      const session = await one.createSession(principal);
      for (let k = 0; k < 10; k += 1) streams.push({ sessionId: session.sessionId, stream: one.newStreamId() });
    }
    const afterSessions = await rss(server);
    rows.push([`${int(SUBJECTS / 10)} sessions in the registry`, kib(afterSessions - afterOne), `${(((afterSessions - afterOne) / (SUBJECTS / 10))).toFixed(0)} B per session`]);
    const t0 = performance.now();
    await write(1, streams);
    progress(`${int(SUBJECTS)} subjects written in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const afterOneEach = await rss(server);
    rows.push([`${int(SUBJECTS)} subjects, 1 event each`, kib(afterOneEach - afterSessions), `${((afterOneEach - afterSessions) / SUBJECTS).toFixed(0)} B per subject`]);
    await write(9, streams);
    const afterTenEach = await rss(server);
    rows.push([`same subjects, 10 events each (+${int(9 * SUBJECTS)} events)`, kib(afterTenEach - afterOneEach), `${((afterTenEach - afterOneEach) / (9 * SUBJECTS)).toFixed(1)} B per further event`]);
    await one.close();
  } finally {
    await server.cleanup();
  }
  process.stdout.write(`\nnats-server ${server.version}, R1 file store, payload ${PAYLOAD.length} B (RSS from /varz, plateau of two reads 2 s apart)\n\n`);
  process.stdout.write(`${table(['step', 'RSS added (KiB)', 'per unit'], rows)}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
