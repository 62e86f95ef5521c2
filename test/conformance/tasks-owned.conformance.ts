import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, startOwnedTasksUpstream, startRoundRobinProxy } from '@tether/testing';
import type { NatsServer, OwnedTasksUpstream, RoundRobinProxy, ServiceProcess } from '@tether/testing';
import { checkIds, explainFailures, failingChecks, startConformanceGateway } from './harness.js';
import { listServerScenarios, runSuite, suiteCli, SuitePackage, suiteNode } from './suite.js';
import type { Check, ScenarioResult } from './suite.js';

// The Tasks extension's tasks-* server scenarios (suite 0.2.0-alpha.12) in
// front of an upstream that runs the extension itself (issue 33): the test
// kit's startOwnedTasksUpstream, which keeps its tasks in its own memory,
// per process, as rmcp and FastMCP do. Run once directly against one
// replica, and once through two tether-gateway processes whose route has
// two such replicas, behind a round-robin balancer, so consecutive
// requests of a scenario land on different gateways (and, but for Tether's
// routing, on different replicas). Through the gateways each scenario must
// end exactly as it does directly: the same checks fail (or none), the
// same are skipped. The gateways only route: the upstream owns every task.
// The same two replicas behind a plain round-robin balancer fail them.

const node = suiteNode();
const cli = suiteCli(SuitePackage.alpha);
const scenarios = listServerScenarios(node, cli).filter((s) => s.startsWith('tasks-'));

let direct: OwnedTasksUpstream | undefined;
let replicas: OwnedTasksUpstream[] = [];
let nats: NatsServer | undefined;
let gateways: ServiceProcess[] = [];
let proxy: RoundRobinProxy | undefined;
let directResults = new Map<string, ScenarioResult>();
let viaGateways = new Map<string, ScenarioResult>();
let gatewayFailure: unknown;
/** The same replicas behind a plain round-robin balancer, no Tether: what SEP-2663's "route to the instance holding its state" is about. */
let plainBalancer: RoundRobinProxy | undefined;
let viaPlainBalancer = new Map<string, ScenarioResult>();

/** Each scenario alone (`--scenario`), one after the other. */
async function runEach(url: string): Promise<Map<string, ScenarioResult>> {
  const results = new Map<string, ScenarioResult>();
  for (const scenario of scenarios) {
    const run = await runSuite({ node, cli, url, scenarios: [scenario], select: ['--scenario', scenario, '--timeout', '60000'], timeoutMs: 90_000 });
    for (const [name, result] of run) results.set(name, result);
  }
  return results;
}

async function runThroughGateways(): Promise<void> {
  try {
    replicas = [await startOwnedTasksUpstream({ name: 'r1' }), await startOwnedTasksUpstream({ name: 'r2' })];
    nats = await startNatsServer();
    const upstreams = replicas.map((r) => r.url).join(',');
    const started = await Promise.allSettled(['owned-a', 'owned-b'].map((id) => startConformanceGateway(nats!.url, upstreams, id, ['--tasks', 'on'])));
    gateways = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    proxy = await startRoundRobinProxy(gateways.map((g) => `http://127.0.0.1:${g.port}`));
    viaGateways = await runEach(`${proxy.url}/mcp`);
    plainBalancer = await startRoundRobinProxy(replicas.map((r) => r.origin));
    viaPlainBalancer = await runEach(`${plainBalancer.url}/mcp`);
  } catch (err) {
    gatewayFailure = err;
  }
}

beforeAll(async () => {
  direct = await startOwnedTasksUpstream({ name: 'direct' });
  // One after the other: two suite CLIs at once on 2 cores only queue, and the gateways' run is the one with timing in it.
  directResults = await runEach(direct.url);
  await runThroughGateways();
}, 400_000);

afterAll(async () => {
  await proxy?.close();
  await plainBalancer?.close();
  await Promise.all(gateways.map((g) => g.stop('SIGTERM', 5_000)));
  for (const r of [direct, ...replicas]) await r?.close();
  await nats?.cleanup();
});

const skippedIds = (result: ScenarioResult | undefined): string[] => checkIds((result?.checks ?? []).filter((c: Check) => c.status === 'SKIPPED'));

function throughGateways(): Map<string, ScenarioResult> {
  if (gatewayFailure !== undefined) throw new Error(`the gateways did not run the suite: ${String(gatewayFailure instanceof Error ? gatewayFailure.stack : gatewayFailure)}`);
  return viaGateways;
}

describe('MCP conformance tasks, upstream-owned', () => {
  it('runs the ten tasks-* scenarios', () => {
    expect(scenarios).toHaveLength(10);
  });

  it('directly, the fixture passes every scenario (the suite itself skips the optional status notifications)', () => {
    for (const scenario of scenarios) expect(checkIds(failingChecks(directResults.get(scenario))), `${scenario}: ${explainFailures(directResults.get(scenario))}`).toEqual([]);
  });

  it.each(scenarios)('%s ends through two gateways (two replicas, round robin) as it does directly against one replica', (scenario) => {
    const want = directResults.get(scenario);
    const got = throughGateways().get(scenario);
    expect(got, `no result through the gateways for ${scenario}`).toBeDefined();
    expect(checkIds(failingChecks(got)), `through the gateways: ${explainFailures(got)}\ndirectly: ${explainFailures(want)}`).toEqual(checkIds(failingChecks(want)));
    expect(skippedIds(got)).toEqual(skippedIds(want));
  });

  it('a plain round-robin balancer in front of the same two replicas fails the task scenarios (a poll lands on the replica without the task)', () => {
    throughGateways();
    const broken = scenarios.filter((scenario) => failingChecks(viaPlainBalancer.get(scenario)).length > 0);
    for (const scenario of ['tasks-lifecycle', 'tasks-mrtr-input', 'tasks-dispatch-and-envelope']) expect(broken, `${scenario} through the plain balancer`).toContain(scenario);
  });

  it('prints each scenario check by check, three ways (the table in docs/conformance.md)', () => {
    const way = (result: ScenarioResult | undefined): string => {
      if (result === undefined) return 'no result';
      const count = (status: Check['status']): number => result.checks.filter((c) => c.status === status).length;
      const failing = checkIds(failingChecks(result));
      return `${count('SUCCESS')} passed${failing.length > 0 ? `, failing ${failing.join(' ')}` : ''}${count('SKIPPED') > 0 ? `, ${count('SKIPPED')} skipped` : ''}`;
    };
    const lines = scenarios.map((scenario) => `  ${scenario}: directly ${way(directResults.get(scenario))} | through the gateways ${way(throughGateways().get(scenario))} | plain balancer ${way(viaPlainBalancer.get(scenario))}`);
    process.stdout.write(`tasks-owned conformance, check by check:\n${lines.join('\n')}\n`);
    expect(lines).toHaveLength(scenarios.length);
  });

  it('the balancer sent the run\'s requests to both gateways in turn, and both replicas held tasks', () => {
    throughGateways();
    const history = proxy?.history() ?? [];
    expect(new Set(history.map((r) => r.target)).size).toBe(2);
    for (let i = 1; i < history.length; i += 1) expect(history[i]!.target).not.toBe(history[i - 1]!.target);
    for (const r of replicas) expect(r.taskIds().length, `tasks held by ${r.name}`).toBeGreaterThan(0);
  });
});
