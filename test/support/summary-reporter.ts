import type { Reporter, TestModule } from 'vitest/node';

/**
 * Prints the one line CI reads: `N passed, N failed` (plus skipped, which are
 * always loud: every skip names its reason in the test title or a warning).
 * Errors outside tests and modules that failed to load count as failures, so a
 * broken file can never turn into a green run.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>, unhandledErrors: ReadonlyArray<unknown>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const mod of testModules) {
      if (mod.state() === 'failed' && mod.children.size === 0) failed += 1;
      for (const test of mod.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed += 1;
        else if (state === 'failed') failed += 1;
        else skipped += 1;
      }
    }
    failed += unhandledErrors.length;
    const skippedNote = skipped > 0 ? ` (${skipped} skipped)` : '';
    process.stdout.write(`\n${passed} passed, ${failed} failed${skippedNote}\n`);
  }
}
