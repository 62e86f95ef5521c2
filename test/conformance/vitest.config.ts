import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import root from '../../vitest.config.ts';

// The conformance files alone: `vitest run --config test/conformance/vitest.config.ts`.
// It takes only the root config's aliases (so `@tether/*` resolve to source as in
// every other test) and the summary reporter; its projects and includes are not
// for this run. Each file's tests share its suite runs (a beforeAll). Each file
// starts its own servers on random ports, and mostly waits on the suite's
// request timeouts, so two run at once (TETHER_TEST_WORKERS, from
// scripts/test.sh; the two tasks files, about 50 s each, overlap).
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  ...(root.resolve === undefined ? {} : { resolve: root.resolve }),
  test: {
    include: ['test/conformance/**/*.conformance.ts'],
    maxWorkers: Number(process.env['TETHER_TEST_WORKERS'] ?? '') || 2,
    testTimeout: 60_000,
    // Per file: upstream, nats-server and gateway start, then two suite runs
    // (~10 s each for 0.1.16, ~5 s for 2026-07-28), each bounded by runSuite's own timeout.
    hookTimeout: 420_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
