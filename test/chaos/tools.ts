/**
 * The streaming tools the chaos clients call, one per upstream, described
 * once for both sides: the clients build a call's arguments from a count
 * and a pace, the checker reads back from the recorded arguments how many
 * progress events the call owes and the exact text of its result. Each is
 * "progress 1..count on the request's token (on the call's own stream),
 * then one text result"; `upstreams.int.test.ts` runs each real server and
 * holds it to its description.
 */

/** A call's numeric arguments, as the recorder keeps them (`record.ts`: numbers only, nothing else of the body). */
export type NumericArgs = Readonly<Record<string, number>>;

/** A tool that streams progress 1..count, then answers with one text. */
export interface ProgressTool {
  readonly name: string;
  /** Arguments for `count` progress events about `delayMs` apart. */
  readonly args: (count: number, delayMs: number) => Record<string, number>;
  /** The progress events a call with these arguments owes; undefined when they do not say. */
  readonly count: (args: NumericArgs) => number | undefined;
  /** Its result's text, exactly. */
  readonly resultText: (args: NumericArgs) => string;
}

/** The test kit's upstreams (`startMcpUpstream`, routes `/mcp` and `/plain/mcp`): `stream_progress {count, delayMs}` → `done <count>`. */
export const KIT_TOOL: ProgressTool = {
  name: 'stream_progress',
  args: (count, delayMs) => ({ count, delayMs }),
  count: (args) => args['count'],
  resultText: (args) => `done ${args['count']}`,
};

/** The SDK example (`examples/sdk-server`): `stream {count, delayMs}` → `streamed <count>`. */
export const SDK_EXAMPLE_TOOL: ProgressTool = {
  name: 'stream',
  args: (count, delayMs) => ({ count, delayMs }),
  count: (args) => args['count'],
  resultText: (args) => `streamed ${args['count']}`,
};

/**
 * The reference server `@modelcontextprotocol/server-everything`:
 * `trigger-long-running-operation {duration, steps}` sends progress
 * 1..steps (`total: steps`), one every `duration / steps` seconds, then
 * answers with the duration as it parsed it (a JSON number round-trips
 * exactly, so the text is known from the arguments).
 */
export const EVERYTHING_TOOL: ProgressTool = {
  name: 'trigger-long-running-operation',
  args: (count, delayMs) => ({ duration: (count * delayMs) / 1000, steps: count }),
  count: (args) => args['steps'],
  resultText: (args) => `Long running operation completed. Duration: ${args['duration']} seconds, Steps: ${args['steps']}.`,
};

/** The SDK v2 upstream (`v2-upstream-main.ts`, `createMcpHandler`): `stream {count, delayMs}` → `streamed <count>`, as the SDK example's. */
export const V2_TOOL: ProgressTool = { ...SDK_EXAMPLE_TOOL };

/** Every tool the checker knows, by name (the SDK example's and the v2 upstream's share one description). */
export const ALL_TOOLS: readonly ProgressTool[] = [KIT_TOOL, SDK_EXAMPLE_TOOL, EVERYTHING_TOOL];

/** The numeric arguments of a `tools/call`'s `arguments`, or undefined when there are none. */
export function numericArgs(value: unknown): NumericArgs | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(value)) if (typeof v === 'number') out[k] = v;
  return Object.keys(out).length === 0 ? undefined : out;
}
