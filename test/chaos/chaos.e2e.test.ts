import { describe, expect, it } from 'vitest';
import { runChaos } from './chaos.js';
import { FaultKind } from './faults.js';
import { formatSummary } from './summary.js';

// The short chaos run of the CI suite (the long one is `npm run chaos`, see
// docs/reliability.md): real processes, every fault kind at least once, and
// the checker's verdict on every stream any client touched.
describe('chaos: 35 s under faults, a 3-node NATS cluster, three gateways behind a balancer', () => {
  it('every stream is complete or ends with an explicit verdict; no silent violation', async () => {
    const report = await runChaos({ durationMs: 35_000, clients: 5, seed: 7, settleMs: 10_000, readPageBudgetMs: 5_000, load: { callTimeoutMs: 15_000 } });
    const summary = formatSummary(report, 'test/chaos/chaos.e2e.test.ts (seed 7, 35s, 5 clients)');
    const faults = Object.values(report.faults).reduce((a, b) => a + b, 0);
    process.stdout.write(`chaos: ${report.streams.total} streams, ${report.resumes.total} resumes, ${faults} faults, ${report.silentViolations.total} silent violations (${(report.wallMs / 1000).toFixed(0)} s)\n`);
    for (const kind of Object.values(FaultKind)) expect(report.faults[kind], `${kind} never fired\n${summary}`).toBeGreaterThan(0);
    expect(report.faults['client_abort'], summary).toBeGreaterThan(0);
    // Resumes broken right after their priming event: the client must keep its cursor.
    expect(report.faults['cut_after_priming'], summary).toBeGreaterThan(0);
    // The run did real work: streams completed and resumes were served.
    expect(report.streams['complete'] ?? 0, summary).toBeGreaterThan(20);
    expect(report.resumes.byOutcome['200 resumed'] ?? 0, summary).toBeGreaterThan(20);
    expect(report.verification.eventsMatched, summary).toBeGreaterThan(500);
    expect(report.silentViolations.examples, summary).toEqual([]);
    expect(report.silentViolations.total, summary).toBe(0);
  }, 150_000);
});
