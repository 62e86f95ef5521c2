import { SseParser } from '@tether/protocol';
import type { Logger } from 'pino';
import type { Route } from '../config.js';
import { callUpstream, isEventStream } from '../upstream.js';
import { CLIENT_CAPABILITIES_META, objectAt, TASKS_EXTENSION, TASKS_PROTOCOL_VERSION } from './wire.js';

export interface TaskOwnersOptions {
  readonly routes: readonly Route[];
  /** How long an answer about a route is believed before the upstream is asked again (`--task-tool-refresh`). */
  readonly refreshMs: number;
  readonly logger: Logger;
}

/** What the gateway believes about one route's upstream, and since when. */
interface Belief {
  readonly offers: boolean;
  readonly atMs: number;
  /** A probe that failed: believed for a short while only, so the upstream is asked again soon. */
  readonly failed: boolean;
}

/** How long a failed probe's "no" stands before the next request asks again. */
const FAILED_PROBE_MS = 5_000;
const PROBE_TIMEOUT_MS = 5_000;
const PROBE_ID = 'tether-discover';

/**
 * Which routes' upstreams run the Tasks extension themselves: learned from
 * their `server/discover` (SEP-2663: the server declares
 * `io.modelcontextprotocol/tasks` in `capabilities.extensions`), per route,
 * and believed for `refreshMs`. Every client's own `server/discover`, which
 * the gateway proxies, refreshes it too (`learn`). One probe per route at a
 * time; concurrent callers share it.
 *
 * A route whose upstream could not be asked counts as not offering the
 * extension: the gateway then owns the task and strips the declaration from
 * what it sends upstream, which is safe whatever the upstream is (a server
 * MUST NOT answer `CreateTaskResult` to a request that did not declare it).
 */
export class TaskOwners {
  readonly #options: TaskOwnersOptions;
  readonly #beliefs = new Map<string, Belief>();
  readonly #probing = new Map<string, Promise<boolean>>();
  readonly #next = new Map<string, number>();

  constructor(options: TaskOwnersOptions) {
    this.#options = options;
  }

  /** Whether `route`'s upstream runs tasks itself; asks it when the last answer is stale. */
  owns(route: Route, credentials: Readonly<Record<string, string>>): Promise<boolean> {
    const belief = this.#beliefs.get(route.path);
    const now = Date.now();
    if (belief !== undefined && now - belief.atMs < (belief.failed ? FAILED_PROBE_MS : this.#options.refreshMs)) return Promise.resolve(belief.offers);
    let probing = this.#probing.get(route.path);
    if (probing === undefined) {
      probing = this.#probe(route, credentials).finally(() => this.#probing.delete(route.path));
      this.#probing.set(route.path, probing);
    }
    // A stale belief answers meanwhile: a request never waits on a refresh of what is known.
    return belief !== undefined && !belief.failed ? Promise.resolve(belief.offers) : probing;
  }

  /**
   * Whether `route`'s upstream may run tasks itself: it does, or it could
   * not be asked (a route record found for a task id is then believed: the
   * replica that made it answers for it, or the task is settled lost).
   */
  async mayOwn(route: Route, credentials: Readonly<Record<string, string>>): Promise<boolean> {
    return (await this.owns(route, credentials)) || this.#beliefs.get(route.path)?.failed === true;
  }

  /** Learns from a `server/discover` result the gateway relayed (its `result`, as the upstream sent it). */
  learn(routePath: string, result: unknown): void {
    const capabilities = objectAt(result, 'capabilities');
    if (capabilities === undefined) return;
    this.#set(routePath, offersTasks(capabilities), false);
  }

  async #probe(route: Route, credentials: Readonly<Record<string, string>>): Promise<boolean> {
    // Round robin over the replicas: they are one deployment, and any of them speaks for it.
    const index = this.#next.get(route.path) ?? 0;
    this.#next.set(route.path, index + 1);
    const url = route.upstreams[index % route.upstreams.length]!;
    try {
      const answer = await callUpstream(url, {
        method: 'POST',
        headers: {
          ...credentials,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': TASKS_PROTOCOL_VERSION,
          'mcp-method': 'server/discover',
        },
        body: Buffer.from(JSON.stringify(discoverRequest())),
        signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
      });
      const bytes = await answer.bytes();
      const result = answer.status === 200 ? resultOf(bytes.toString('utf8'), isEventStream(answer)) : undefined;
      const capabilities = objectAt(result, 'capabilities');
      if (capabilities === undefined) {
        // An upstream without server/discover (2025-era only) or refusing us: it runs no 2026-07-28 tasks.
        this.#set(route.path, false, answer.status >= 500);
        return false;
      }
      return this.#set(route.path, offersTasks(capabilities), false);
    } catch (err) {
      this.#options.logger.warn({ route: route.path, err: String(err) }, 'server/discover probe failed: the gateway owns this route\'s tasks for now');
      return this.#set(route.path, false, true);
    }
  }

  #set(routePath: string, offers: boolean, failed: boolean): boolean {
    const before = this.#beliefs.get(routePath);
    this.#beliefs.set(routePath, { offers, atMs: Date.now(), failed });
    if (before === undefined || before.offers !== offers) this.#options.logger.info({ route: routePath, upstreamOwnsTasks: offers }, 'learned who runs this route\'s tasks');
    return offers;
  }
}

/** Whether a discover result's capabilities offer the Tasks extension. */
export function offersTasks(capabilities: unknown): boolean {
  return objectAt(objectAt(capabilities, 'extensions'), TASKS_EXTENSION) !== undefined;
}

function discoverRequest(): unknown {
  return {
    jsonrpc: '2.0',
    id: PROBE_ID,
    method: 'server/discover',
    params: {
      _meta: {
        'io.modelcontextprotocol/protocolVersion': TASKS_PROTOCOL_VERSION,
        'io.modelcontextprotocol/clientInfo': { name: 'tether-gateway', version: '0' },
        [CLIENT_CAPABILITIES_META]: { extensions: { [TASKS_EXTENSION]: {} } },
      },
    },
  };
}

/** The JSON-RPC result in a JSON body or in the event stream that carries it. */
export function resultOf(text: string, eventStream: boolean): unknown {
  const datas = eventStream ? eventData(text) : [text];
  for (const data of datas) {
    try {
      const message = JSON.parse(data) as { result?: unknown; id?: unknown };
      if (message !== null && typeof message === 'object' && 'result' in message) return message.result;
    } catch {
      // not JSON: not the answer
    }
  }
  return undefined;
}

function eventData(text: string): string[] {
  const parser = new SseParser();
  return [...parser.push(text), ...parser.end()].filter((e) => e.hasData).map((e) => e.data);
}
