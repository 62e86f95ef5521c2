import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { connectClient, connectTaskClient, createTask, textOf } from './clients.js';
import { startFleet } from './fleet.js';
import type { Fleet } from './fleet.js';

// Durable tasks across real processes: the task record lives on JetStream,
// so the instance that created a task can die and another one answers for it.
// The task API is the v1 client's (`client.experimental.tasks`); SDK v2 2.4
// has none, so v2 clients use `slow_task` as a plain call (taskSupport
// 'optional': the SDK creates the task and polls the store for its result).

let nats: NatsServer;
const fleets: Fleet[] = [];
const clients: { close(): Promise<void> }[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
});
afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  for (const fleet of fleets.splice(0)) await fleet.close();
});
afterAll(async () => {
  await nats?.cleanup();
});

const ALICE = 'Bearer alice';
const BOB = 'Bearer bob';

async function fleetOf(count: number, tag: string): Promise<Fleet> {
  const fleet = await startFleet(nats, count, tag);
  fleets.push(fleet);
  return fleet;
}

async function taskClient(fleet: Fleet, authorization: string): Promise<Client> {
  const { client } = await connectTaskClient(fleet.url, authorization);
  clients.push(client);
  return client;
}

/** Polls the task's status (through whichever instance the balancer picks) until it is final. */
async function untilFinal(client: Client, taskId: string): Promise<string> {
  for (;;) {
    const { status } = await client.experimental.tasks.getTask(taskId);
    if (status !== 'working' && status !== 'input_required') return status;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** A task id of the store's shape (12 hex of a millisecond timestamp, 20 more) that no task has. */
const unknownTaskId = (): string => Date.now().toString(16).padStart(12, '0') + '0'.repeat(20);

describe('durable tasks, two example processes', () => {
  it('a task created through instance A; A is SIGKILLed; its status and result are read through instance B', async () => {
    const fleet = await fleetOf(2, 'task-kill');
    const [first, second] = fleet.instances;
    const client = await taskClient(fleet, ALICE);
    const taskId = await createTask(client, 50);
    const a = fleet.instanceAt(fleet.proxy.lastTargetOf((r) => r.method === 'POST'));
    const b = a === first ? second! : first!;
    expect(await untilFinal(client, taskId)).toBe('completed');

    await fleet.sigkill(a);
    const task = await client.experimental.tasks.getTask(taskId);
    expect(task).toMatchObject({ taskId, status: 'completed', ttl: 60_000 });
    expect(fleet.proxy.lastTargetOf((r) => r.method === 'POST')).toBe(fleet.targetOf(b));
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(textOf(result)).toBe('slept 50 ms');
    expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([taskId]);
    expect(fleet.proxy.history().filter((r) => r.method === 'POST').at(-1)?.target).toBe(fleet.targetOf(b));
  });

  it('a task whose worker died with its instance: B still reads its record (working: the work is not taken over, the TTL ends it)', async () => {
    const fleet = await fleetOf(2, 'task-orphan');
    const client = await taskClient(fleet, ALICE);
    const taskId = await createTask(client, 600_000);
    const a = fleet.instanceAt(fleet.proxy.lastTargetOf((r) => r.method === 'POST'));
    await fleet.sigkill(a);
    expect(await client.experimental.tasks.getTask(taskId)).toMatchObject({ taskId, status: 'working' });
    expect(fleet.proxy.lastTargetOf((r) => r.method === 'POST')).not.toBe(fleet.targetOf(a));
  });

  it('an unknown task id, a malformed one, and another principal: the SDK\'s errors, never the task', async () => {
    const fleet = await fleetOf(2, 'task-refuse');
    const alice = await taskClient(fleet, ALICE);
    const taskId = await createTask(alice, 0);
    expect(await untilFinal(alice, taskId)).toBe('completed');

    await expect(alice.experimental.tasks.getTask(unknownTaskId())).rejects.toThrow(/not found/i);
    await expect(alice.experimental.tasks.getTaskResult(unknownTaskId(), CallToolResultSchema)).rejects.toThrow(/not found/i);
    await expect(alice.experimental.tasks.getTask('not-a-task-id')).rejects.toThrow(/malformed task id/);

    // Bob, in a session of his own, through both instances: Alice's task does not exist for him.
    const bob = await taskClient(fleet, BOB);
    for (let i = 0; i < 2; i += 1) {
      await expect(bob.experimental.tasks.getTask(taskId)).rejects.toThrow(/not found/i);
      await expect(bob.experimental.tasks.getTaskResult(taskId, CallToolResultSchema)).rejects.toThrow(/not found/i);
    }
    expect((await bob.experimental.tasks.listTasks()).tasks).toEqual([]);
    // And another session of Alice's does not see it either: a task is bound to its session.
    const alice2 = await taskClient(fleet, ALICE);
    await expect(alice2.experimental.tasks.getTask(taskId)).rejects.toThrow(/not found/i);
  });

  it.each(['v1', 'v2'] as const)('SDK %s client: slow_task as a plain call (the SDK makes it a task and polls the store)', async (major) => {
    const fleet = await fleetOf(2, `task-plain-${major}`);
    const client = await connectClient(major, fleet.url, { authorization: ALICE });
    clients.push(client);
    expect(await client.call('slow_task', { ms: 30 })).toBe('slept 30 ms');
  });
});
