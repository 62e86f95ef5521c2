import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstreamManager } from '@nats-io/jetstream';
import { isSessionLogError, principalDigest, SessionLog } from '@tether/session-log';
import { startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { createWriterPresence, TetherEventStore } from '@tether/sdk';
import type { JsonRpcMessage } from '@tether/sdk';
import { isolatedNames } from './router-fixtures.js';

// Kills a node: its own cluster, one per file.
let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3 });
}, 120_000);
afterAll(async () => {
  await cluster?.cleanup();
});

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** The index in `cluster.servers` of the node leading `streamName`. */
async function leaderOf(log: SessionLog): Promise<number> {
  const jsm = await jetstreamManager(log.connection);
  const leader = (await jsm.streams.info(log.config.streamName)).cluster?.leader;
  for (const [i, node] of cluster.servers.entries()) {
    const varz = (await (await fetch(`http://127.0.0.1:${node.monitorPort}/varz`)).json()) as { server_name?: string };
    if (varz.server_name === leader) return i;
  }
  throw new Error(`no node is named ${String(leader)}`);
}

describe('TetherEventStore when the log stream\'s leader is killed', () => {
  // Found by the chaos run with the SDK-server example: the leader killed
  // mid tool call, one notification's append failed (no responders while
  // the leader was elected), the tool failed, and the append of its error
  // response failed too. The SDK cannot send what it could not store, so
  // the client's response stayed open, told nothing, and this process kept
  // answering "writing" for the stream, so no reader elsewhere ended it.
  it('stores every event of a call once the new leader is elected, or gives the stream up explicitly, within a bound', async () => {
    const log = await SessionLog.create({ servers: [...cluster.urls], ...isolatedNames(), replicas: 3, requestTimeoutMs: 2_000 });
    const presence = createWriterPresence(log);
    try {
      const session = await log.createSession(principalDigest('Bearer alice'));
      const store = new TetherEventStore({ log, session, presence, requestsOf: () => [1] });
      const progress = (i: number): JsonRpcMessage => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: i, total: 120 } });
      const ids: string[] = [await store.storeEvent('sdk-1', {})];
      const failures: unknown[] = [];
      let responseFailed = false;
      let killed: Promise<void> | undefined;
      for (let i = 1; i <= 120; i += 1) {
        if (i === 20) {
          const victim = cluster.servers[await leaderOf(log)]!;
          killed = victim.kill().then(async () => {
            await sleep(1_000);
            await victim.restart();
          });
        }
        // What the SDK does: each notification awaited, 20 ms apart, then the response;
        // a failed notification fails the tool, answered at once with an error result.
        const last = i === 120 || failures.length > 0;
        const message = last ? { jsonrpc: '2.0' as const, id: 1, result: { content: [], isError: failures.length > 0 } } : progress(i);
        const startedMs = Date.now();
        try {
          ids.push(await store.storeEvent('sdk-1', message));
        } catch (err) {
          failures.push(err);
          responseFailed = last;
          // Given up only once the store's retries (appendRetryMs, default 15 s) ran out, never at the first lost ack.
          expect(Date.now() - startedMs, `storeEvent #${i} failed this early: ${String(err)}`).toBeGreaterThanOrEqual(15_000);
        }
        expect(Date.now() - startedMs, `storeEvent #${i} took this long`).toBeLessThan(30_000);
        if (last) break;
        await sleep(20);
      }
      await killed;
      const [stream] = ids[0]!.split('-').slice(1, 2);
      expect(failures.every((err) => isSessionLogError(err, 'log_unavailable'))).toBe(true);
      if (!responseFailed) {
        // Succeeded after the election (or the tool failed explicitly): every event stored once, in order, then the end.
        const events = await log.readPage(session.sessionId, stream!, 0, 1_000);
        expect(events.map((e) => e.id)).toEqual([...ids, events.at(-1)!.id]);
        expect(events.at(-1)!.kind).toBe('end');
      } else {
        // The response could not be stored: this process no longer claims the stream (a
        // reader's probe finds it not written and ends it with an error per owed request).
        expect(presence.writes(session.sessionId, stream!)).toBe(false);
      }
    } finally {
      await presence.close();
      await log.close();
    }
  }, 120_000);
});
