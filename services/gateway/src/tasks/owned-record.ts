import { createHash } from 'node:crypto';
import { samePrincipal } from '@tether/session-log';
import type { StoredTask, TaskRecord } from '@tether/session-log';
import type { Route } from '../config.js';
import type { TaskPort } from '../log/log-port.js';
import { failed } from './outcome.js';
import { RpcCode } from './wire.js';

/**
 * The route record of a task an upstream runs itself: which replica holds
 * it, and whose it is. It lives in the task table beside the gateway's own
 * tasks (one stream, one compare-and-set per change, readable on every
 * instance at once, and over `--log grpc://` through the same task RPCs),
 * under a key derived from the route and the upstream's id, since an
 * upstream id is any string and a subject token is not.
 */

/** A 22-character base64url digest: the shape of a task id, so the table (and the service) store it as one. */
function digest22(...parts: string[]): string {
  return createHash('sha256').update(parts.join('\n')).digest('base64url').slice(0, 22);
}

/** The table key of the upstream task `upstreamTaskId` on `routePath`. */
export const ownedKey = (routePath: string, upstreamTaskId: string): string => digest22('tether-upstream-task', routePath, upstreamTaskId);
/** A replica named without its URL (which may carry a secret). */
export const replicaDigest = (url: string): string => digest22('tether-replica', url);

/** The replica URL of `route` whose digest is `replica`, or undefined when the route no longer has it. */
export function replicaUrl(route: Route, replica: string): string | undefined {
  return route.upstreams.find((url) => replicaDigest(url) === replica);
}

export interface OwnedTaskFacts {
  readonly route: Route;
  readonly replicaUrl: string;
  readonly principal: string;
  /** The upstream's `CreateTaskResult`. */
  readonly created: Readonly<Record<string, unknown>>;
  /** The longest the gateway keeps a route (`--task-ttl`): the table keeps nothing longer. */
  readonly maxTtlMs: number;
  readonly tool: string;
}

/**
 * The record stored before the upstream's `CreateTaskResult` goes back: its
 * TTL is the upstream's, capped at `--task-ttl` (an unlimited upstream task
 * is routed for that long). Status stays `working` in the record until a
 * replica is found gone; the upstream is the one that knows the rest.
 */
export function ownedRecord(facts: OwnedTaskFacts): TaskRecord {
  const upstreamTaskId = facts.created.taskId as string;
  const now = Date.now();
  const ttl = facts.created.ttlMs;
  const ttlMs = typeof ttl === 'number' && Number.isSafeInteger(ttl) && ttl > 0 ? Math.min(ttl, facts.maxTtlMs) : facts.maxTtlMs;
  const poll = facts.created.pollIntervalMs;
  return {
    v: 1,
    taskId: ownedKey(facts.route.path, upstreamTaskId),
    principal: facts.principal,
    route: facts.route.path,
    tool: facts.tool,
    status: 'working',
    createdAtMs: now,
    updatedAtMs: now,
    ttlMs,
    pollIntervalMs: typeof poll === 'number' && Number.isFinite(poll) && poll >= 0 ? poll : 1_000,
    runner: null,
    attempts: 1,
    reruns: 0,
    rounds: 0,
    idempotent: false,
    // Nothing of the call: the upstream holds it.
    params: {},
    callHeaders: {},
    usedKeys: [],
    upstream: { taskId: upstreamTaskId, replica: replicaDigest(facts.replicaUrl) },
  };
}

/** An upstream-owned task as one caller may see it. */
export type OwnedLookup =
  | { readonly t: 'routed'; readonly stored: StoredTask }
  /** Unknown (`foreign` false), or another principal's (`foreign`): the caller hears "not found", and the upstream is not asked. */
  | { readonly t: 'absent'; readonly foreign: boolean }
  | { readonly t: 'expired' };

/** The route record of `upstreamTaskId` on `route`, if `principal` may see it. */
export async function findOwned(table: TaskPort, route: Route, upstreamTaskId: string, principal: string): Promise<OwnedLookup> {
  const stored = await table.read(ownedKey(route.path, upstreamTaskId));
  const r = stored?.record;
  // The upstream id is compared too: a digest names it, and only the record that holds it is its.
  if (r === undefined || r.upstream?.taskId !== upstreamTaskId || r.route !== route.path) return { t: 'absent', foreign: false };
  if (!samePrincipal(r.principal, principal)) return { t: 'absent', foreign: true };
  if (Date.now() >= r.createdAtMs + r.ttlMs) return { t: 'expired' };
  return { t: 'routed', stored: stored! };
}

/** Why a replica can no longer answer for its task (the `reason` in the error's data). */
export type LostReason = 'replica_gone' | 'replica_removed' | 'replica_forgot';

const LOST_MESSAGES: Readonly<Record<LostReason, string>> = {
  replica_gone: 'the upstream replica holding this task no longer accepts connections; the task is lost with it',
  replica_removed: 'the upstream replica holding this task is no longer part of the route; the task is lost with it',
  replica_forgot: 'the upstream replica holding this task no longer knows it (it restarted, or dropped it); the task is lost',
};

/**
 * Settles the route record `failed`, naming why, so that every instance
 * answers the same from then on without asking the replica again (a
 * replica that comes back empty must not answer "not found" for a task
 * the client was promised). Returns what is stored after.
 */
export async function settleLost(table: TaskPort, stored: StoredTask, reason: LostReason): Promise<TaskRecord> {
  const message = LOST_MESSAGES[reason];
  const next = await table.update(stored.record.taskId, (current) =>
    current.status !== 'working' ? undefined : failed({ ...current, updatedAtMs: Date.now() }, { code: RpcCode.internal, message, data: { reason } }, message),
  );
  return next?.record ?? stored.record;
}
