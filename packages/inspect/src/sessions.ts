import type { AuditEvent } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import type { SessionSummary } from './model.js';
import { readAllAudit, streamCount } from './read.js';
import { scanSessions } from './registry.js';
import type { KnownSession } from './registry.js';

/** Filters of the session list; every one optional. */
export interface SessionFilter {
  /** Only sessions with at least one resume of this verdict (`resumed`, `truncated`, …). */
  readonly verdict?: string;
  /** `active`, `closed`, or `expired` (no registry entry any more; only audit events remain). */
  readonly state?: string;
  /** Only sessions of this route (`/mcp`). */
  readonly route?: string;
  /** At most this many, newest first. Default 50. */
  readonly limit?: number;
}

/**
 * The recent sessions, newest activity first: tag, route, state, times,
 * stream count and resume verdicts by kind. One registry scan, one pass
 * over the retained audit events, then one stream-count request per
 * listed session.
 */
export async function listSessions(access: InspectAccess, filter: SessionFilter = {}, known?: readonly KnownSession[]): Promise<SessionSummary[]> {
  const sessions = known ?? (await scanSessions(access));
  const audit = await readAllAudit(access);
  const rows = sessions
    .map((s) => ({ s, summary: summarize(s, audit.get(s.sessionId) ?? [], 0) }))
    .filter(({ summary }) => filter.state === undefined || summary.state === filter.state)
    .filter(({ summary }) => filter.route === undefined || summary.route === filter.route)
    .filter(({ summary }) => filter.verdict === undefined || (summary.verdicts[filter.verdict] ?? 0) > 0)
    .sort((a, b) => lastActivity(b.summary) - lastActivity(a.summary))
    .slice(0, filter.limit ?? 50);
  return Promise.all(rows.map(async ({ s, summary }) => ({ ...summary, streams: await streamCount(access, s.sessionId) })));
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
