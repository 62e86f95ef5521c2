/**
 * `npx tsx test/bench/ack-vs-republish.ts`: on one connection, which comes
 * first after a publish-with-ack to a stream that republishes, the ack or
 * the republished copy? Decides whether a reader on the writer's own
 * instance would gain by being handed an event when its append is acked
 * instead of waiting for the republish (docs/design.md, "Live events come
 * from the server's republish"). 2,000 sequential appends of 200 bytes on a
 * private nats-server (the test kit's: NATS_SERVER_BIN, else
 * `scripts/nats-server.sh current`; never older than 2.11). Prints figures.
 */
import { connect } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { startNatsServer } from '@tether/testing';

const nats = await startNatsServer();
const nc = await connect({ servers: nats.url, noAsyncTraces: true });
try {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.add({ name: 'ACK_VS_REPUBLISH', subjects: ['r.log.>'], republish: { src: 'r.log.>', dest: 'r.live.>' } });
  const js = jetstream(nc);
  let live: number | undefined;
  nc.subscribe('r.live.>', {
    callback: () => {
      live = performance.now();
    },
  });
  await nc.flush();
  const deltas: number[] = [];
  for (let i = 0; i < 2_000; i += 1) {
    live = undefined;
    await js.publish('r.log.a', new Uint8Array(200));
    const acked = performance.now();
    while (live === undefined) await new Promise((r) => setImmediate(r));
    deltas.push(live - acked);
  }
  deltas.sort((a, b) => a - b);
  const q = (p: number): string => deltas[Math.floor(p * (deltas.length - 1))]!.toFixed(3);
  console.log(`nats-server ${nats.version}: republish arrival minus ack arrival, ms (negative: the republish came first): p10 ${q(0.1)} p50 ${q(0.5)} p90 ${q(0.9)} p99 ${q(0.99)}`);
} finally {
  await nc.close();
  await nats.cleanup();
}
