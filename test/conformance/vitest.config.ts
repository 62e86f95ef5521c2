import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import root from '../../vitest.config.ts';

// The conformance file alone: `vitest run --config test/conformance/vitest.config.ts`.
// It takes only the root config's aliases (so `@tether/*` resolve to source as in
// every other test) and the summary reporter; its projects and includes are not
// for this run. The tests share one suite run (a beforeAll): one file, one worker.
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  ...(root.resolve === undefined ? {} : { resolve: root.resolve }),
  test: {
    include: ['test/conformance/**/*.conformance.ts'],
    maxWorkers: 1,
    testTimeout: 60_000,
    // Upstream, nats-server and gateway start, then two suite runs of ~10 s each,
    // each bounded by runSuite's own timeout.
    hookTimeout: 420_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
