import type { AuditEvent } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import type { SessionSummary } from './model.js';
import { readAllAudit, readLastAudit, readSessionAudit, streamCount } from './read.js';
import { auditCounts, READ_PARALLEL, scanSessions } from './registry.js';
import type { KnownSession } from './registry.js';
import { principalMatches, principalTagOf } from './tag.js';

/** Filters of the session list; every one optional. */
export interface SessionFilter {
  /** Only sessions with at least one resume of this verdict (`resumed`, `truncated`, …). */
  readonly verdict?: string;
  /** `active`, `closed`, or `expired` (no registry entry any more; only audit events remain). */
  readonly state?: string;
  /** Only sessions of this route (`/mcp`). */
  readonly route?: string;
  /**
   * Only sessions whose principal tag starts with this (see
   * `principalMatches`: its first 12 characters are compared). Sessions the
   * registry forgot have no principal and never match.
   */
  readonly principal?: string;
  /** At most this many, newest first. Default 50. */
  readonly limit?: number;
}

/**
 * The recent sessions, newest activity first: tag, principal tag, route,
 * state, times, stream count and resume verdicts by kind. One registry scan; then, without
 * a `verdict` filter (or a `closed`/`expired` one), the last audit event of
 * each session (one consumer, one message per session) orders them, and
 * only the listed sessions' audit events are read, 32 sessions at a time
 * (or in one pass when that many reads would cost more).
 * A `verdict` filter, or a state that audit events decide for sessions
 * the registry forgot, needs every event: one pass over all of them.
 * Either way the answer is the same for the same log.
 */
export async function listSessions(access: InspectAccess, filter: SessionFilter = {}, known?: readonly KnownSession[]): Promise<SessionSummary[]> {
  const sessions = known ?? (await scanSessions(access));
  const needsEveryEvent = filter.verdict !== undefined || filter.state === 'closed' || filter.state === 'expired';
  return needsEveryEvent ? listFromEveryEvent(access, filter, sessions) : listFromLastEvents(access, filter, sessions);
}

/** The full pass: every retained audit event, then filter, sort and cut. */
export async function listFromEveryEvent(access: InspectAccess, filter: SessionFilter, sessions: readonly KnownSession[]): Promise<SessionSummary[]> {
  const audit = await readAllAudit(access);
  const rows = sessions
    .map((s) => ({ s, summary: summarize(s, audit.get(s.sessionId) ?? [], 0) }))
    .filter(({ summary }) => filter.state === undefined || summary.state === filter.state)
    .filter(({ summary }) => filter.route === undefined || summary.route === filter.route)
    .filter(({ summary }) => filter.principal === undefined || principalMatches(summary.principal, filter.principal))
    .filter(({ summary }) => filter.verdict === undefined || (summary.verdicts[filter.verdict] ?? 0) > 0)
    .sort((a, b) => lastActivity(b.summary) - lastActivity(a.summary))
    .slice(0, filter.limit ?? 50);
  return inParallel(rows, async ({ s, summary }) => ({ ...summary, streams: await streamCount(access, s.sessionId) }));
}

/**
 * Without a verdict filter, a row's place depends only on its registry
 * record and its last audit event: last activity is the later of the
 * record's touch and that event's time (a session the registry forgot has
 * only the event). State, route and principal come from the record; a
 * session without one is `closed` or `expired`, which only a
 * `closed`/`expired` filter (the full pass) asks about. Where the last
 * message alone cannot say (it does not decode, or a forgotten session's
 * time is 0), that session's events are read in full. The same stable sort over the same scan order
 * as the full pass, so ties come out the same. `readEvents`: see
 * perSessionReadEvents (tests force either way).
 */
