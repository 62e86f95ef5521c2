import { jetstreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { everyLeaderAnswer, moveStreamLeader, readWhileCutOffLeaderLeads, startNatsCluster, streamLeader } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { createDurableTasks, isTaskStoreError, TaskErrorCode } from '../src/tasks/index.js';
import type { DurableTasks } from '../src/tasks/index.js';
import { newTaskId } from '../src/tasks/ids.js';
import { isolatedTaskNames } from './tasks-fixtures.js';

// Finding 16 on the SDK's store (`findTask`): the session log's
// task-table-isolated-leader.int.test.ts has the same scenario, told at
// length. Records stream R3 led by node A; a store connected to A only; A
// cut off from its peers (proxied routes); a task created through B once B
// and C elected a leader. Through A, getTask must fail `tasks_unavailable`,
// never answer null ("not found"), until A is back; then it finds the task.
// Required is the part no timing misses (unknown ids read through A from 4 s
// after the cut while A still leads); the created-elsewhere case is
// reported when the machine's load lets B and C elect before A steps down.

const ALICE = 'Bearer alice';
const SESSION = 'session-1';
const REQUEST = { method: 'tools/call', params: { name: 'x' } };
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3, proxyRoutes: true });
}, 120_000);
afterEach(() => cluster?.heal());
afterAll(async () => {
  await cluster?.cleanup();
});

/** The store on `nc`; an R3 placement just after the cluster started (or on a loaded machine) may find a peer not yet current. */
async function open(options: Parameters<typeof createDurableTasks>[0]): Promise<DurableTasks> {
  for (const startedAt = Date.now(); ; await sleep(500)) {
    try {
      return await createDurableTasks(options);
    } catch (err) {
      if (!isTaskStoreError(err) || err.code !== TaskErrorCode.unavailable || Date.now() - startedAt > 30_000) throw err;
    }
  }
}

describe('durable task store on a stream leader cut off from its peers', () => {
  it('getTask through the old leader fails tasks_unavailable, never null, until healed; then finds the task', async () => {
    const names = isolatedTaskNames();
    const stream = names.tasksStream!;
    const options = { ...names, replicas: 3, requestTimeoutMs: 2_000 };
    const ncA = await cluster.connectOnly(0);
    const ncB = await cluster.connectOnly(1);
    const nameA = ncA.info!.server_name;
    const jsmA = await jetstreamManager(ncA, { timeout: 2_000 });
    const jsmB = await jetstreamManager(ncB, { timeout: 2_000 });
    const storeA = await open({ ...options, nc: ncA });
    const storeB = await open({ ...options, nc: ncB });
    const onA = storeA.forPrincipal(ALICE).taskStore;
    const onB = storeB.forPrincipal(ALICE).taskStore;

    // Reads through A while it led without a quorum: the case no timing misses.
    let staleReads = 0;
    // Rounds in which the task created through B was read through A while A
    // still led: needs B and C to elect before A steps down, which a loaded
    // machine may not give.
    let createdCaseRounds = 0;
    for (let round = 1; round <= 3 && staleReads === 0; round += 1) {
      await moveStreamLeader(ncB, jsmB, stream, nameA);
      const cutAt = Date.now();
      cluster.isolate(0);
      const ranStale = await readWhileCutOffLeaderLeads({
        cutAt,
        jsm: jsmA,
        stream,
        leader: nameA,
        read: async () => {
          const outcome = await onA.getTask(newTaskId(), SESSION).then(
            (task) => `answered ${task === null ? 'null' : 'a task'}`,
            (err: unknown) => (isTaskStoreError(err) ? err.code : `other: ${String(err).slice(0, 80)}`),
          );
          expect(outcome, `getTask of an unknown id through A while it led without a quorum, ${((Date.now() - cutAt) / 1000).toFixed(1)} s after the cut`).toBe(TaskErrorCode.unavailable);
        },
      });
      staleReads += ranStale;
      process.stdout.write(`round ${round}: ${ranStale} getTask calls of unknown ids through A while it still led, from 4 s after the cut: all ${TaskErrorCode.unavailable}\n`);
      for (;;) {
        const leader = await streamLeader(jsmB, stream);
        if (leader !== undefined && leader !== nameA) break;
        if (Date.now() - cutAt > 30_000) throw new Error('B and C elected no leader in 30 s');
        await sleep(250);
      }
      let taskId: string | undefined;
      while (taskId === undefined) {
        taskId = await onB.createTask({ ttl: 600_000 }, round, REQUEST, SESSION).then(
          (task) => task.taskId,
          async (err: unknown) => {
            if (!isTaskStoreError(err) || err.code !== TaskErrorCode.unavailable || Date.now() - cutAt > 40_000) throw err;
            await sleep(200);
            return undefined;
          },
        );
      }
      // A still calls itself the leader while B or C leads: the case of the finding.
      const aStillLeads = (await streamLeader(jsmA, stream)) === nameA;
      if (aStillLeads) createdCaseRounds += 1;

      const codes = new Map<string, number>();
      const until = Date.now() + (aStillLeads ? 2_000 : 0);
      do {
        const got = await onA.getTask(taskId, SESSION).then(
          (task) => task,
          (err: unknown) => {
            const code = isTaskStoreError(err) ? err.code : String(err);
            codes.set(code, (codes.get(code) ?? 0) + 1);
            return 'threw' as const;
          },
        );
        expect(got, `getTask through the isolated node ${((Date.now() - cutAt) / 1000).toFixed(1)} s after the cut`).toBe('threw');
        await sleep(100);
      } while (Date.now() < until);
      expect([...codes.keys()]).toEqual([TaskErrorCode.unavailable]);
      process.stdout.write(`round ${round}: A ${aStillLeads ? 'still led' : 'had stepped down'}; getTask through A while isolated: ${JSON.stringify(Object.fromEntries(codes))}\n`);

      cluster.heal(0);
      const healedAt = Date.now();
      for (;;) {
        const got = await onA.getTask(taskId, SESSION).catch((err: unknown) => {
          if (!isTaskStoreError(err) || err.code !== TaskErrorCode.unavailable) throw err;
          return 'threw' as const;
        });
        // Finding 18 (open, docs/reliability.md): in the instant the cut heals,
        // the old leader can still answer "not found" and pass the check.
        // Printed, not failed; the isolated phase above is strict.
        if (got === null) {
          const ms = Date.now() - healedAt;
          process.stdout.write(`FINDING 18: getTask through A answered null ${ms} ms after the heal; now: ${await everyLeaderAnswer(ncA, stream)}\n`);
        }
        if (got !== 'threw' && got !== null) {
          expect(got.taskId).toBe(taskId);
          break;
        }
        if (Date.now() - healedAt > 30_000) throw new Error('the task was not readable through A 30 s after the heal');
        await sleep(250);
      }
    }
    process.stdout.write(
      createdCaseRounds > 0
        ? `A still led when the task created through the new leader was read through it in ${createdCaseRounds} round(s)\n`
        : 'NOT REACHED: A stepped down before the task was created through the new leader in every round (a loaded machine); the created-elsewhere case was not exercised this run, the unknown-id reads above were\n',
    );
    expect(staleReads, 'getTask calls through A while it still led without a quorum').toBeGreaterThan(0);
  }, 240_000);
});
