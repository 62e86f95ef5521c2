import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionLog, isSessionLogError } from '@tether/session-log';
import type { LogEvent } from '@tether/session-log';
import { startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { ALICE, bytes, isolatedNames, sleep, whileUnavailable } from './fixtures.js';

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3 });
}, 120_000);
afterAll(async () => {
  await cluster.cleanup();
});

describe('3-node R3 cluster', () => {
  it('one node killed during appends: reads stay gap-free or end explicitly', async () => {
    const log = await whileUnavailable(() => SessionLog.create({ servers: [...cluster.urls], ...isolatedNames(), replicas: 3, requestTimeoutMs: 2_000 }));
    const session = await whileUnavailable(() => log.createSession(ALICE));
    const stream = log.newStreamId();
    const acked: string[] = [];
    const explicitFailures: string[] = [];
    const first = await log.append(session.sessionId, stream, 'event', bytes('0'));
    acked.push(first.id);
    const result = await log.resume(session.sessionId, first.id, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const got: LogEvent[] = [];
    let readFailure: unknown;
    const reader = (async () => {
      try {
        for await (const event of result.events()) got.push(event);
      } catch (err) {
        readFailure = err;
      }
    })();

    const victim = cluster.servers[1]!;
    for (let i = 1; i <= 400; i += 1) {
      if (i === 150) await victim.kill();
      if (i === 300) await victim.restart();
      const kind = i === 400 ? 'end' : 'event';
      for (let attempt = 0; ; attempt += 1) {
        try {
          acked.push((await log.append(session.sessionId, stream, kind, bytes(String(i)), { retry: attempt > 0 })).id);
          break;
        } catch (err) {
          // An append whose outcome is unknown is an explicit error; the
          // writer is rebuilt from the log on the next call, which says it
          // is a retry (`retry`) so a first attempt that landed is not repeated.
          if (!isSessionLogError(err) || attempt > 50) throw err;
          explicitFailures.push((err as { code: string }).code);
          await sleep(200);
        }
      }
    }
    await Promise.race([reader, sleep(20_000)]);
    if (readFailure === undefined) {
      expect(got.map((e) => e.id)).toEqual(acked.slice(1));
    } else {
      expect(isSessionLogError(readFailure)).toBe(true);
      expect(got.map((e) => e.id)).toEqual(acked.slice(1, 1 + got.length));
    }
    // Whatever the reader saw, a fresh resume from the start agrees with what was acknowledged.
    // Right after the restart the registry's leader may still be moving: a
    // resume then fails log_unavailable (explicit), and a client asks again.
    let again;
    for (let attempt = 1; ; attempt += 1) {
      try {
        again = await log.resume(session.sessionId, first.id, ALICE);
        break;
      } catch (err) {
        if (!isSessionLogError(err, 'log_unavailable') || attempt >= 10) throw err;
        await sleep(500);
      }
    }
    if (again.verdict !== 'resumed') throw new Error(again.verdict);
    const replayed: string[] = [];
    for await (const event of again.events()) replayed.push(event.id);
    expect(replayed).toEqual(acked.slice(1));
    process.stdout.write(
      `R3 node kill: acked ${acked.length}, reader ${readFailure === undefined ? 'continued' : `ended ${(readFailure as { code: string }).code}`} after ${got.length}, append retries ${explicitFailures.length} (${[...new Set(explicitFailures)].join(',')})\n`,
    );
    await log.close();
  });

  it('one writer per stream, many streams at once, never a false writer_conflict (sync_interval: always)', async () => {
    // The stream leader clears a subject's in-process mark only after it
    // sent the append's ack, so a writer's next append can be refused
    // "wrong last sequence" (10164) with nobody else writing: a busy signal,
    // not a rival. Per-write fsync widens that window, so this test runs on
    // its own cluster with `sync_interval: always`.
    const synced = await startNatsCluster({ size: 3, configLines: ['jetstream { sync_interval: always }'] });
    try {
      const log = await whileUnavailable(() => SessionLog.create({ servers: [...synced.urls], ...isolatedNames(), replicas: 3 }));
      const writers = 64;
      const perWriter = 100;
      const failures: string[] = [];
      await Promise.all(
        Array.from({ length: writers }, async () => {
          const session = await whileUnavailable(() => log.createSession(ALICE));
          const stream = log.newStreamId();
          for (let i = 1; i <= perWriter; i += 1) {
            try {
              await log.append(session.sessionId, stream, 'event', bytes(String(i)));
            } catch (err) {
              failures.push(isSessionLogError(err) ? err.code : String(err));
              return;
            }
          }
        }),
      );
      process.stdout.write(`R3 sync_interval always, ${writers} writers x ${perWriter} appends: failures ${JSON.stringify(failures)}\n`);
      expect(failures).toEqual([]);
      await log.close();
    } finally {
      await synced.cleanup();
    }
  }, 120_000);
});
