/** The human summary of a chaos report (the JSON file has everything). */
import type { ChaosReport } from './chaos.js';

export function formatSummary(report: ChaosReport, command: string): string {
  const lines: string[] = [];
  const table = (title: string, counts: Readonly<Record<string, number>>): void => {
    lines.push(title);
    const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
    if (entries.length === 0) lines.push('  (none)');
    for (const [key, n] of entries) lines.push(`  ${String(n).padStart(8)}  ${key}`);
  };
  lines.push(`chaos: ${command}`);
  lines.push(`machine: ${report.machine['cpus']} x ${report.machine['cpuModel']}, ${report.machine['memoryGiB']} GiB, node ${report.machine['node']}, ${report.machine['natsServer']}`);
  lines.push(`run: ${report.durationMs / 1000}s of load, ${(report.wallMs / 1000).toFixed(1)}s wall, ${report.clients.raw} raw SSE clients + ${report.clients.sdk} SDK clients with the resume guard, seed ${report.seed}`);
  lines.push('');
  lines.push(`streams:             ${report.streams.total}`);
  for (const cls of ['complete', 'explicit', 'open', 'unfinished', 'violation']) lines.push(`  ${cls.padEnd(18)} ${report.streams[cls] ?? 0}`);
  lines.push(`events delivered:    ${report.events.delivered} (log holds ${report.events.logged} messages)`);
  lines.push(`resumes:             ${report.resumes.total} (${report.resumes.delivering} delivered events after the cursor; raw ${report.resumes.byClient['raw'] ?? 0}, sdk ${report.resumes.byClient['sdk'] ?? 0})`);
  lines.push(`silent violations:   ${report.silentViolations.total}`);
  lines.push('');
  table('resumes by outcome:', report.resumes.byOutcome);
  table('faults by kind:', report.faults);
  table('explicit verdicts by kind (streams):', report.explicitVerdicts);
  table('unfinished streams by reason:', report.unfinished);
  table('tool calls by outcome:', report.calls.byOutcome);
  table('resume guard reports:', report.guardReports);
  table('SDK resumes that lost their cursor (priming echo held back by the guard, then the response broke):', report.cursorLosses);
  table('silent violations by kind:', report.silentViolations.byKind);
  table('log anomalies by kind:', report.logAnomalies.byKind);
  const v = report.verification;
  lines.push(`verification: ${v.eventsMatched} delivered events matched the log; ${v.foundByReadPage} found by readPage only; ${v.unverifiable} unverifiable; readPage read ${v.readPageStreams} streams, ${v.readPageMismatches} mismatches with the tap; tap read ${v.tapMessages} messages (${v.tapRebuilds} rebuilds, ${v.tapHolesFilled} missed deliveries fetched one by one, ${v.tapHolesPurged} positions purged before it read them, ${v.tapGaps} stream copies left with such a hole; ${v.tapReplicaMismatches} events its replica numbered differently from the stream leader, the leader's copy used)`);
  for (const example of report.silentViolations.examples.slice(0, 10)) lines.push(`  VIOLATION ${JSON.stringify(example)}`);
  return lines.join('\n');
}
