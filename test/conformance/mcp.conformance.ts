import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, startServiceProcess, type NatsServer, type ServiceProcess } from '@tether/testing';
import { listServerScenarios, runSuite, suiteNode, suiteVersion, type Check, type ScenarioResult } from './suite.js';
import { startConformanceUpstream, type ConformanceUpstream } from './upstream.js';

// The official MCP conformance suite (server scenarios, active and pending),
// run once directly against an SDK server and once through a tether-gateway in
// front of it. Directly, a scenario passes or fails exactly as
// expected-failures.json says; through the gateway its result is the same.
// Not a `*.test.ts` file: the suite needs Node >= 22, so `npm test` runs this
// file on its own (test/conformance/vitest.config.ts), once, with Node 24.

const GATEWAY_MAIN = fileURLToPath(new URL('../../services/gateway/dist/main.js', import.meta.url));
const BASELINE_PATH = fileURLToPath(new URL('./expected-failures.json', import.meta.url));
/** The suite's request/response trace: differs run to run (ids, counts), says nothing about conformance. */
const TRACE_CHECKS = new Set(['outgoing-request', 'incoming-response', 'incoming-sse-event', 'stream-closed']);

interface Baseline {
  readonly suite: string;
  readonly server: Readonly<Record<string, { readonly checks: readonly string[]; readonly reason: string }>>;
}

const node = suiteNode();
const scenarios = listServerScenarios(node);
const baseline = JSON.parse(readFileSync(BASELINE_PATH, 'utf8')) as Baseline;

let upstream: ConformanceUpstream | undefined;
let nats: NatsServer | undefined;
let gateway: ServiceProcess | undefined;
let direct = new Map<string, ScenarioResult>();
let viaGateway = new Map<string, ScenarioResult>();

beforeAll(async () => {
  upstream = await startConformanceUpstream();
  nats = await startNatsServer();
  gateway = await startServiceProcess({
    name: 'conformance-gateway',
    command: process.execPath,
    args: [GATEWAY_MAIN, '--port', '0', '--nats', nats.url, '--upstream', upstream.url, '--instance-id', 'conformance', '--drain-timeout', '2s'],
    readyLine: (json) => json.msg === 'listening',
  });
  direct = await runSuite({ node, url: upstream.url, scenarios });
  viaGateway = await runSuite({ node, url: `http://127.0.0.1:${gateway.port}/mcp`, scenarios });
}, 420_000);

afterAll(async () => {
  await gateway?.stop('SIGTERM', 5_000);
  await upstream?.close();
  await nats?.cleanup();
});

/** What must match between two runs: every check but the trace, by id and status. */
function verdicts(result: ScenarioResult | undefined): string[] {
  return (result?.checks ?? []).filter((c) => !(c.status === 'INFO' && TRACE_CHECKS.has(c.id))).map((c) => `${c.id}: ${c.status}`);
}

function failing(result: ScenarioResult | undefined): Check[] {
  return (result?.checks ?? []).filter((c) => c.status === 'FAILURE' || c.status === 'WARNING');
}

describe('MCP conformance baseline', () => {
  it(`is for the installed suite, and names only its scenarios, each with a reason`, () => {
    expect(baseline.suite).toBe(`@modelcontextprotocol/conformance@${suiteVersion()}`);
    for (const [scenario, entry] of Object.entries(baseline.server)) {
      expect(scenarios, `baseline entry ${scenario}`).toContain(scenario);
      expect(entry.reason.length, `reason of ${scenario}`).toBeGreaterThan(20);
      expect(entry.checks.length, `checks of ${scenario}`).toBeGreaterThan(0);
    }
  });
});

describe.each(scenarios)('MCP conformance %s', (scenario) => {
  it('directly: passes, or fails with exactly the checks the baseline names', () => {
    const expected = baseline.server[scenario];
    const got = failing(direct.get(scenario));
    // The whole check (with its errorMessage) in the diff, not just the id.
    const explained = got.map((c) => ({ id: c.id, status: c.status, errorMessage: c.errorMessage }));
    expect(got.map((c) => c.id).sort(), JSON.stringify(explained, null, 2)).toEqual([...(expected?.checks ?? [])].sort());
  });

  it('through the gateway: the same result as directly', () => {
    const explained = failing(viaGateway.get(scenario)).map((c) => ({ id: c.id, status: c.status, errorMessage: c.errorMessage }));
    expect(viaGateway.get(scenario)?.outcome, JSON.stringify(explained, null, 2)).toBe(direct.get(scenario)?.outcome);
    expect(verdicts(viaGateway.get(scenario))).toEqual(verdicts(direct.get(scenario)));
  });
});

describe('tether-gateway under the conformance suite', () => {
  it('logged no error', () => {
    const errors = (gateway?.stdoutJson ?? []).filter((line) => typeof line['level'] === 'number' && line['level'] >= 50);
    expect(errors).toEqual([]);
  });
});
