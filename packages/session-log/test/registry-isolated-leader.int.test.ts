import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSessionId } from '@tether/protocol';
import { isSessionLogError, SessionLog } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { everyLeaderAnswer, moveStreamLeader, readWhileCutOffLeaderLeads, startNatsCluster, streamLeader } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { ALICE, isolatedNames, sleep, whileUnavailable } from './fixtures.js';

// Finding 16's other half: the session registry is read from its bucket's
// stream leader too. A node cut off from its peers keeps leading for up to
// 10 s after they elected another leader; a session created through the new
// leader read "not found" through the old one, which a gateway answers 404
// (the client's live session ends). On a real 3-node cluster with proxied
// routes: the registry bucket led by A, A isolated, B and C elect a leader,
// a session is created through B; through A it must be `log_unavailable`
// (a 503, retried), never undefined, until A is back, then found. As in
// task-table-isolated-leader.int.test.ts, what is required is the part no
// timing misses: unknown sessions read through A from 4 s after the cut
// while A still leads; the created-elsewhere case is reported when reached.

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

/** The log on `nc`, closed at teardown. */
async function open(nc: NatsConnection, names: ReturnType<typeof isolatedNames>): Promise<SessionLog> {
  const log = await whileUnavailable(() => SessionLog.create({ nc, ...names, replicas: 3, requestTimeoutMs: 2_000 }));
  logs.push(log);
  return log;
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

    const jsmA = await jetstreamManager(ncA, { timeout: 2_000 });
    // Reads through A while it led without a quorum: the case no timing misses.
    let staleReads = 0;
    // Rounds in which the session created through B was read through A while
    // A still led: needs B and C to elect before A steps down, which a loaded
    // machine may not give.
    let createdCaseRounds = 0;
    for (let round = 1; round <= 3 && staleReads === 0; round += 1) {
      await moveStreamLeader(ncB, jsmB, bucket, nameA);
      const cutAt = Date.now();
      const since = () => `${((Date.now() - cutAt) / 1000).toFixed(1)} s`;
      cluster.isolate(0);
      const ranStale = await readWhileCutOffLeaderLeads({
        cutAt,
        jsm: jsmA,
        stream: bucket,
        leader: nameA,
        read: async () => {
          const outcome = await logA.sessions.get(newSessionId()).then(
            (record) => `answered ${record === undefined ? 'not found' : 'found'}`,
            (err: unknown) => (isSessionLogError(err, 'log_unavailable') ? 'log_unavailable' : `other: ${String(err).slice(0, 80)}`),
          );
          expect(outcome, `an unknown session read through A while it led without a quorum, ${since()} after the cut`).toBe('log_unavailable');
        },
      });
      staleReads += ranStale;
      process.stdout.write(`round ${round}: ${ranStale} reads of unknown sessions through A while it still led, from 4 s after the cut: all log_unavailable\n`);
      let newLeader: string | undefined;
      while (newLeader === undefined || newLeader === nameA) {
        if (Date.now() - cutAt > 30_000) throw new Error('B and C elected no leader in 30 s');
        await sleep(250);
        newLeader = await streamLeader(jsmB, bucket);
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
      const aStillLeads = (await streamLeader(jsmA, bucket)) === nameA;
      if (aStillLeads) createdCaseRounds += 1;
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
      process.stdout.write(`round ${round}: ${newLeader} elected, session created at ${since()}, A ${aStillLeads ? 'still led' : 'had stepped down'}; ${reads} reads through A while isolated: ${JSON.stringify(Object.fromEntries(outcomes))}\n`);

      cluster.heal(0);
      const healedAt = Date.now();
      for (;;) {
        const got = await logA.sessions.get(sessionId).catch(() => 'threw' as const);
        // Finding 18 (open, docs/reliability.md): in the instant the cut heals,
        // the old leader can still answer "not found" and pass the check.
        // Printed, not failed; the isolated phase above is strict.
        if (got === undefined) {
          const ms = Date.now() - healedAt;
          process.stdout.write(`FINDING 18: a read through A answered "no such session" ${ms} ms after the heal; now: ${await everyLeaderAnswer(ncA, bucket, `$KV.${bucket.slice('KV_'.length)}.${sessionId}`)}\n`);
          await sleep(250);
          continue;
        }
        if (got !== 'threw') {
          expect(got?.epoch).toBe(created.epoch);
          break;
        }
        if (Date.now() - healedAt > 30_000) throw new Error('the session was not readable through A 30 s after the heal');
        await sleep(250);
      }
    }
    process.stdout.write(
      createdCaseRounds > 0
        ? `A still led when the session created through the new leader was read through it in ${createdCaseRounds} round(s)\n`
        : 'NOT REACHED: A stepped down before the session was created through the new leader in every round (a loaded machine); the created-elsewhere case was not exercised this run, the unknown-session reads above were\n',
    );
    expect(staleReads, 'reads through A while it still led without a quorum').toBeGreaterThan(0);
  }, 240_000);
});
