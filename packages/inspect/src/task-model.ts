/**
 * What an operator sees of the gateway's durable tasks (the MCP Tasks
 * extension; records in `TETHER_EDGE_TASKS`), shared by tether-admin and
 * the inspector's page. Metadata only. A task record holds the call's
 * arguments, its input rounds and its result; none of that is here, only
 * counts, sizes, an error's numeric code and whether a result is an error.
 * The task id is a bearer handle: a task is named by its tag.
 */

/**
 * The statuses of the Tasks extension (SEP-2663), and `routed`: the route
 * record of a task an upstream replica runs itself (docs/design.md,
 * "Upstream-owned tasks"), while the gateway still routes it there (its
 * status is the upstream's to know; a replica found gone makes it `failed`).
 * Types only in this file:
 * the page's build (src/web) compiles it too, so a value here would be emitted
 * only there and missing from dist/ (the list is in task-statuses.ts).
 */
export type TaskStatusName = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled' | 'routed';

/**
 * Whether the instance running the task still lives, by its writer
 * presence (`<prefix>.writer.<runner>`): `alive` it answered, `gone` no
 * process holds it (the call is lost; the next `tasks/get` settles or
 * reruns the task), `silent` no answer in time, `none` no call runs
 * (waiting for input, or settled), `unknown` the record names no
 * well-formed writer id.
 */
export type RunnerState = 'alive' | 'gone' | 'silent' | 'none' | 'unknown';

/** Sizes of the parts an operator may not read, in bytes of their JSON (0 when absent). */
export interface TaskSizes {
  /** The whole stored record. */
  readonly record: number;
  readonly params: number;
  readonly result: number;
  readonly error: number;
}

/** One task as every view shows it. */
export interface TaskSummary {
  /** `taskTag(taskId)`: the first 6 characters and `…`, never the id. */
  readonly tag: string;
  readonly status: TaskStatusName;
  /** The tool called. */
  readonly tool: string;
  /** The gateway route whose upstream runs the call. */
  readonly route: string;
  /** `principalTag` of the owner's digest (12 characters), never the digest. */
  readonly principal: string;
  /** The `--instance-id` of the gateway that ran the call last; null when the record names none. */
  readonly runnerInstance: string | null;
  readonly runner: RunnerState;
  /** Upstream calls made (the first, input rounds and reruns). */
  readonly attempts: number;
  /** Reruns after a lost runner. */
  readonly reruns: number;
  /** Input rounds answered. */
  readonly rounds: number;
  readonly idempotent: boolean;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  readonly ttlMs: number;
  /** `createdAtMs + ttlMs`: after it the task answers "expired", then is gone. */
  readonly expiresAtMs: number;
  /** Input requests waiting for an answer (a count of keys, never their contents). */
  readonly pendingInputs: number;
  /** Answers received in the current round (a count of keys). */
  readonly inputResponses: number;
  /** `failed` only: the status message (why it failed); null otherwise. */
  readonly statusMessage: string | null;
  /** `failed` only: the JSON-RPC error's numeric code; null otherwise. */
  readonly errorCode: number | null;
  /** `completed` only: whether the tool result has `isError: true`; null otherwise. */
  readonly isError: boolean | null;
  readonly bytes: TaskSizes;
  /** A route record's replica, as the record names it (a digest of its URL, never the URL); null for the gateway's own tasks. */
  readonly replica: string | null;
}

/** The task list and where it came from. */
export interface TaskList {
  /** The tasks stream read (`TETHER_EDGE_TASKS[_<namespace>]`). */
  readonly stream: string;
  /** False: the stream does not exist, tasks were never used in this namespace. */
  readonly streamExists: boolean;
  /** Newest first. */
  readonly tasks: readonly TaskSummary[];
}

/** Filters of the task list; every one optional. */
export interface TaskFilter {
  readonly status?: TaskStatusName;
  /** Tasks whose principal tag starts with this (its first 12 characters are compared, as for sessions). */
  readonly principal?: string;
  /** At most this many, newest first. Default 50. */
  readonly limit?: number;
}
