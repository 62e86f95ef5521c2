/**
 * Diagnostic: a resume's read path on a 3-node R3 cluster of the current
 * nats-server, raw (no Tether code): one batch direct get of 100 events
 * (answered by any replica), one at a time and 16 at once. An ephemeral
 * consumer's create + fetch used to be measured beside it (docs/design.md,
 * "Measured limits of nats-server 2.15.1"); the log has no consumer path
 * since issue 24, so this measures only the path it has.
 *
 *   npx tsx test/bench/r3-read-paths.ts     (EVENTS=100000 by default)
 *
 * Prints figures; asserts nothing. Loopback only; the cluster is removed.
 */
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, createInbox, headers } from '@nats-io/transport-node';
import { startNatsCluster } from '@tether/testing';

const EVENTS = Number(process.env['EVENTS'] ?? 100_000);
const PER_SUBJECT = 300;
const SAMPLES = 200;
// The test kit's server: NATS_SERVER_BIN, else scripts/nats-server.sh current; never older than 2.11.
const cluster = await startNatsCluster({ size: 3 });
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
  process.stdout.write(`R3 read path, ${EVENTS} events stored, 100 events per read, ${SAMPLES} reads\n\n| path | at once | p50 ms | p99 ms | reads/s |\n|---|---|---|---|---|\n`);
  for (const parallel of [1, 16]) await measure('batch direct get', direct, parallel);
  await nc.close();
} finally {
  await cluster.cleanup();
}
