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

/** A `tether-gateway` process on a random port in front of `upstreamUrl`; `extraArgs` such as `--tasks on`. */
export function startConformanceGateway(natsUrl: string, upstreamUrl: string, instanceId: string, extraArgs: readonly string[] = []): Promise<ServiceProcess> {
  return startServiceProcess({
    name: `${instanceId}-gateway`,
    command: process.execPath,
    args: [GATEWAY_MAIN, '--port', '0', '--nats', natsUrl, '--upstream', upstreamUrl, '--instance-id', instanceId, '--drain-timeout', '2s', ...extraArgs],
    readyLine: (json) => json.msg === 'listening',
  });
}

/** What must match between two runs: every check but the trace and `except`, by id and status. */
function verdicts(result: ScenarioResult | undefined, except: (id: string) => boolean = () => false): string[] {
  return (result?.checks ?? []).filter((c) => !(c.status === 'INFO' && TRACE_CHECKS.has(c.id)) && !except(c.id)).map((c) => `${c.id}: ${c.status}`);
}

/** A scenario's FAILURE and WARNING checks: what makes it fail. */
export function failingChecks(result: ScenarioResult | undefined): Check[] {
  return (result?.checks ?? []).filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
}

/** The whole failing checks (with their messages) for a diff, not just the ids. */
export function explainFailures(result: ScenarioResult | undefined): string {
  return JSON.stringify(failingChecks(result).map((c) => ({ id: c.id, status: c.status, errorMessage: c.errorMessage })), null, 2);
}

/** Check ids, sorted: what the baselines list. */
export const checkIds = (checks: readonly Check[]) => checks.map((c) => c.id).sort();

/** Whether a gateway process logged anything at error level or above. */
export function loggedErrors(gateway: ServiceProcess | undefined): Record<string, unknown>[] {
  return (gateway?.stdoutJson ?? []).filter((line) => typeof line['level'] === 'number' && line['level'] >= 50);
}

/** The runs of one suite, filled by the file's `beforeAll`. */
export interface ConformanceRuns {
  readonly direct: ReadonlyMap<string, ScenarioResult>;
  readonly viaGateway: ReadonlyMap<string, ScenarioResult>;
  readonly gateway: ServiceProcess | undefined;
  /** Runs through gateways started otherwise, by {@link OtherGateway.label}. */
  readonly viaOthers?: ReadonlyMap<string, { readonly results: ReadonlyMap<string, ScenarioResult>; readonly gateway: ServiceProcess | undefined }>;
}

/** A further gateway run held to the same rule as the main one, less the checks it may decide itself. */
export interface OtherGateway {
  /** Names the run in test titles and in {@link ConformanceRuns.viaOthers}, e.g. `--tasks on`. */
  readonly label: string;
  /** Checks left out of the comparison (say which and why where this is set). Default: none. */
  readonly ignore?: (checkId: string) => boolean;
}

export interface ConformanceTestsOptions {
  /** Prefixes every test title, e.g. `MCP conformance 2026-07-28`. */
  readonly title: string;
  /** `@modelcontextprotocol/conformance@<installed version>`. */
  readonly suite: string;
  readonly scenarios: readonly string[];
  readonly baseline: Baseline;
  readonly runs: () => ConformanceRuns;
  /** More gateway runs, each compared with the direct run as the main one is. Default: none. */
  readonly others?: readonly OtherGateway[];
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
      expect(checkIds(failingChecks(got)), explainFailures(got)).toEqual([...(entry?.checks ?? [])].sort());
    });

    const sameAsDirect = (got: ScenarioResult | undefined, ignore: (id: string) => boolean = () => false) => {
      const direct = opts.runs().direct.get(scenario);
      if (entry?.viaGateway === undefined) {
        expect(checkIds(failingChecks(got).filter((c) => !ignore(c.id))), explainFailures(got)).toEqual(checkIds(failingChecks(direct).filter((c) => !ignore(c.id))));
        expect(verdicts(got, ignore)).toEqual(verdicts(direct, ignore));
        return;
      }
      // The gateway decides these checks itself (the baseline says why); every other one is the upstream's.
      expect(checkIds(failingChecks(got)), explainFailures(got)).toEqual([...entry.viaGateway.checks].sort());
      const decided = new Set([...entry.checks, ...entry.viaGateway.checks]);
      const except = (id: string) => decided.has(id) || ignore(id);
      expect(verdicts(got, except)).toEqual(verdicts(direct, except));
    };

    it('through the gateway: the same result as directly', () => sameAsDirect(opts.runs().viaGateway.get(scenario)));

    for (const other of opts.others ?? []) {
      it(`through the gateway ${other.label}: the same result as directly`, () => sameAsDirect(opts.runs().viaOthers?.get(other.label)?.results.get(scenario), other.ignore));
    }
  });

  describe(`${title}: tether-gateway`, () => {
    it('logged no error', () => {
      expect(loggedErrors(opts.runs().gateway)).toEqual([]);
    });
    for (const other of opts.others ?? []) {
      it(`${other.label} logged no error`, () => {
        expect(loggedErrors(opts.runs().viaOthers?.get(other.label)?.gateway)).toEqual([]);
      });
    }
  });
}
