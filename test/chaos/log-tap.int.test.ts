import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { logLayout, namespaceNames, partitionOf, resolveConfig, SessionLog } from '@tether/session-log';
import type { AppendResult, SessionRecord } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import { describe, expect, it } from 'vitest';
import { readWindowInBatches, startLogTap } from './log-tap.js';

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

// A partitioned log: one partition tap per stream, combined. Each stream
// numbers its own positions, so each tap must read its own stream's subjects
// and keep only its own sessions' republished copies.

describe('startLogTap on a log of 4 partitions', () => {
  it("holds every event of every session at its partition stream's position, and each republished copy once", async () => {
    const server = await startNatsServer();
    const namespace = 'taptest';
    const partitions = 4;
    const log = await SessionLog.create({ servers: server.url, namespace, partitions });
    try {
      const sessions: SessionRecord[] = [];
      for (let i = 0; i < 16; i += 1) sessions.push(await log.createSession('alice'));
      expect(new Set(sessions.map((s) => partitionOf(s.sessionId, partitions))).size).toBeGreaterThan(1);
      const appended = new Map<string, AppendResult[]>();
      const append = async (round: number): Promise<void> => {
        for (const [i, s] of sessions.entries()) {
          const key = `${s.sessionId}/0`;
          const list = appended.get(key) ?? [];
          appended.set(key, list);
          list.push(await log.append(s.sessionId, '0', 'event', new TextEncoder().encode(`{"round":${round},"i":${i}}`)));
        }
      };
      // Before the tap: its consumers read these. After it started: its live listeners see them too.
      await append(1);
      await append(2);
      const streamNames = logLayout(resolveConfig({ namespace, partitions })).partitions.map((p) => p.streamName);
      const tap = await startLogTap([server.url], streamNames, { subjectPrefix: namespaceNames(namespace).subjectPrefix });
      await append(3);
      // Until every republished copy of round 3 arrived (a fixed 300 ms missed one under a loaded CI run), at most 5 s.
      for (const until = Date.now() + 5_000; tap.stats.leaderCopies < sessions.length && Date.now() < until; ) await new Promise((resolve) => setTimeout(resolve, 50));
      await tap.stop(5_000);

      expect(tap.partitions).toBe(partitions);
      expect([...tap.streams.keys()].sort()).toEqual([...appended.keys()].sort());
      for (const [key, results] of appended) {
        expect(tap.streams.get(key)?.map((r) => [r.seq, r.pos]), key).toEqual(results.map((r) => [r.seq, r.pos]));
      }
      // Positions repeat across partitions (each stream counts from 1); the copy keeps them apart.
      const positions = [...appended.values()].flatMap((list) => list.map((r) => r.pos));
      expect(new Set(positions).size).toBeLessThan(positions.length);
      // Each event stored after the tap started was republished once, and kept by its partition's tap only.
      expect(tap.stats.leaderCopies).toBe(sessions.length);
      expect(tap.stats.replicaMismatches).toBe(0);
      expect(tap.purged.every((p) => p.size === 0)).toBe(true);
      const perPartition = tap.byPartition.map((s) => s.messages);
      for (const [k, n] of perPartition.entries()) expect(n, `partition ${k}`).toBeGreaterThanOrEqual(3 * sessions.filter((s) => partitionOf(s.sessionId, partitions) === k).length);
    } finally {
      await log.close();
      await server.cleanup();
    }
  });
});
