/**
 * `npm run bench:tasks`: what tasks at the edge cost (DESIGN section 12,
 * "Tasks"), each figure beside its baseline in the same run:
 *
 * 1. a call that is not a task (`greet`, no task support) through a gateway
 *    with `--tasks on` and one with `--tasks off`, alternating call by call,
 *    beside the upstream called directly;
 * 2. task creation: `CreateTaskResult` latency of a call that never answers
 *    (`hold`) through a gateway with `--task-after 0`, beside a pass-through
 *    call through the same gateway: the difference is what the durable record
 *    (and the tool lookup) adds;
 * 3. `tasks/get` p50/p99 through another gateway instance;
 * 4. the whole create → poll → result of tools that take 50, 100, 250 and
 *    500 ms, as a task (`--task-after 0`) polled every 10 ms and every
 *    `pollIntervalMs` (1 s, what an honoring client does), and through a
 *    listen, beside the tool called directly: the figure `--task-after`
 *    (250 ms) is chosen from;
 * 5. a runner's death: from SIGKILL of the gateway running a task to the
 *    first `tasks/get` through another instance that answers `failed`
 *    (`runner_lost`), polled every 20 ms (DESIGN section 12: p99 ≤ 1 s);
 * 6. the routed path (issue 33): `tasks/get` for a task an upstream owns
 *    (two replicas of the kit's extension-running upstream, each task in
 *    one replica's memory), created through gateway A and read through
 *    gateway B, which finds the route record and forwards to the replica,
 *    alternating call by call with the same request sent to that replica
 *    directly: the difference is what routing costs.
 *
 * Real processes on loopback: a private nats-server (NATS_SERVER_BIN, the
 * current one via the npm script), the gateways as their own processes; the
 * task upstream (SDK v2 createMcpHandler) runs in this process. Prints
 * figures; never asserts. Knobs: BENCH_TASKS_CALLS (default 400; figures
 * 1-3 and 6), BENCH_TASKS_ROUNDS (figure 4, default 5), BENCH_TASKS_KILLS
 * (figure 5, default 20).
 */
import { fileURLToPath } from 'node:url';
import { OwnedTaskTools, startNatsServer, startOwnedTasksUpstream, startServiceProcess, startTaskUpstream, TaskTools } from '@tether/testing';
import type { OwnedTasksUpstream, ServiceProcess } from '@tether/testing';
import { ms, progress, table } from './stats.js';
import { summarize95 } from './gateway/summary.js';

const CALLS = Number(process.env['BENCH_TASKS_CALLS'] ?? 400);
/** Figure 6: upstream-owned tasks read through the other instance; long enough to stay `working` for the whole figure. */
const ROUTED_TASKS = 20;
const ROUTED_TASK_SECONDS = 600;
const ROUNDS = Number(process.env['BENCH_TASKS_ROUNDS'] ?? 5);
const KILLS = Number(process.env['BENCH_TASKS_KILLS'] ?? 20);
const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
const META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '0' },
  'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } },
};

let nextId = 1;
async function rpc(url: string, method: string, params: Record<string, unknown>, name?: string): Promise<Record<string, any>> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(name === undefined ? {} : { 'mcp-name': name }) },
    body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: META } }),
  });
  const text = await res.text();
  const line = text.startsWith('{') ? text : text.split('\n').filter((l) => l.startsWith('data: {')).at(-1)!.slice(6);
  return JSON.parse(line) as Record<string, any>;
}

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const value = await work();
  return [performance.now() - t0, value];
}

async function startGateway(name: string, natsUrl: string, upstreamUrl: string, args: string[]): Promise<{ proc: ServiceProcess; url: string }> {
  const proc = await startServiceProcess({
    name,
    command: process.execPath,
    args: [GATEWAY_MAIN, '--port', '0', '--nats', natsUrl, '--upstream', upstreamUrl, '--instance-id', name, ...args],
    readyLine: (json) => json.msg === 'listening',
  });
  return { proc, url: `http://127.0.0.1:${proc.port}/mcp` };
}

