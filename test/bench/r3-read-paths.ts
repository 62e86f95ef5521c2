/**
 * Diagnostic: the two read paths of a resume on a 3-node R3 cluster of the
 * current nats-server, raw (no Tether code): one batch direct get of 100
 * events against an ephemeral consumer's create + fetch of the same 100,
 * one at a time and 16 at once (consumer creation on a cluster goes through
 * the meta leader; a direct get is answered by any replica).
 *
 *   npx tsx test/bench/r3-read-paths.ts     (EVENTS=100000 by default)
 *
 * Prints figures; asserts nothing. Loopback only; the cluster is removed.
 */
import { execFileSync } from 'node:child_process';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, headers } from '@nats-io/transport-node';
import { startNatsCluster } from '@tether/testing';

const EVENTS = Number(process.env['EVENTS'] ?? 100_000);
const PER_SUBJECT = 300;
const SAMPLES = 200;
const bin = execFileSync('bash', [new URL('../../scripts/nats-server.sh', import.meta.url).pathname, 'current'], { encoding: 'utf8' }).trim();
const cluster = await startNatsCluster({ bin, size: 3 });
try {
  const nc = await connect({ servers: [...cluster.urls], noAsyncTraces: true });
  const js = jetstream(nc);
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'R3READ', subjects: ['r3.>'], num_replicas: 3, allow_direct: true });
  // Interleaved like many sessions writing at once: 128 subjects in flight, 300 events each.
  const subjects = Math.ceil(EVENTS / PER_SUBJECT);
  const positions: number[][] = Array.from({ length: subjects }, () => []);
  const h = headers();
  for (const k of ['Tether-Epoch', 'Tether-Seq', 'Tether-Prev', 'Tether-Kind']) h.set(k, '1234567890');
  const body = new Uint8Array(200).fill(97);
  for (let group = 0; group < subjects; group += 128) {
    const members = Array.from({ length: Math.min(128, subjects - group) }, (_, i) => group + i);
    for (let i = 0; i < PER_SUBJECT; i += 1) {
      await Promise.all(members.map(async (k) => positions[k]!.push((await js.publish(`r3.s${k}`, body, { headers: h })).seq)));
    }
  }
  process.stderr.write(`filled ${EVENTS} events, ${subjects} subjects, R3, nats-server ${cluster.servers[0]!.version}\n`);

  const direct = (subject: string, seq: number): Promise<number> =>
    new Promise((resolve, reject) => {
      const inbox = createInbox();
      let n = 0;
      const timer = setTimeout(() => reject(new Error('no EOB')), 5_000);
      const sub = nc.subscribe(inbox, {
        callback: (_err, msg) => {
          if (msg.headers?.code === 204) {
            clearTimeout(timer);
            sub.unsubscribe();
            resolve(n);
          } else n += 1;
        },
      });
      nc.publish('$JS.API.DIRECT.GET.R3READ', JSON.stringify({ seq, next_by_subj: subject, batch: 100 }), { reply: inbox });
    });
  let noResponders = 0;
  const consumer = async (subject: string, seq: number): Promise<number> => {
    const info = await jsm.consumers.add('R3READ', { filter_subject: subject, deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: seq, ack_policy: AckPolicy.None, mem_storage: true, num_replicas: 1, inactive_threshold: 60e9 });
    const c = js.consumers.getConsumerFromInfo(info);
    let n = 0;
    while (n < 100) {
      try {
        for await (const _m of await c.fetch({ max_messages: 100 - n, expires: 5_000 })) n += 1;
      } catch (err) {
        // Right after the create the consumer may not answer yet on a cluster.
        if (!/no responders/i.test(String(err))) throw err;
        noResponders += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    }
    jsm.consumers.delete('R3READ', info.name).catch(() => undefined);
    return n;
  };
  const measure = async (name: string, read: (subject: string, seq: number) => Promise<number>, parallel: number): Promise<void> => {
    const times: number[] = [];
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: parallel }, async () => {
        while (next < SAMPLES) {
          const i = next++;
          const k = (i * 7919) % subjects;
          const t0 = performance.now();
          const got = await read(`r3.s${k}`, positions[k]![100]!);
          if (got !== 100) throw new Error(`${name}: ${got} events`);
          times.push(performance.now() - t0);
        }
      }),
    );
    const wall = (performance.now() - started) / 1000;
    times.sort((a, b) => a - b);
    const at = (q: number): string => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(2);
    process.stdout.write(`| ${name} | ${parallel} | ${at(0.5)} | ${at(0.99)} | ${Math.round(SAMPLES / wall)} |\n`);
  };
  process.stdout.write(`R3 read paths, ${EVENTS} events stored, 100 events per read, ${SAMPLES} reads\n\n| path | at once | p50 ms | p99 ms | reads/s |\n|---|---|---|---|---|\n`);
  for (const parallel of [1, 16]) {
    await measure('batch direct get', direct, parallel);
    await measure('consumer create + fetch', consumer, parallel);
  }
  process.stdout.write(`\nconsumer fetches answered "no responders" right after the create (retried after 5 ms): ${noResponders}\n`);
  await nc.close();
} finally {
  await cluster.cleanup();
}
