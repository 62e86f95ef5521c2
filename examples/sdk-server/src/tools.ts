import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { PrincipalTasks } from '@tether/sdk';
import { z } from 'zod';

/** How often a client (or the SDK's own polling, for a plain call of `slow_task`) should poll a task. */
export const TASK_POLL_INTERVAL_MS = 100;
/** A task's TTL when its creator asks for none. */
export const DEFAULT_TASK_TTL_MS = 10 * 60_000;

type Text = { content: { type: 'text'; text: string }[] };
const text = (value: string): Text => ({ content: [{ type: 'text', text: value }] });
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The server of one session on one instance. `createSessionRouter` calls
 * this on every instance that serves the session, so it must build the same
 * server everywhere (same tools, capabilities, instructions) and keep no
 * session state in memory: what outlives a request lives in the log or in
 * the task store.
 *
 * - `stream {count, delayMs}`: progress 1..count on the request's
 *   `progressToken`, then `streamed <count>`. Each notification is appended
 *   to the session log before the client sees it, so a resume anywhere
 *   continues it.
 * - `ping`: `pong`.
 * - `slow_task {ms}`: task-capable (`taskSupport: 'optional'`). As a task
 *   it returns at once and stores `slept <ms> ms` after `ms`; as a plain
 *   call the SDK polls the task store and answers with the result. The
 *   record lives on JetStream, so any instance reads its status and result.
 */
export function buildServer(tasks: PrincipalTasks, onWorkError: (err: unknown) => void = () => undefined): McpServer {
  const server = new McpServer(
    { name: 'tether-sdk-example', version: '0.1.0' },
    { capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore: tasks.taskStore, taskMessageQueue: tasks.taskMessageQueue },
  );

  server.registerTool(
    'stream',
    {
      description: 'Sends count progress notifications, delayMs apart, then answers "streamed <count>".',
      inputSchema: { count: z.number().int().min(0).max(100_000), delayMs: z.number().int().min(0).max(60_000) },
    },
    async ({ count, delayMs }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let i = 1; i <= count; i += 1) {
        if (progressToken !== undefined) await extra.sendNotification({ method: 'notifications/progress', params: { progressToken, progress: i, total: count } });
        if (delayMs > 0 && i < count) await sleep(delayMs);
      }
      return text(`streamed ${count}`);
    },
  );

  server.registerTool('ping', { description: 'Answers "pong".' }, () => text('pong'));

  server.experimental.tasks.registerToolTask(
    'slow_task',
    {
      description: 'Works for ms milliseconds, then stores "slept <ms> ms" as its result. Call it as a task (status and result readable through any instance) or plainly.',
      inputSchema: { ms: z.number().int().min(0).max(600_000) },
      execution: { taskSupport: 'optional' },
    },
    {
      async createTask({ ms }, extra) {
        const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? DEFAULT_TASK_TTL_MS, pollInterval: TASK_POLL_INTERVAL_MS });
        // The work runs here; its result goes to the durable store, once
        // (a retry after a lost ack finds its own result and writes nothing).
        // If this process dies first, the task stays `working` until its TTL.
        void sleep(ms)
          .then(() => extra.taskStore.storeTaskResult(task.taskId, 'completed', text(`slept ${ms} ms`)))
          .catch(onWorkError);
        return { task };
      },
      getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
      getTaskResult: async (_args, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as Text,
    },
  );
  return server;
}
