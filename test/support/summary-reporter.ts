import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the one line CI reads: `N passed, N failed` (plus how many were
 * skipped). Errors outside tests and files that failed outside their tests
 * count as failures, so a broken file can never turn into a green run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      let failedHere = 0;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failedHere += 1;
        else skipped += 1;
      }
      // A file that failed outside its tests (a throwing beforeAll, an import
      // error) counts once, even though its tests only show as skipped.
      failed += mod.state() === 'failed' && failedHere === 0 ? 1 : failedHere;
    }
    failed += unhandledErrors.length;
    // The slowest files, for whoever shortens the wait (issue 25: npm test in 10 minutes).
    const slowest = testModules
      .map((mod) => ({ file: mod.relativeModuleId, project: mod.project.name, ms: mod.diagnostic().duration + mod.diagnostic().collectDuration }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 12);
    if (slowest.length > 0) {
      process.stdout.write(`\nslowest files (tests, hooks and import, s):\n${slowest.map((f) => `  ${(f.ms / 1000).toFixed(1).padStart(6)}  ${f.project === 'all' ? '' : `[${f.project}] `}${f.file}`).join('\n')}\n`);
    }
    const skippedNote = skipped > 0 ? ` (${skipped} skipped)` : '';
    // scripts/test.sh runs vitest more than once and prints the sum last; it
    // names each run (`node20: ...`) so the last plain line stays the total.
    const prefix = process.env['TETHER_SUMMARY_PREFIX'] ? `${process.env['TETHER_SUMMARY_PREFIX']}: ` : '';
    process.stdout.write(`\n${prefix}${passed} passed, ${failed} failed${skippedNote}\n`);
  }
}
