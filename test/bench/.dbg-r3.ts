import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { startNatsCluster } from '@tether/testing';
const bin = process.env.NATS_SERVER_BIN!;
const sync = process.argv[2] ?? 'always';
const lanesN = Number(process.argv[3] ?? '1');
const cluster = await startNatsCluster({ bin, configLines: sync === 'always' ? ['jetstream { sync_interval: always }'] : [] });
const nc = await connect({ servers: cluster.urls[0]!, noAsyncTraces: true });
const jsm = await jetstreamManager(nc);
await jsm.streams.add({ name: 'D', subjects: ['d.>'], storage: StorageType.File, num_replicas: 3, duplicate_window: 120e9, allow_direct: true, republish: { src: 'd.>', dest: 'live.>' } });
const js = jetstream(nc);
let failures = 0;
const lane = async (l: number) => {
  const subject = `d.s${l}`;
  let pos = 0;
  for (let seq = 1; seq <= 3000; seq += 1) {
    const h = headers(); h.set('Tether-Seq', String(seq));
    try {
      const ack = await js.publish(subject, new Uint8Array(300), { headers: h, msgID: `${subject}.${seq}`, expect: { lastSubjectSequence: pos } });
      if (ack.duplicate) console.log('dup', subject, seq, ack.seq);
      pos = ack.seq;
    } catch (err) {
      failures += 1;
      const last = await jsm.streams.getMessage('D', { last_by_subj: subject }).catch((e) => String(e));
      const info = await jsm.streams.info('D');
      console.log(`lane ${l} seq ${seq} expected ${pos}: ${(err as Error).message} code ${(err as { code?: unknown }).code}; leader's last_by_subj ${typeof last === 'string' ? last : last?.seq} (its Tether-Seq ${typeof last === 'string' ? '' : last?.header.get('Tether-Seq')}); leader ${info.cluster?.leader} state.last_seq ${info.state.last_seq}`);
      return;
    }
  }
};
const t0 = performance.now();
await Promise.all(Array.from({ length: lanesN }, (_, i) => lane(i)));
console.log(`${sync} lanes ${lanesN}: done in ${(performance.now() - t0).toFixed(0)} ms, failures ${failures}`);
await nc.close(); await cluster.cleanup();
