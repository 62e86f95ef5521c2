import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionLogError, SessionLog } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { ALICE, isolatedNames, sleep } from './fixtures.js';

// Finding 16's other half: the session registry is read from its bucket's
// stream leader too. A node cut off from its peers keeps leading for up to
// 10 s after they elected another leader; a session created through the new
// leader read "not found" through the old one, which a gateway answers 404
// (the client's live session ends). On a real 3-node cluster with proxied
// routes: the registry bucket led by A, A isolated, B and C elect a leader,
// a session is created through B; through A it must be `log_unavailable`
// (a 503, retried), never undefined, until A is back, then found.

let cluster: NatsCluster;
const logs: SessionLog[] = [];
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3, proxyRoutes: true });
}, 120_000);
afterAll(async () => {
  cluster?.heal();
  for (const log of logs) await log.close().catch(() => undefined);
  await cluster?.cleanup();
});

/** The log on `nc`; an R3 placement just after the cluster started (or on a loaded machine) may find a peer not yet current. */
async function open(nc: NatsConnection, names: ReturnType<typeof isolatedNames>): Promise<SessionLog> {
  for (const startedAt = Date.now(); ; await sleep(500)) {
    try {
      const log = await SessionLog.create({ nc, ...names, replicas: 3, requestTimeoutMs: 2_000 });
      logs.push(log);
      return log;
    } catch (err) {
      if (!isSessionLogError(err, 'log_unavailable') || Date.now() - startedAt > 30_000) throw err;
    }
  }
}

async function leaderOf(jsm: JetStreamManager, stream: string): Promise<string | undefined> {
  try {
    return (await jsm.streams.info(stream)).cluster?.leader || undefined;
  } catch {
    return undefined;
  }
}

describe('the session registry on a bucket leader cut off from its peers', () => {
  it('a session created through the new leader is never "not found" through the old one: log_unavailable until healed, then found', async () => {
    const names = isolatedNames();
    const ncA = await cluster.connectOnly(0);
    const ncB = await cluster.connectOnly(1);
    const nameA = ncA.info!.server_name;
    const jsmB = await jetstreamManager(ncB, { timeout: 2_000 });
    const logA = await open(ncA, names);
    const logB = await open(ncB, names);
    const bucket = `KV_${logA.layout.partitions[0]!.sessionsBucket}`;

    let reproduced = false;
    for (let round = 1; round <= 3 && !reproduced; round += 1) {
      for (let attempt = 0; (await leaderOf(jsmB, bucket)) !== nameA; attempt += 1) {
        if (attempt > 40) throw new Error(`could not move ${bucket}'s leadership to ${nameA}`);
        await ncB.request(`$JS.API.STREAM.LEADER.STEPDOWN.${bucket}`, JSON.stringify({ placement: { preferred: nameA } }), { timeout: 2_000 }).catch(() => undefined);
        await sleep(500);
      }
      const cutAt = Date.now();
      const since = () => `${((Date.now() - cutAt) / 1000).toFixed(1)} s`;
      cluster.isolate(0);
      let newLeader: string | undefined;
      while (newLeader === undefined || newLeader === nameA) {
        if (Date.now() - cutAt > 30_000) throw new Error('B and C elected no leader in 30 s');
        await sleep(250);
        newLeader = await leaderOf(jsmB, bucket);
      }
      let created: SessionRecord | undefined;
      while (created === undefined) {
        try {
          created = await logB.sessions.create(ALICE);
        } catch (err) {
          if (!isSessionLogError(err, 'log_unavailable') || Date.now() - cutAt > 40_000) throw err;
          await sleep(200);
        }
      }
      const { sessionId } = created;
      const outcomes = new Map<string, number>();
      let reads = 0;
      const until = Date.now() + 3_000;
      do {
        reads += 1;
        const got = await logA.sessions.get(sessionId).then(
          (record) => (record === undefined ? 'not found' : 'found'),
          (err: unknown) => (isSessionLogError(err, 'log_unavailable') ? 'log_unavailable' : `other: ${String(err).slice(0, 60)}`),
        );
        outcomes.set(got, (outcomes.get(got) ?? 0) + 1);
        expect(got, `read ${reads} through the isolated node, ${since()} after the cut`).not.toBe('not found');
        await sleep(100);
      } while (Date.now() < until);
      process.stdout.write(`round ${round}: ${newLeader} elected, session created at ${since()}; ${reads} reads through A while isolated: ${JSON.stringify(Object.fromEntries(outcomes))}\n`);
      reproduced = (outcomes.get('log_unavailable') ?? 0) > 0;

      cluster.heal(0);
      const healedAt = Date.now();
      for (;;) {
        const got = await logA.sessions.get(sessionId).catch(() => 'threw' as const);
        expect(got, 'a read through A after the heal').not.toBeUndefined();
        if (got !== 'threw') {
          expect(got?.epoch).toBe(created.epoch);
          break;
        }
        if (Date.now() - healedAt > 30_000) throw new Error('the session was not readable through A 30 s after the heal');
        await sleep(250);
      }
    }
    expect(reproduced, 'A answered log_unavailable for a session it could not see').toBe(true);
  }, 240_000);
});
