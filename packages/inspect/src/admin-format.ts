import type { ChainCheck, Connection, SessionSummary, SessionTimeline, StreamLane } from './model.js';

/** Text views of tether-admin. Metadata only: tags (of sessions and principals), streams, positions, sizes, instances, verdicts. */

export function age(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 7200) return `${Math.round(s / 60)}m`;
  if (s < 172_800) return `${Math.round(s / 3600)}h`;
  return `${Math.round(s / 86_400)}d`;
}

export function time(ms: number | undefined): string {
  return ms === undefined || ms === 0 ? '-' : new Date(ms).toISOString();
}

function verdicts(v: Readonly<Record<string, number>>): string {
  const parts = Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k}=${n}`);
  return parts.length === 0 ? '-' : parts.join(',');
}

export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}

export function formatSessions(rows: readonly SessionSummary[], nowMs: number): string {
  if (rows.length === 0) return 'no sessions\n';
  return table([
    ['TAG', 'PRINCIPAL', 'ROUTE', 'STATE', 'AGE', 'IDLE', 'STREAMS', 'VERDICTS'],
    ...rows.map((s) => [s.tag, s.principal || '-', s.route ?? '-', s.state, s.createdAtMs === 0 ? '-' : age(nowMs - s.createdAtMs), s.touchedAtMs === undefined ? '-' : age(nowMs - s.touchedAtMs), String(s.streams), verdicts(s.verdicts)]),
  ]);
}

function laneText(lane: StreamLane): string {
  const lines = [`stream ${lane.stream}: ${lane.events.length} events${lane.ended ? ', ended' : ', open'}`];
  for (const w of lane.writers) lines.push(`  writer ${w.writer} seq ${w.fromSeq}-${w.toSeq}${w.takeover ? '  (takeover)' : ''}`);
  for (const e of lane.events) {
    lines.push(`  ${time(e.atMs)}  seq ${String(e.seq).padStart(4)}  pos ${String(e.pos).padStart(6)}  ${e.kind.padEnd(5)} ${String(e.bytes).padStart(7)} B  ${e.writer ?? '-'}${e.endReason === undefined ? '' : `  end: ${e.endReason}`}`);
  }
  return lines.join('\n');
}

function connectionText(c: Connection): string {
  const parts = [time(c.atMs), c.instance, c.kind];
  if (c.stream !== undefined) parts.push(`stream ${c.stream}`);
  if (c.cursor !== undefined) parts.push(`cursor ${c.cursor.stream}/${c.cursor.seq}@${c.cursor.pos}`);
  if (c.verdict !== undefined) parts.push(`verdict ${c.verdict}`);
  if (c.status !== undefined) parts.push(`status ${c.status}`);
  if (c.events !== undefined) parts.push(`events ${c.events}`);
  if (c.from !== undefined) parts.push(`from writer ${c.from}`);
  if (c.writer !== undefined) parts.push(`writer ${c.writer}`);
  if (c.reason !== undefined) parts.push(`(${c.reason})`);
  return `  ${parts.join('  ')}`;
}

export function formatTimeline(t: SessionTimeline, nowMs: number): string {
  const s = t.session;
  const out = [
    `session ${s.tag}  principal ${s.principal || '-'}  route ${s.route ?? '-'}  state ${s.state}  created ${time(s.createdAtMs)} (${s.createdAtMs === 0 ? '-' : age(nowMs - s.createdAtMs)} ago)  streams ${t.lanes.length}`,
    `verdicts: ${verdicts(s.verdicts)}`,
    `ended: ${time(t.endedAtMs)}`,
    '',
    ...(t.lanes.length === 0 ? ['no events in the log (closed sessions are purged; their audit events remain)'] : t.lanes.map(laneText)),
    '',
    `connections (${t.connections.length}):`,
    ...t.connections.map(connectionText),
    '',
  ];
  return out.join('\n');
}

export function formatChecks(tag: string, checks: readonly ChainCheck[]): string {
  const lines = [`${tag}: ${checks.every((c) => c.ok) ? 'every chain is intact' : 'BROKEN'} (${checks.length} streams)`];
  for (const c of checks) {
    lines.push(`  stream ${c.stream}: ${c.ok ? 'ok' : `${c.problems.length} problems`}, ${c.events} events`);
    for (const p of c.problems) lines.push(`    ${p.kind} at seq ${p.seq}, pos ${p.pos}: ${p.detail}`);
  }
  return `${lines.join('\n')}\n`;
}
