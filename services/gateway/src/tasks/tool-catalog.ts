import { redactedUrl } from '../upstream.js';
import { callerIdentityHeaders, ListFailure, listTools, MAX_PAGES, ToolListError } from './tool-list.js';
import type { ToolTaskInfo } from './tool-list.js';

export type { TaskSupport, ToolTaskInfo } from './tool-list.js';

/*
 * What the upstream says about its tools, as a refinement of which
 * `tools/call`s may become durable tasks (MCP 2026-07-28 Tasks extension).
 *
 * SEP-2663 makes the server the sole decider, with no `tools/list` warm-up:
 * any call from a client that declared the extension, unanswered after
 * `--task-after`, becomes a task. This catalog only narrows that: a tool the
 * upstream's 2025-era list marks `forbidden` (or `--no-task-tools` names)
 * stays a plain call, one marked `required` is refused to a client without
 * the extension, and `idempotentHint` allows re-runs. One catalog per route,
 * the list read by `tool-list.ts` (in the 2025 era: see there why), kept in
 * memory and refreshed in the background; a call never waits for it
 * ({@link ToolCatalog.peek}).
 */

export interface ToolCatalogOptions {
  /** The route's upstream MCP endpoint (http URL). */
  readonly upstreamUrl: string;
  /** Re-list after this long, in ms (e.g. 60_000). The old list answers while the new one loads. */
  readonly refreshMs: number;
  /** `--task-tools`: names treated as taskSupport `'optional'` (at least), even against an upstream's `forbidden`. */
  readonly taskTools: readonly string[];
  /** `--no-task-tools`: names that never become tasks, whatever the upstream says. */
  readonly noTaskTools?: readonly string[];
  /** `--task-tool-list off`: never read the upstream's list; only the two flags above refine. */
  readonly listing?: boolean;
  /** Per upstream request (body included). Default 5000. */
  readonly timeoutMs?: number;
  readonly logger?: { warn(obj: object, msg: string): void };
}

const DEFAULT_TIMEOUT_MS = 5_000;
/** Bounds both a miss (a tool may have been added) and retries after a failed listing. */
const REFETCH_MIN_INTERVAL_MS = 5_000;

interface ToolList {
  readonly tools: ReadonlyMap<string, ToolTaskInfo>;
  /** `performance.now()` when the listing started: what staleness counts from. */
  readonly listedAt: number;
  /** The `#generation` it was started in; an older one predates an `invalidate()`. */
  readonly generation: number;
}

/** One per route. Lookups never throw; see {@link ToolCatalog.lookup}. */
export class ToolCatalog {
  readonly #options: ToolCatalogOptions;
  readonly #taskTools: ReadonlySet<string>;
  readonly #noTaskTools: ReadonlySet<string>;
  /** The reason of the last failed listing that was logged: a failure repeats quietly until the reason changes. */
  #warnedReason: string | undefined;
  readonly #closing = new AbortController();
  #list: ToolList | undefined;
  #generation = 0;
  #inflight: { readonly done: Promise<void>; readonly generation: number } | undefined;
  #lastAttemptAt = Number.NEGATIVE_INFINITY;
  #lastAttemptFailed = false;

  constructor(options: ToolCatalogOptions) {
    this.#options = options;
    this.#taskTools = new Set(options.taskTools);
    this.#noTaskTools = new Set(options.noTaskTools ?? []);
  }

  /**
   * What is known of the tool now, without waiting: the last good list
   * refined by the flags, else undefined. Starts a background (re)listing
   * when one is due, with `headers` (the caller's forwarded identity
   * headers); the call that asked goes on at once.
   */
  peek(tool: string, headers: Readonly<Record<string, string>>): ToolTaskInfo | undefined {
    void this.lookup(tool, headers);
    return this.#answer(tool);
  }

  /** What is known of the tool now, from memory only: never starts a listing (a caller without credentials asks). */
  known(tool: string): ToolTaskInfo | undefined {
    return this.#answer(tool);
  }

