import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { startNatsServer } from '@tether/testing';
import { describe, expect, it } from 'vitest';
import { readWindowInBatches } from './log-tap.js';

// A power loss's re-check reads its window in batch direct gets: every
// position it reports is what the stream holds there, a position between held
// ones is empty, and what it could not reach is left unknown.

describe('readWindowInBatches', () => {
  it('tells held, empty and unreached positions apart', async () => {
    const server = await startNatsServer();
    const nc = await connect({ servers: server.url });
    try {
      const jsm = await jetstreamManager(nc);
      const js = jetstream(nc);
      await jsm.streams.add({ name: 'W', subjects: ['tether.log.>'], allow_direct: true });
      // 1,200 messages over three streams of one session (more than two batches), then one stream purged.
      for (let i = 0; i < 1_200; i += 1) await js.publish(`tether.log.s.${'abc'[i % 3]!.repeat(8)}`, `m${i}`);
      await jsm.streams.purge('W', { filter: `tether.log.s.${'b'.repeat(8)}` });
      const keyOf = (subject: string): string | undefined => subject.slice('tether.log.'.length).replace('.', '/');
      // Past the stream's end (1,200) nothing answers: those positions stay unknown.
      const found = await readWindowInBatches(jsm, 'W', keyOf, 100, 1_250, Date.now() + 10_000);
      expect(found.size).toBe(1_101);
      for (let pos = 100; pos <= 1_200; pos += 1) {
        const at = found.get(pos);
        // Position p holds message p-1, of stream "abc"[(p-1) % 3]; b's were purged.
        if ((pos - 1) % 3 === 1) expect(at).toBeNull();
        else expect(at).toMatchObject({ key: `s/${'abc'[(pos - 1) % 3]!.repeat(8)}`, record: { pos } });
      }
      expect(found.has(1_201)).toBe(false);
    } finally {
      await nc.close();
      await server.cleanup();
    }
  });
});
