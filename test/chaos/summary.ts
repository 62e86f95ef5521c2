/** The human summary of a chaos report (the JSON file has everything). */
import type { ChaosReport } from './chaos.js';
import { formatTaskSummary } from './task-checker.js';

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
  const c = report.config;
  const behind = c.target === 'sdk-example' ? `${c.instances} tether-sdk-example processes` : `${c.instances} gateways, log ${c.log === 'grpc' ? `over gRPC (--log grpc://, ${c.logServices} session-log services)` : 'in-process on NATS'}`;
  lines.push(`config: target ${c.target} (${behind}); nats-server ${c.natsVersion}, 3 nodes, R3, ${c.logPartitions === 1 ? 'the log on one stream' : `the log on ${c.logPartitions} partitions (--log-partitions)`}, sync_interval ${c.sync === 'always' ? 'always' : 'default'}${c.natsProxies ? ', NATS clients behind their own proxies' : ''}${c.net === 'hosts' ? ', every process in a network namespace of its own (--net hosts)' : ''}${c.upstreams === undefined ? '' : `; upstreams ${c.upstreams.join(', ')} (--upstreams)`}${c.taskUpstream === 'owned' ? '; task route: two replicas running their own tasks (--task-upstream owned)' : ''}`);
  lines.push(`fault kinds (weight): ${c.faults.map((f) => `${f.kind} (${f.weight})`).join(', ')}`);
  lines.push('');
  lines.push(`streams:             ${report.streams.total}`);
  for (const cls of ['complete', 'explicit', 'open', 'unfinished', 'violation']) lines.push(`  ${cls.padEnd(18)} ${report.streams[cls] ?? 0}`);
  // With --upstreams: each route (upstream) on its own line.
  for (const [path, n] of Object.entries(report.routes ?? {})) {
    lines.push(`  ${path.padEnd(18)} ${['complete', 'explicit', 'open', 'unfinished', 'violation'].map((cls) => `${cls} ${n[cls] ?? 0}`).join(', ')}; ${n['resumes'] ?? 0} resumes; ${n['calls'] ?? 0} tool calls, ${n['results'] ?? 0} answered`);
  }
  lines.push(`events delivered:    ${report.events.delivered} (log holds ${report.events.logged} messages)`);
  lines.push(`resumes:             ${report.resumes.total} (${report.resumes.delivering} delivered events after the cursor; raw ${report.resumes.byClient['raw'] ?? 0}, sdk ${report.resumes.byClient['sdk'] ?? 0})`);
  lines.push(`silent violations:   ${report.silentViolations.total}`);
  const w = report.writers;
  lines.push(`two-writer scan:     ${w.streams} streams, ${w.takeovers} takeovers, ${w.reclaims} re-claims by a deposed writer's own prime, ${w.violations} events of a deposed writer after a takeover`);
  const p = report.powerLoss;
  lines.push(...formatTaskSummary(report.tasks));
  if (p.losses > 0) {
    lines.push(`power losses:        ${p.losses}: ${p.acked} acknowledged log events in the re-checked windows, ${p.survived} found again, ${p.lost} lost, ${p.purged} purged with their session meanwhile, ${p.unchecked} not compared; ${p.shorterLogs} restarts left the log shorter than acknowledged; ${p.silent} lost events reached a client whose stream then ended silently`);
  }
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
  if (p.losses > 0) {
    table('lost acknowledged events by how they ended for their clients:', p.lostByEnd);
    for (const example of p.examples.slice(0, 10)) lines.push(`  LOST ${example}`);
  }
  if (report.openAtHardStop.length > 0) {
    lines.push(`requests still open at the hard stop: ${report.openAtHardStop.length}`);
    for (const line of report.openAtHardStop.slice(0, 10)) lines.push(`  OPEN ${line}`);
  }
  if (Object.keys(report.natsProxies).length > 0) {
    lines.push('NATS proxies (gateway_nats_cut):');
    for (const [name, s] of Object.entries(report.natsProxies)) lines.push(`  ${name.padEnd(8)} ${s.connections} connections, ${s.resets} resets, ${s.refused} refused`);
  }
  const v = report.verification;
  const byPartition = v.tapMessagesByPartition.length > 1 ? `, per partition ${v.tapMessagesByPartition.join('/')}` : '';
  lines.push(`verification: ${v.eventsMatched} delivered events matched the log; ${v.deliveredThenLost} delivered, then lost by a power loss; ${v.foundByReadPage} found by readPage only; ${v.unverifiable} unverifiable; readPage read ${v.readPageStreams} streams, ${v.readPageMismatches} mismatches with the tap; tap read ${v.tapMessages} messages${byPartition} (${v.tapRebuilds} rebuilds, ${v.tapHolesFilled} missed deliveries fetched one by one, ${v.tapHolesPurged} positions purged before it read them, ${v.tapGaps} stream copies left with such a hole; ${v.tapReplicaMismatches} events its replica numbered differently from the stream leader, the leader's copy used; ${v.tapAbsentFoundLater ?? 0} positions a power loss's re-read found empty that the leader held at the end)`);
  for (const example of report.silentViolations.examples.slice(0, 10)) lines.push(`  VIOLATION ${JSON.stringify(example)}`);
  return lines.join('\n');
}
