import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirstSequencer from './test/support/sequencer.ts';

// One run covers every workspace. Tests import workspace packages by name; the
// aliases point them at source so a test never runs against a stale build
// (`npm test` still runs `tsc -b` first, so types are checked).
const pkg = (name: string) => new URL(`./packages/${name}/src/index.ts`, import.meta.url).pathname;

// Where test files live, and which of them do I/O (*.int, *.e2e) or are harnesses (chaos, fuzz).
const ROOTS = ['packages/*/test', 'services/*/test', 'examples/*/test', 'test'];
const IO_FILES = [...ROOTS.map((root) => `${root}/**/*.{int,e2e}.test.ts`), 'test/chaos/**/*.test.ts', 'test/fuzz/**/*.test.ts'];

export default defineConfig({
  resolve: {
    alias: {
      '@tether/protocol': pkg('protocol'),
      '@tether/config': pkg('config'),
      '@tether/testing': pkg('testing'),
      '@tether/session-log': pkg('session-log'),
      '@tether/telemetry': pkg('telemetry'),
      // Before its package: an alias also matches `<name>/…`, so the subpath must win first.
      '@tether/cursor-proto/operator': new URL('./packages/cursor-proto/src/operator.ts', import.meta.url).pathname,
      '@tether/cursor-proto': pkg('cursor-proto'),
      '@tether/resume-guard': pkg('resume-guard'),
      '@tether/probe': pkg('probe'),
      '@tether/sdk': pkg('sdk'),
      '@tether/inspect': pkg('inspect'),
      '@tether/session-log-service': new URL('./services/session-log/src/index.ts', import.meta.url).pathname,
      '@tether/gateway': new URL('./services/gateway/src/index.ts', import.meta.url).pathname,
    },
  },
  test: {
    projects: [
      {
        // Files that cross a process, a socket or a server, and the long harnesses (what the Node 22 run takes).
        extends: true,
        test: { name: 'io', include: IO_FILES },
      },
      {
        // The pure files.
        extends: true,
        test: { name: 'unit', include: ROOTS.map((root) => `${root}/**/*.test.ts`), exclude: [...configDefaults.exclude, ...IO_FILES] },
      },
      {
        // The gateway's end-to-end suite again, with the session-log service
        // owning the log and gateways on `--log grpc://` (no NATS): both log
        // modes behind one interface, proven by the same tests.
        extends: true,
        test: { name: 'e2e-grpc', include: ['services/gateway/test/e2e/**/*.test.ts'], env: { TETHER_E2E_LOG: 'grpc' } },
      },
    ],
    // Every file shares its worker's module graph: importing the workspace
    // afresh per file cost more than many files' tests (the Node 22 run:
    // 244 s isolated, 201 s shared; docs/benchmarks.md, "npm test"). So a
    // test leaves no global state behind: it closes what it opens, restores
    // what it stubs, and keeps process-wide hooks to itself.
    isolate: false,
    // Integration files start their own nats-server processes, and spend much
    // of their time waiting on them: on 2 cores three workers kept the CPU 83 %
    // busy against 65 % with two (docs/benchmarks.md, "npm test").
    // scripts/test.sh sets TETHER_TEST_WORKERS per run (3 each; the Node 22
    // and conformance runs overlap); a plain `npx vitest` gets 2.
    maxWorkers: Number(process.env['TETHER_TEST_WORKERS'] ?? '') || 2,
    // Longest files first, across both projects: no long file left for the end.
    sequence: { sequencer: LongestFirstSequencer },
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