export async function listFromLastEvents(access: InspectAccess, filter: SessionFilter, sessions: readonly KnownSession[], readEvents = perSessionReadEvents(access)): Promise<SessionSummary[]> {
  const candidates = sessions.filter((s) => {
    if (filter.state !== undefined && s.record?.state !== filter.state) return false;
    if (filter.principal !== undefined && !principalMatches(principalTagOf(s.record), filter.principal)) return false;
    return filter.route === undefined || s.record?.meta['route'] === filter.route;
  });
  const last = await readLastAudit(access);
  const full = new Map<string, AuditEvent[]>();
  const unsure = candidates.filter((s) => {
    const event = last.get(s.sessionId);
    return event === null || (s.record === undefined && event !== undefined && !event.atMs);
  });
  await inParallel(unsure, async (s) => void full.set(s.sessionId, await readSessionAudit(access, s.sessionId)));
  const keyOf = (s: KnownSession): number => {
    const events = full.get(s.sessionId);
    if (events !== undefined) return lastActivity(summarize(s, events, 0));
    const event = last.get(s.sessionId);
    return lastActivity(summarize(s, event === undefined || event === null ? [] : [event], 0));
  };
  const listed = candidates
    .map((s) => ({ s, key: keyOf(s) }))
    .sort((a, b) => b.key - a.key)
    .slice(0, filter.limit ?? 50);
  // One read per listed session costs an ephemeral consumer, about what a
  // pass over `readEvents` events costs: past that, one pass. A pass is a
  // consumer per partition, so its extra partitions count against it.
  const counts = await auditCounts(access);
  let total = 0;
  for (const n of counts.values()) total += n;
  const toRead = listed.filter(({ s }) => !full.has(s.sessionId) && (counts.has(s.sessionId) || last.has(s.sessionId)));
  if ((toRead.length - (access.partitions.length - 1)) * readEvents > total) {
    const every = await readAllAudit(access);
    for (const { s } of toRead) full.set(s.sessionId, every.get(s.sessionId) ?? []);
  } else {
    await inParallel(toRead, async ({ s }) => void full.set(s.sessionId, await readSessionAudit(access, s.sessionId)));
  }
  return inParallel(listed, async ({ s }) => summarize(s, full.get(s.sessionId) ?? [], await streamCount(access, s.sessionId)));
}

/**
 * Audit events one pass reads in about the time of one per-session read
 * (an ephemeral consumer: create, fetch, delete), by server. Measured on 2
 * loaded cores, 2,000 sessions of 10 events: on 2.9.10 a pass costs ~0.015
 * ms per event and a session read ~2 ms; on 2.15.1 a pass ~0.07 ms per
 * event and a session read ~1 ms. Servers between use the newer figure
 * (not measured).
 */
function perSessionReadEvents(access: InspectAccess): number {
  const [major = 0, minor = 0] = (access.nc.info?.version ?? '').split('.').map(Number);
  return major > 2 || (major === 2 && minor >= 10) ? 16 : 128;
}

/** One row, from what the registry and the audit events say. */
export function summarize(session: KnownSession, audit: readonly AuditEvent[], streams: number): SessionSummary {
  const verdicts: Record<string, number> = {};
  for (const e of audit) if (e.kind === 'resume' && e.verdict !== undefined) verdicts[e.verdict] = (verdicts[e.verdict] ?? 0) + 1;
  const first = audit[0]?.atMs;
  const last = audit[audit.length - 1]?.atMs;
  const closed = audit.some((e) => e.kind === 'close' || e.kind === 'delete');
  const record = session.record;
  return {
    tag: session.tag,
    principal: principalTagOf(record),
    route: record?.meta['route'],
    state: record?.state ?? (closed ? 'closed' : 'expired'),
    createdAtMs: record?.createdAtMs ?? first ?? 0,
    touchedAtMs: Math.max(record?.touchedAtMs ?? 0, last ?? 0) || undefined,
    streams,
    verdicts,
  };
}

function lastActivity(s: SessionSummary): number {
  return s.touchedAtMs ?? s.createdAtMs;
}

/** `map` over `items`, at most READ_PARALLEL at a time, results in order. */
async function inParallel<T, R>(items: readonly T[], map: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < items.length; i = next++) out[i] = await map(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(READ_PARALLEL, items.length) }, worker));
  return out;
}
