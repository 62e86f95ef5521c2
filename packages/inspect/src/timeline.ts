import type { AuditEvent } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import { byStream } from './chains.js';
import type { Connection, EventMark, SessionSummary, SessionTimeline, StreamLane, WriterSpan } from './model.js';
import { readSessionAudit, readSessionEvents } from './read.js';
import type { RawEvent } from './read.js';
import { resolveTag } from './registry.js';
import type { KnownSession } from './registry.js';
import { summarize } from './sessions.js';

/** One session as a timeline (the tag names it): lanes from the log, connections from the audit events. */
export async function readTimeline(access: InspectAccess, tag: string, known?: readonly KnownSession[]): Promise<SessionTimeline> {
  const session = await resolveTag(access, tag, known);
  const [events, audit] = await Promise.all([readSessionEvents(access, session.sessionId), readSessionAudit(access, session.sessionId)]);
  return buildTimeline(session, events, audit);
}

/** Pure: the timeline of `session` from its stored events (log order) and audit events. */
export function buildTimeline(session: KnownSession, events: readonly RawEvent[], audit: readonly AuditEvent[]): SessionTimeline {
  const lanes = [...byStream(events)].map(([stream, list]) => lane(stream, list));
  const summary: SessionSummary = summarize(session, audit, lanes.length);
  return { session: summary, lanes, connections: connections(audit), endedAtMs: endedAt(session, audit) };
}

function lane(stream: string, events: readonly RawEvent[]): StreamLane {
  const marks: EventMark[] = events.map((e) => ({
    seq: e.seq ?? 0,
    pos: e.pos,
    kind: e.kind ?? 'malformed',
    bytes: e.bytes,
    atMs: e.atMs,
    writer: e.writer,
    ...(e.endReason === undefined ? {} : { endReason: e.endReason }),
  }));
  return { stream, events: marks, writers: writerSpans(marks), ended: marks.some((m) => m.kind === 'end') };
}

/**
 * Consecutive runs of one writer. An event without a writer (a session's
 * first GET prime, before any gateway claimed the stream) belongs to no
 * span; a span whose writer differs from the one before it is a takeover.
 */
export function writerSpans(marks: readonly EventMark[]): WriterSpan[] {
  const spans: { writer: string; fromSeq: number; toSeq: number; takeover: boolean }[] = [];
  for (const m of marks) {
    if (m.writer === undefined) continue;
    const current = spans[spans.length - 1];
    if (current !== undefined && current.writer === m.writer) current.toSeq = m.seq;
    else spans.push({ writer: m.writer, fromSeq: m.seq, toSeq: m.seq, takeover: current !== undefined });
  }
  return spans;
}

/** Audit events as connections: a delivery's request joined with its `delivered` end (by `conn`); other kinds as they are. */
export function connections(audit: readonly AuditEvent[]): Connection[] {
  const ends = new Map<string, AuditEvent>();
  for (const e of audit) if (e.kind === 'delivered' && e.conn !== undefined) ends.set(e.conn, e);
  const out: Connection[] = [];
  for (const e of audit) {
    if (e.kind === 'delivered') continue;
    const end = e.conn === undefined ? undefined : ends.get(e.conn);
    const reason = end?.reason ?? e.reason;
    out.push({
      atMs: e.atMs,
      instance: e.instance,
      kind: e.kind,
      stream: e.stream,
      cursor: e.cursor === undefined ? undefined : { stream: e.cursor.stream, seq: e.cursor.seq, pos: e.cursor.pos },
      verdict: e.verdict,
      events: end?.events,
      status: e.status,
      ...(end === undefined ? {} : { endedAtMs: end.atMs }),
      ...(reason === undefined ? {} : { reason }),
      ...(e.writer === undefined ? {} : { writer: e.writer }),
      ...(e.from === undefined ? {} : { from: e.from }),
    });
  }
  return out.sort((a, b) => a.atMs - b.atMs);
}

/** When the session ended: its first close or delete audit event, else the registry's closing time. */
function endedAt(session: KnownSession, audit: readonly AuditEvent[]): number | undefined {
  const closing = audit.find((e) => e.kind === 'close' || e.kind === 'delete');
  if (closing !== undefined) return closing.atMs;
  return session.record?.state === 'closed' ? session.record.touchedAtMs : undefined;
}