  /**
   * The tool's task info. `headers` are the caller's forwarded identity
   * headers (Authorization etc.), used if a (re)fetch is needed; concurrent
   * lookups share one fetch, made with the headers of the lookup that
   * started it. Never throws: on failure it answers from the last good list,
   * else from `taskTools`, else `undefined`, and logs a warning.
   */
  async lookup(tool: string, headers: Readonly<Record<string, string>>): Promise<ToolTaskInfo | undefined> {
    if (this.#closing.signal.aborted || this.#options.listing === false) return this.#answer(tool);
    const now = performance.now();
    const list = this.#list;
    const retryAllowed = !this.#lastAttemptFailed || now - this.#lastAttemptAt >= REFETCH_MIN_INTERVAL_MS;
    if (list === undefined || list.generation !== this.#generation) {
      // Nothing current to answer from: wait for a list (unless the last try
      // just failed; then answer from what there is instead of hammering).
      if (retryAllowed) await this.#refresh(headers);
    } else if (now - list.listedAt >= this.#options.refreshMs) {
      // Stale-while-revalidate: this lookup answers from the old list.
      if (retryAllowed) void this.#refresh(headers);
    } else if (!list.tools.has(tool) && now - this.#lastAttemptAt >= REFETCH_MIN_INTERVAL_MS) {
      // A tool may have been added since; one refetch per interval, however
      // many unknown names callers try.
      await this.#refresh(headers);
    }
    return this.#answer(tool);
  }

  /** Forget the list (e.g. on `notifications/tools/list_changed`); the next lookup refetches and waits for it. */
  invalidate(): void {
    this.#generation += 1;
    this.#lastAttemptFailed = false;
    this.#lastAttemptAt = Number.NEGATIVE_INFINITY;
  }

  /** Aborts a listing in flight; later lookups answer from memory and never fetch. Idempotent. */
  close(): void {
    this.#closing.abort();
  }

  #answer(tool: string): ToolTaskInfo | undefined {
    // The last good list even after invalidate(): older facts beat none when
    // the upstream cannot be asked.
    const listed = this.#list?.tools.get(tool);
    if (this.#noTaskTools.has(tool)) return { taskSupport: 'forbidden', idempotent: listed?.idempotent ?? false };
    if (!this.#taskTools.has(tool)) return listed;
    if (listed === undefined) return { taskSupport: 'optional', idempotent: false };
    return listed.taskSupport === 'forbidden' || listed.taskSupport === undefined ? { ...listed, taskSupport: 'optional' } : listed;
  }

  /** Joins the listing of the current generation, or starts one once any older listing has settled. */
  async #refresh(headers: Readonly<Record<string, string>>): Promise<void> {
    for (;;) {
      const running = this.#inflight;
      if (running === undefined) break;
      if (running.generation === this.#generation) return running.done;
      // It started before an invalidate(): its answer may miss the change.
      // One fetch at a time, so wait for it, then look again (another waiter
      // may have started the next one by then).
      await running.done;
    }
    const generation = this.#generation;
    const done = this.#fetchInto(generation, headers).finally(() => {
      if (this.#inflight?.done === done) this.#inflight = undefined;
    });
    this.#inflight = { done, generation };
    return done;
  }

  async #fetchInto(generation: number, headers: Readonly<Record<string, string>>): Promise<void> {
    const startedAt = performance.now();
    this.#lastAttemptAt = startedAt;
    try {
      const listing = await listTools({
        url: this.#options.upstreamUrl,
        headers: callerIdentityHeaders(headers),
        timeoutMs: this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
        closing: this.#closing.signal,
      });
      this.#list = { tools: listing.tools, listedAt: startedAt, generation };
      this.#warnedReason = undefined;
      if (generation === this.#generation) this.#lastAttemptFailed = false;
      if (listing.truncated) this.#warn({ reason: 'too_many_pages', pages: MAX_PAGES, tools: listing.tools.size }, 'tool list truncated');
    } catch (err) {
      if (generation === this.#generation) this.#lastAttemptFailed = true;
      const failure = err instanceof ToolListError ? err : new ToolListError(ListFailure.badAnswer);
      // An upstream that speaks only 2026-07-28 refuses every listing. Calls
      // still become tasks without the list, so a failure is said once per
      // reason (until a listing works again), not every few seconds.
      if (failure.code !== ListFailure.closed && failure.code !== this.#warnedReason) {
        this.#warnedReason = failure.code;
        this.#warn({ reason: failure.code, ...failure.fields, hasList: this.#list !== undefined }, 'tool list failed');
      }
    }
  }

  #warn(fields: object, msg: string): void {
    // The upstream's origin and path only: a URL may carry a key in its query or userinfo.
    this.#options.logger?.warn({ component: 'tool-catalog', upstream: redactedUrl(this.#options.upstreamUrl), ...fields }, msg);
  }
}
