import { jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNatsCluster } from '@tether/testing';
import type { NatsCluster } from '@tether/testing';
import { createDurableTasks, isTaskStoreError, TaskErrorCode } from '../src/tasks/index.js';
import type { DurableTasks } from '../src/tasks/index.js';
import { isolatedTaskNames } from './tasks-fixtures.js';

// Finding 16 on the SDK's store (`findTask`): the session log's
// task-table-isolated-leader.int.test.ts has the same scenario, told at
// length. Records stream R3 led by node A; a store connected to A only; A
// cut off from its peers (proxied routes); a task created through B once B
// and C elected a leader. Through A, getTask must fail `tasks_unavailable`,
// never answer null ("not found"), until A is back; then it finds the task.

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

async function leaderOf(jsm: JetStreamManager, stream: string): Promise<string | undefined> {
  return jsm.streams.info(stream).then(
    (info) => info.cluster?.leader || undefined,
    () => undefined,
  );
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
    const storeA: DurableTasks = await createDurableTasks({ ...options, nc: ncA });
    const storeB: DurableTasks = await createDurableTasks({ ...options, nc: ncB });
    const onA = storeA.forPrincipal(ALICE).taskStore;
    const onB = storeB.forPrincipal(ALICE).taskStore;

    let reproduced = false;
    for (let round = 1; round <= 3 && !reproduced; round += 1) {
      for (let attempt = 1; (await leaderOf(jsmB, stream)) !== nameA; attempt += 1) {
        if (attempt > 40) throw new Error(`could not move the records stream's leadership to ${nameA}`);
        await ncB.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, JSON.stringify({ placement: { preferred: nameA } }), { timeout: 2_000 }).catch(() => undefined);
        await sleep(500);
      }
      const cutAt = Date.now();
      cluster.isolate(0);
      for (;;) {
        const leader = await leaderOf(jsmB, stream);
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
      reproduced = (await jsmA.streams.info(stream).then((info) => info.cluster?.leader, () => undefined)) === nameA;

      const codes = new Map<string, number>();
      const until = Date.now() + (reproduced ? 2_000 : 0);
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
      process.stdout.write(`round ${round}: A ${reproduced ? 'still led' : 'had stepped down'}; getTask through A while isolated: ${JSON.stringify(Object.fromEntries(codes))}\n`);

      cluster.heal(0);
      const healedAt = Date.now();
      for (;;) {
        const got = await onA.getTask(taskId, SESSION).catch((err: unknown) => {
          if (!isTaskStoreError(err) || err.code !== TaskErrorCode.unavailable) throw err;
          return 'threw' as const;
        });
        expect(got, 'getTask through A after the heal').not.toBeNull();
        if (got !== 'threw' && got !== null) {
          expect(got.taskId).toBe(taskId);
          break;
        }
        if (Date.now() - healedAt > 30_000) throw new Error('the task was not readable through A 30 s after the heal');
        await sleep(250);
      }
    }
    expect(reproduced, 'A still led when the task was read through it').toBe(true);
  }, 240_000);
});
