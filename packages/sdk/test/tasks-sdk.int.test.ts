import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { createGate, eventually, isolatedTaskNames, startSdkTaskServer, startTasksFixture } from './tasks-fixtures.js';
import type { SdkTaskServer, TasksFixture } from './tasks-fixtures.js';

let fx: TasksFixture;
const servers: SdkTaskServer[] = [];
const clients: Client[] = [];
beforeAll(async () => {
  fx = await startTasksFixture();
});
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined);
  for (const server of servers) await server.close().catch(() => undefined);
  await fx?.teardown();
});

async function connectClient(url: string, authorization: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'tasks-test-client', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: authorization } } });
  await client.connect(transport);
  clients.push(client);
  return { client, transport };
}

/** Calls `slow-echo` as a task through the official client and returns the id from its `taskCreated` message. */
async function createTaskThroughSdk(client: Client, text: string): Promise<string> {
  const stream = client.experimental.tasks.callToolStream({ name: 'slow-echo', arguments: { text } }, CallToolResultSchema, { task: { ttl: 60_000 } });
  for await (const message of stream) {
    if (message.type === 'taskCreated') return message.task.taskId;
    throw new Error(`expected taskCreated first, got ${message.type}`);
  }
  throw new Error('the stream ended without taskCreated');
}

describe('durable tasks through the official SDK v1 (McpServer + Client)', () => {
  it('creates, polls and fetches a task in a session; after the server process is gone another store reads it', async () => {
    const names = isolatedTaskNames();
    const a = await fx.open(names);
    const gate = createGate();
    const server = await startSdkTaskServer(a.tasks, gate, 'stateful');
    servers.push(server);
    const { client, transport } = await connectClient(server.url, 'Bearer alice');
    const taskId = await createTaskThroughSdk(client, 'hello');
    expect((await client.experimental.tasks.getTask(taskId)).status).toBe('working');
    expect((await client.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([taskId]);

    // Another principal, through the SDK: the task does not exist for it.
    const mallory = await connectClient(server.url, 'Bearer mallory');
    await expect(mallory.client.experimental.tasks.getTask(taskId)).rejects.toThrow(/not found/i);
    expect((await mallory.client.experimental.tasks.listTasks()).tasks).toEqual([]);

    gate.release();
    await eventually('the task to complete', async () => ((await client.experimental.tasks.getTask(taskId)).status === 'completed' ? true : undefined));
    const result = await client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(result.content).toEqual([{ type: 'text', text: 'echo: hello' }]);

    // Crash: the server and its NATS connection go; a fresh store in "another process" reads the task.
    const sessionId = transport.sessionId;
    expect(sessionId).toBeDefined();
    await server.close();
    await a.nc.close();
    const b = (await fx.open(names)).tasks.forPrincipal('Bearer alice');
    expect(await b.taskStore.getTask(taskId, sessionId)).toMatchObject({ taskId, status: 'completed', ttl: 60_000 });
    expect(await b.taskStore.getTaskResult(taskId, sessionId)).toMatchObject({ content: [{ type: 'text', text: 'echo: hello' }] });
    expect(await b.taskStore.getTask(taskId, 'another-session')).toBeNull();
    expect(await (await fx.open(names)).tasks.forPrincipal('Bearer mallory').taskStore.getTask(taskId, sessionId)).toBeNull();
  });

  it('stateless era: a task created on instance A, which dies, is finished by another worker and read through instance B', async () => {
    const names = isolatedTaskNames();
    const a = await fx.open(names);
    const neverReleased = createGate();
    const serverA = await startSdkTaskServer(a.tasks, neverReleased, 'stateless');
    servers.push(serverA);
    const viaA = await connectClient(serverA.url, 'Bearer alice');
    expect(viaA.transport.sessionId).toBeUndefined();
    const taskId = await createTaskThroughSdk(viaA.client, 'orphan');
    await serverA.close();
    await a.nc.close();

    // A worker elsewhere (its own connection) picks the work up and stores the result.
    const worker = (await fx.open(names)).tasks.forPrincipal('Bearer alice');
    expect(await worker.taskStore.getTask(taskId)).toMatchObject({ status: 'working' });
    await worker.taskStore.storeTaskResult(taskId, 'completed', { content: [{ type: 'text', text: 'finished elsewhere' }] });

    const b = await fx.open(names);
    const serverB = await startSdkTaskServer(b.tasks, createGate(), 'stateless');
    servers.push(serverB);
    const viaB = await connectClient(serverB.url, 'Bearer alice');
    expect(await viaB.client.experimental.tasks.getTask(taskId)).toMatchObject({ taskId, status: 'completed' });
    const result = await viaB.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
    expect(result.content).toEqual([{ type: 'text', text: 'finished elsewhere' }]);
    const mallory = await connectClient(serverB.url, 'Bearer mallory');
    await expect(mallory.client.experimental.tasks.getTask(taskId)).rejects.toThrow(/not found/i);
    await expect(mallory.client.experimental.tasks.getTask('not-a-task-id')).rejects.toThrow(/malformed task id/);
  });
});

describe('SDK v2 (@modelcontextprotocol/server 2.4)', () => {
  // v2 removed the 2025-11 experimental tasks (typescript-sdk PR #2128, SEP-2663
  // moved tasks to the io.modelcontextprotocol/tasks extension; typescript-sdk
  // #2189 tracks it). 2.4.0 ships the task wire types only. This fails the day
  // a v2 release brings a store interface, so it gets wired in then.
  it('has no TaskStore or TaskMessageQueue to implement (checked, not assumed)', async () => {
    const v2 = await import('@modelcontextprotocol/server');
    const runtime = Object.keys(v2).filter((name) => /task(store|messagequeue)|tasks?manager/i.test(name));
    expect(runtime, `v2 now exports ${runtime.join(', ')}: implement it in packages/sdk/src/tasks`).toEqual([]);
    console.warn('SDK v2 2.4.0 has no TaskStore/TaskMessageQueue (tasks are an extension there): v2 task tests skipped');
  });
});
