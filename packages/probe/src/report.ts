import { GUIDANCE } from './classification.js';
import type { ProbeReport } from './probe.js';
import type { CursorAnswer } from './steps.js';

/** Exit status of the CLI: 1 on a silent failure, 0 otherwise (2 is for a probe that could not run). */
export function exitCodeOf(report: ProbeReport): 0 | 1 {
  return report.silent ? 1 : 0;
}

/** The report as one line of JSON, for scripts. */
export function formatJson(report: ProbeReport): string {
  return JSON.stringify(report);
}

/** The report for people: what was checked, what was seen, what it means, what to do. */
export function formatHuman(r: ProbeReport): string {
  const lines: string[] = [];
  const where = r.via === null ? r.url : `${r.url}, resumed via ${r.via}`;
  lines.push(`tether-probe ${where}`);
  lines.push(`result: ${r.classification}${r.silent ? ' (SILENT FAILURE)' : ''}${r.verdict === null ? '' : `, verdict ${r.verdict}`}`);
  lines.push('', 'What was checked');
  const o = r.original;
  lines.push(`  - opened a session (initialize answered with ${r.initialize.toUpperCase()}) and called tool "${r.tool}"`);
  if (r.resume !== null) {
    lines.push(`  - cut its stream after ${o.events} event(s) and resumed with Last-Event-ID: ${r.resume.lastEventId} at ${r.resume.url}`);
  }
  if (r.unknownCursor !== null) lines.push('  - sent an unknown and a malformed Last-Event-ID');
  if (r.idsUniqueAcrossStreams !== null || r.resume !== null) lines.push('  - opened a second stream to compare ids across streams');
  lines.push('', 'What was seen');
  lines.push(`  - original stream: ${o.events} event(s), ids ${o.idFormat}, priming event ${yes(o.priming)}, retry ${o.retryMs === null ? 'none' : `${o.retryMs} ms`}`);
  if (r.resume !== null) {
    const s = r.resume;
    const header = s.tetherResume === null ? '' : `, Tether-Resume: ${s.tetherResume}`;
    const ack = s.ack === null ? '' : `; resume acknowledgment (event: resume) ${s.ack.verdict}, next_seq ${s.ack.next_seq}`;
    lines.push(`  - resume: HTTP ${s.status} ${s.contentType ?? ''}${header}${ack}; ${s.events} event(s), first id ${s.firstEventId ?? 'none'}`);
  }
  if (r.unknownCursor !== null) lines.push(`  - unknown cursor: ${cursorLine(r.unknownCursor)}`);
  if (r.malformedCursor !== null) lines.push(`  - malformed cursor: ${cursorLine(r.malformedCursor)}`);
  if (r.idsUniqueAcrossStreams !== null) lines.push(`  - ids unique across streams: ${yes(r.idsUniqueAcrossStreams)}`);
  lines.push(`  - ${r.detail}`);
  const g = GUIDANCE[r.classification];
  lines.push('', 'What it means', `  ${g.means}`);
  const notes = cursorNotes(r);
  if (notes.length > 0) lines.push(...notes.map((n) => `  ${n}`));
  lines.push('', 'What to do', `  ${g.todo}`);
  return lines.join('\n') + '\n';
}

function yes(b: boolean): string {
  return b ? 'yes' : 'no';
}

function cursorLine(c: CursorAnswer): string {
  const verdict = c.verdict === null ? '' : ` (${c.verdict})`;
  if (c.explicit) return `HTTP ${c.status}${verdict}, explicit`;
  return `HTTP ${c.status}${verdict}, silent: ${c.events} event(s) sent for a cursor it cannot know`;
}

function cursorNotes(r: ProbeReport): string[] {
  const notes: string[] = [];
  const silent = [r.unknownCursor, r.malformedCursor].filter((c): c is CursorAnswer => c !== null && !c.explicit);
  if (silent.length > 0) {
    notes.push('Cursors it cannot honour are answered 200: a client whose cursor was lost (restart, eviction) is not told, and waits or re-reads.');
  }
  if (r.idsUniqueAcrossStreams === false) {
    notes.push('Event ids repeat across streams of one session: a Last-Event-ID cannot say which stream it continues.');
  }
  if (r.resume !== null && !r.original.priming) {
    notes.push('No priming event: a client that is cut before the first real event has no cursor to resume from.');
  }
  return notes;
}
