/**
 * The one tool this server offers: `countdown` streams a progress
 * notification every `intervalMs`, `count` times, then its result. Slow on
 * purpose, so a connection can be cut while it runs.
 */
export const COUNTDOWN_TOOL = {
  name: 'countdown',
  description: 'Counts to `count`, one progress notification every `intervalMs`, then answers.',
  inputSchema: {
    type: 'object',
    properties: {
      count: { type: 'integer', minimum: 1, maximum: 10_000 },
      intervalMs: { type: 'integer', minimum: 0, maximum: 60_000 },
    },
    required: ['count'],
  },
} as const;

export interface CountdownArgs {
  readonly count: number;
  readonly intervalMs: number;
}

/** Validated arguments, or a message saying what is wrong. */
export function countdownArgs(args: unknown): CountdownArgs | string {
  const a = (typeof args === 'object' && args !== null ? args : {}) as Record<string, unknown>;
  const count = a['count'];
  const intervalMs = a['intervalMs'] ?? 100;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > 10_000) return 'count must be an integer from 1 to 10000';
  if (typeof intervalMs !== 'number' || !Number.isInteger(intervalMs) || intervalMs < 0 || intervalMs > 60_000) return 'intervalMs must be an integer from 0 to 60000';
  return { count, intervalMs };
}

/**
 * The messages of one run, in order: `count` progress notifications (when
 * the caller asked for progress), then the JSON-RPC result for `requestId`.
 */
export async function* countdown(requestId: string | number, progressToken: string | number | undefined, args: CountdownArgs): AsyncGenerator<object> {
  for (let i = 1; i <= args.count; i += 1) {
    await new Promise((r) => setTimeout(r, args.intervalMs));
    if (progressToken !== undefined) {
      yield { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken, progress: i, total: args.count, message: `${i} of ${args.count}` } };
    }
  }
  yield { jsonrpc: '2.0', id: requestId, result: { content: [{ type: 'text', text: `counted to ${args.count}` }] } };
}