function row(label: string, samples: number[]): string[] {
  const s = summarize95(samples);
  return [label, ms(s.p50), ms(s.p99), String(samples.length)];
}

async function main(): Promise<void> {
  const nats = await startNatsServer();
  const upstream = await startTaskUpstream();
  const on = await startGateway('tasks-on', nats.url, upstream.url, []);
  const off = await startGateway('tasks-off', nats.url, upstream.url, ['--tasks', 'off']);
  // A second gateway with tasks off: the spread between two identical processes is the noise figure 1 is read against.
  const off2 = await startGateway('tasks-off-2', nats.url, upstream.url, ['--tasks', 'off']);
  const now = await startGateway('tasks-now', nats.url, upstream.url, ['--task-after', '0']);
  const reader = await startGateway('tasks-reader', nats.url, upstream.url, []);
  // Figure 6: a deployment of two replicas that run their own tasks, and two instances in front of it.
  const replicas: OwnedTasksUpstream[] = [await startOwnedTasksUpstream({ name: 'r1' }), await startOwnedTasksUpstream({ name: 'r2' })];
  const replicaList = replicas.map((r) => r.url).join(',');
  const ownedA = await startGateway('owned-a', nats.url, replicaList, []);
  const ownedB = await startGateway('owned-b', nats.url, replicaList, []);
  try {
    // Warm every path (tool lists, connections, streams).
    for (const url of [upstream.url, on.url, off.url, off2.url, now.url]) for (let i = 0; i < 20; i += 1) await rpc(url, 'tools/call', { name: TaskTools.Greet, arguments: { name: 'w' } }, TaskTools.Greet);

    progress('figure 1: a call that is not a task, --tasks on vs off');
    const direct: number[] = [], viaOn: number[] = [], viaOff: number[] = [], viaOff2: number[] = [];
    for (let i = 0; i < CALLS; i += 1) {
      const order: [string, number[]][] = [[upstream.url, direct], [on.url, viaOn], [off.url, viaOff], [off2.url, viaOff2]];
      for (const [url, into] of i % 2 === 0 ? order : order.reverse()) {
        into.push((await timed(() => rpc(url, 'tools/call', { name: TaskTools.Greet, arguments: { name: 'x' } }, TaskTools.Greet)))[0]);
      }
    }

    progress('figure 2: task creation (durable) vs a pass-through call, same gateway');
    const create: number[] = [], pass: number[] = [];
    const taskIds: string[] = [];
    for (let i = 0; i < CALLS; i += 1) {
      const [t, answer] = await timed(() => rpc(now.url, 'tools/call', { name: TaskTools.Hold, arguments: { key: 'bench' } }, TaskTools.Hold));
      if (answer.result?.resultType !== 'task') throw new Error(`expected a task, got ${JSON.stringify(answer).slice(0, 200)}`);
      create.push(t);
      taskIds.push(answer.result.taskId as string);
      pass.push((await timed(() => rpc(now.url, 'tools/call', { name: TaskTools.Greet, arguments: { name: 'x' } }, TaskTools.Greet)))[0]);
    }

    progress('figure 3: tasks/get through another instance, beside the same request for an id it refuses without reading the store');
    const gets: number[] = [], floor: number[] = [];
    for (let i = 0; i < CALLS; i += 1) {
      const taskId = taskIds[i % taskIds.length]!;
      gets.push((await timed(() => rpc(reader.url, 'tasks/get', { taskId }, taskId)))[0]);
      // A malformed id: the same HTTP, JSON and checks, answered "Task not found" with no store read.
      floor.push((await timed(() => rpc(reader.url, 'tasks/get', { taskId: 'x' }, 'x')))[0]);
    }
    upstream.release('bench', 'released');

    progress('figure 4: create → poll → result, by tool duration');
    const durations = [50, 100, 250, 500];
    const e2e: string[][] = [];
    for (const toolMs of durations) {
      const directMs: number[] = [], poll10: number[] = [], pollHonoring: number[] = [], viaDefault: number[] = [];
      for (let r = 0; r < ROUNDS; r += 1) {
        directMs.push((await timed(() => rpc(upstream.url, 'tools/call', { name: TaskTools.IdempotentJob, arguments: { ms: toolMs } }, TaskTools.IdempotentJob)))[0]);
        for (const [interval, into] of [[10, poll10], [undefined, pollHonoring]] as [number | undefined, number[]][]) {
          const [t] = await timed(async () => {
            const created = await rpc(now.url, 'tools/call', { name: TaskTools.IdempotentJob, arguments: { ms: toolMs } }, TaskTools.IdempotentJob);
            const taskId = created.result.taskId as string;
            for (;;) {
              await new Promise((resolve) => setTimeout(resolve, interval ?? (created.result.pollIntervalMs as number)));
              const got = await rpc(reader.url, 'tasks/get', { taskId }, taskId);
              if (got.result?.status === 'completed') return;
            }
          });
          into.push(t);
        }
        viaDefault.push((await timed(async () => {
          const answer = await rpc(on.url, 'tools/call', { name: TaskTools.IdempotentJob, arguments: { ms: toolMs } }, TaskTools.IdempotentJob);
          if (answer.result?.resultType !== 'task') return;
          const taskId = answer.result.taskId as string;
          for (;;) {
            await new Promise((resolve) => setTimeout(resolve, answer.result.pollIntervalMs as number));
            if ((await rpc(reader.url, 'tasks/get', { taskId }, taskId)).result?.status === 'completed') return;
          }
        }))[0]);
      }
      const p50 = (xs: number[]) => ms(summarize95(xs).p50);
      e2e.push([`${toolMs} ms`, p50(directMs), p50(poll10), p50(pollHonoring), p50(viaDefault)]);
    }

    progress(`figure 5: a runner SIGKILLed, ${KILLS} rounds`);
    const settle: number[] = [];
    for (let k = 0; k < KILLS; k += 1) {
      const victim = await startGateway(`tasks-victim-${k}`, nats.url, upstream.url, ['--task-after', '0']);
      await rpc(victim.url, 'tools/call', { name: TaskTools.Greet, arguments: { name: 'w' } }, TaskTools.Greet);
      const created = await rpc(victim.url, 'tools/call', { name: TaskTools.Hold, arguments: { key: `kill-${k}` } }, TaskTools.Hold);
      const taskId = created.result.taskId as string;
      await rpc(reader.url, 'tasks/get', { taskId }, taskId);
      const killedAt = performance.now();
      victim.proc.kill();
      for (;;) {
        const got = await rpc(reader.url, 'tasks/get', { taskId }, taskId);
        if (got.result?.status === 'failed') break;
        if (performance.now() - killedAt > 30_000) throw new Error('a killed runner was not noticed within 30 s');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      settle.push(performance.now() - killedAt);
      upstream.release(`kill-${k}`, 'released');
    }

    progress('figure 6: tasks/get of an upstream-owned task routed by another instance, vs sent to its replica directly');
    const routedIds: { taskId: string; replicaUrl: string }[] = [];
    for (let i = 0; i < ROUTED_TASKS; i += 1) {
      const created = await rpc(ownedA.url, 'tools/call', { name: OwnedTaskTools.SlowCompute, arguments: { seconds: ROUTED_TASK_SECONDS, label: `bench-${i}` } }, OwnedTaskTools.SlowCompute);
      if (created.result?.resultType !== 'task') throw new Error(`expected an upstream task, got ${JSON.stringify(created).slice(0, 200)}`);
      const taskId = created.result.taskId as string;
      const holder = replicas.find((r) => r.taskIds().includes(taskId));
      if (holder === undefined) throw new Error(`no replica holds ${taskId}`);
      routedIds.push({ taskId, replicaUrl: holder.url });
    }
    // Warm B's route records, discover answer and connections to both replicas.
    for (const { taskId, replicaUrl } of routedIds) {
      await rpc(ownedB.url, 'tasks/get', { taskId }, taskId);
      await rpc(replicaUrl, 'tasks/get', { taskId }, taskId);
    }
    const routed: number[] = [], atReplica: number[] = [];
    for (let i = 0; i < CALLS; i += 1) {
      const { taskId, replicaUrl } = routedIds[i % routedIds.length]!;
      const order: [string, number[]][] = [[ownedB.url, routed], [replicaUrl, atReplica]];
      for (const [url, into] of i % 2 === 0 ? order : order.reverse()) {
        const [t, answer] = await timed(() => rpc(url, 'tasks/get', { taskId }, taskId));
        if (answer.result?.status !== 'working') throw new Error(`expected the task working, got ${JSON.stringify(answer).slice(0, 200)}`);
        into.push(t);
      }
    }

    process.stdout.write(`\n1. A call that is not a task (greet), ${CALLS} each, alternating\n`);
    process.stdout.write(`${table(['path', 'p50', 'p99', 'n'], [row('upstream direct', direct), row('gateway --tasks on', viaOn), row('gateway --tasks off', viaOff), row('another gateway --tasks off (noise)', viaOff2)])}\n`);
    const cp = summarize95(create).p50 - summarize95(pass).p50;
    process.stdout.write(`\n2. Task creation (durable, --task-after 0) vs a pass-through call through the same gateway\n`);
    process.stdout.write(`${table(['call', 'p50', 'p99', 'n'], [row('tools/call → CreateTaskResult', create), row('tools/call greet (pass-through)', pass)])}\nadded by creation, p50: ${ms(cp)}\n`);
    const overFloor = summarize95(gets).p50 - summarize95(floor).p50;
    process.stdout.write(`\n3. tasks/get through another instance, beside the same request answered without the store\n${table(['call', 'p50', 'p99', 'n'], [row('tasks/get (a working task)', gets), row('tasks/get of a malformed id (no store read)', floor)])}\nwhat reading the task adds, p50: ${ms(overFloor)}\n`);
    process.stdout.write(`\n4. Create → poll → result, p50 of ${ROUNDS} (task via --task-after 0; polled through another instance)\n`);
    process.stdout.write(`${table(['tool takes', 'direct', 'task, poll 10 ms', 'task, poll pollIntervalMs', 'default --task-after 250, honoring'], e2e)}\n`);
    process.stdout.write(`\n5. SIGKILL of a task's runner → the first tasks/get through another instance answering failed (polled every 20 ms)\n${table(['rounds', 'p50', 'p99', 'max'], [[String(settle.length), ms(summarize95(settle).p50), ms(summarize95(settle).p99), ms(Math.max(...settle))]])}\n`);
    const r = summarize95(routed), d = summarize95(atReplica);
    process.stdout.write(
      `\n6. tasks/get of an upstream-owned task (created through instance A) through instance B, routed to its replica, beside the same request sent to the replica directly; ${CALLS} each, alternating, over ${ROUTED_TASKS} tasks on 2 replicas\n` +
        `${table(['path', 'p50', 'p99', 'n'], [row('through another instance (routed)', routed), row('the replica directly', atReplica)])}\nadded by routing: p50 ${ms(r.p50 - d.p50)}, p99 ${ms(r.p99 - d.p99)}\n`,
    );
  } finally {
    for (const g of [on, off, off2, now, reader, ownedA, ownedB]) await g.proc.stop('SIGTERM', 5_000).catch(() => undefined);
    await upstream.close();
    for (const replica of replicas) await replica.close();
    await nats.cleanup();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench:tasks failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
