import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// `npm run test:images`: the image build test alone (test/deploy/images.build.ts),
// run by .ci/run after npm test. Nothing of the root config: the test only
// spawns `npm run images`, which builds from the repository's own files.
export default defineConfig({
  root: fileURLToPath(new URL('../..', import.meta.url)),
  test: {
    include: ['test/deploy/images.build.ts'],
    maxWorkers: 1,
    testTimeout: 45 * 60_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
