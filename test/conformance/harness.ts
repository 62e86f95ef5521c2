import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '@tether/testing';
import type { Check, ScenarioResult } from './suite.js';

// What the conformance files share: the baseline file, a gateway in front of
// an upstream, and the tests that hold a run against its baseline: directly,
// each scenario fails with exactly the checks the baseline names; through the
// gateway, each has the same result as directly, check by check.

const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
/** The suite's request/response trace: differs run to run (ids, counts), says nothing about conformance. */
const TRACE_CHECKS = new Set(['outgoing-request', 'incoming-response', 'incoming-sse-event', 'stream-closed']);

/** One scenario that fails directly against the upstream, so not because of the gateway. */
export interface BaselineEntry {
  /** Its FAILURE and WARNING check ids. */
  readonly checks: readonly string[];
  readonly reason: string;
  /**
   * Only when the gateway changes the result on its own account (its own
   * checks come before the upstream's): the failing checks through the
   * gateway (none: it passes there), and why. Every other check must still
   * match.
   */
  readonly viaGateway?: { readonly checks: readonly string[]; readonly reason: string };
}

/** An `expected-failures*.json` file. */
export interface Baseline {
  /** `@modelcontextprotocol/conformance@<version>`: the suite the entries were taken with. */
  readonly suite: string;
  readonly server: Readonly<Record<string, BaselineEntry>>;
}

export function readBaseline(url: URL): Baseline {
  return JSON.parse(readFileSync(fileURLToPath(url), 'utf8')) as Baseline;
}

/** A `tether-gateway` process on a random port in front of `upstreamUrl`. */
export function startConformanceGateway(natsUrl: string, upstreamUrl: string, instanceId: string): Promise<ServiceProcess> {
  return startServiceProcess({
    name: `${instanceId}-gateway`,
    command: process.execPath,
    args: [GATEWAY_MAIN, '--port', '0', '--nats', natsUrl, '--upstream', upstreamUrl, '--instance-id', instanceId, '--drain-timeout', '2s'],
    readyLine: (json) => json.msg === 'listening',
  });
}

/** What must match between two runs: every check but the trace and `except`, by id and status. */
function verdicts(result: ScenarioResult | undefined, except: ReadonlySet<string> = new Set()): string[] {
  return (result?.checks ?? []).filter((c) => !(c.status === 'INFO' && TRACE_CHECKS.has(c.id)) && !except.has(c.id)).map((c) => `${c.id}: ${c.status}`);
}

function failing(result: ScenarioResult | undefined): Check[] {
  return (result?.checks ?? []).filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
}

/** The whole failing checks (with their messages) for a diff, not just the ids. */
function explain(result: ScenarioResult | undefined): string {
  return JSON.stringify(failing(result).map((c) => ({ id: c.id, status: c.status, errorMessage: c.errorMessage })), null, 2);
}

const ids = (checks: readonly Check[]) => checks.map((c) => c.id).sort();

/** The two runs of one suite, filled by the file's `beforeAll`. */
export interface ConformanceRuns {
  readonly direct: ReadonlyMap<string, ScenarioResult>;
  readonly viaGateway: ReadonlyMap<string, ScenarioResult>;
  readonly gateway: ServiceProcess | undefined;
}

export interface ConformanceTestsOptions {
  /** Prefixes every test title, e.g. `MCP conformance 2026-07-28`. */
  readonly title: string;
  /** `@modelcontextprotocol/conformance@<installed version>`. */
  readonly suite: string;
  readonly scenarios: readonly string[];
  readonly baseline: Baseline;
  readonly runs: () => ConformanceRuns;
}

/** The tests of one suite run: the baseline's own sanity, one pair per scenario, and the gateway's log. */
export function describeConformance(opts: ConformanceTestsOptions): void {
  const { baseline, scenarios, title } = opts;

  describe(`${title} baseline`, () => {
    it('is for the installed suite, and names only its scenarios, each with a reason', () => {
      expect(baseline.suite).toBe(opts.suite);
      for (const [scenario, entry] of Object.entries(baseline.server)) {
        expect(scenarios, `baseline entry ${scenario}`).toContain(scenario);
        expect(entry.reason.length, `reason of ${scenario}`).toBeGreaterThan(20);
        expect(entry.checks.length, `checks of ${scenario}`).toBeGreaterThan(0);
        if (entry.viaGateway !== undefined) expect(entry.viaGateway.reason.length, `viaGateway reason of ${scenario}`).toBeGreaterThan(20);
      }
    });
  });

  describe.each(scenarios)(`${title} %s`, (scenario) => {
    const entry = baseline.server[scenario];

    it('directly: passes, or fails with exactly the checks the baseline names', () => {
      const got = opts.runs().direct.get(scenario);
      expect(ids(failing(got)), explain(got)).toEqual([...(entry?.checks ?? [])].sort());
    });

    it('through the gateway: the same result as directly', () => {
      const { direct, viaGateway } = opts.runs();
      const got = viaGateway.get(scenario);
      if (entry?.viaGateway === undefined) {
        expect(got?.outcome, explain(got)).toBe(direct.get(scenario)?.outcome);
        expect(verdicts(got)).toEqual(verdicts(direct.get(scenario)));
        return;
      }
      // The gateway decides these checks itself (the baseline says why); every other one is the upstream's.
      expect(ids(failing(got)), explain(got)).toEqual([...entry.viaGateway.checks].sort());
      const decided = new Set([...entry.checks, ...entry.viaGateway.checks]);
      expect(verdicts(got, decided)).toEqual(verdicts(direct.get(scenario), decided));
    });
  });

  describe(`${title}: tether-gateway`, () => {
    it('logged no error', () => {
      const errors = (opts.runs().gateway?.stdoutJson ?? []).filter((line) => typeof line['level'] === 'number' && line['level'] >= 50);
      expect(errors).toEqual([]);
    });
  });
}
