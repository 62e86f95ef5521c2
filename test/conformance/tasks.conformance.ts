import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, startRoundRobinProxy, startTaskUpstream, TaskTools } from '@tether/testing';
import type { NatsServer, RoundRobinProxy, ServiceProcess, TaskUpstream } from '@tether/testing';
import { checkIds, explainFailures, failingChecks, loggedErrors, startConformanceGateway } from './harness.js';
import { listServerScenarios, runSuite, suiteCli, SuitePackage, suiteId, suiteNode } from './suite.js';
import type { Check, ScenarioResult } from './suite.js';

// The Tasks extension (SEP-2663, io.modelcontextprotocol/tasks) of suite
// 0.2.0-alpha.12: its ten server scenarios, run once directly against a
// plain SDK v2 server whose tools only declare execution.taskSupport (the
// test kit's startTaskUpstream), and once through two tether-gateway
// processes (`--tasks on`, one nats-server) behind a round-robin balancer,
// so consecutive requests of one scenario land on different instances. The
// gateways run slow task-supporting calls as durable tasks themselves.
//
// Directly, each scenario fails with exactly the checks
// expected-failures-tasks.json names (the server knows nothing of tasks).
// Through the gateways, each passes, unless its entry's `viaGateways` names
// the checks that fail there and why. A check the suite SKIPs (its own
// pending parts) is listed under `skipped`, both ways.
//
// The suite has no selector for extension scenarios (`--spec-version`
// leaves them out, `--suite all` runs every revision's), so each runs alone
// with `--scenario`.

/** One scenario's entry in expected-failures-tasks.json. */
interface TasksBaselineEntry {
  /** Directly against the upstream: its FAILURE and WARNING check ids (none: it passes). */
  readonly checks: readonly string[];
  /** Check ids the suite itself SKIPs, both ways. */
  readonly skipped?: readonly string[];
  readonly reason: string;
  /** Through the two gateways: the checks that still fail (absent: it passes), and why. */
  readonly viaGateways?: { readonly checks: readonly string[]; readonly reason: string };
}

interface TasksBaseline {
  readonly suite: string;
  readonly server: Readonly<Record<string, TasksBaselineEntry>>;
}

const TASKS_SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-mrtr-input',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-status-notifications',
  'tasks-required-task-error',
  'tasks-mrtr-composition',
];

const node = suiteNode();
const cli = suiteCli(SuitePackage.alpha);
const scenarios = listServerScenarios(node, cli).filter((s) => s.startsWith('tasks-'));
const baseline = JSON.parse(readFileSync(new URL('./expected-failures-tasks.json', import.meta.url), 'utf8')) as TasksBaseline;

/** The upstream the suite runs against directly, and the one behind the gateways: each run's calls are counted apart. */
let directUpstream: TaskUpstream | undefined;
let gatewayUpstream: TaskUpstream | undefined;
let nats: NatsServer | undefined;
let gateways: ServiceProcess[] = [];
let proxy: RoundRobinProxy | undefined;
let direct = new Map<string, ScenarioResult>();
let viaGateways = new Map<string, ScenarioResult>();
/** Why the gateways could not be started or run, if they could not: the direct run stands on its own. */
let gatewayFailure: unknown;
/** Calls still running upstream a moment after each run (tool: count), none expected. */
const leftRunning: { direct: Record<string, number>; viaGateways: Record<string, number> } = { direct: {}, viaGateways: {} };

/**
 * Each scenario alone (`--scenario`), `width` at a time. Directly 2: the
 * plain server makes no task, so nothing there depends on timing, and the
 * suite's 10 s request timeouts overlap (each CLI start costs ~2 s of CPU,
 * so more at once only queue on 2 cores). Through the gateways 1, so a
 * scenario's consecutive requests alternate between the two.
 */
async function runEach(url: string, width: number): Promise<Map<string, ScenarioResult>> {
  const queue = [...scenarios];
  const results = new Map<string, ScenarioResult>();
  const worker = async () => {
    for (let scenario = queue.shift(); scenario !== undefined; scenario = queue.shift()) {
      // Per-scenario timeout 60 s: directly, some wait out the suite's 10 s request timeout two or three times.
      const run = await runSuite({ node, cli, url, scenarios: [scenario], select: ['--scenario', scenario, '--timeout', '60000'], timeoutMs: 90_000 });
      for (const [name, result] of run) results.set(name, result);
    }
  };
  await Promise.all(Array.from({ length: width }, worker));
  return results;
}

/** What is still running on `upstream` once running calls have had `graceMs` to end. */
async function stillRunning(upstream: TaskUpstream, graceMs = 3_000): Promise<Record<string, number>> {
  const running = () => Object.fromEntries(Object.values(TaskTools).map((tool) => [tool, upstream.inFlight(tool)]).filter(([, n]) => n !== 0));
  const deadline = Date.now() + graceMs;
  while (Object.keys(running()).length > 0 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 100));
  return running();
}

/**
 * The gateways' --task-after: the fixture's first rounds answer at once and
 * must stay synchronous (tasks-mrtr-composition), its jobs and questions come
 * after 1.2 s or more and must become tasks. 600 ms leaves each side 600 ms
 * of a loaded machine's delays; the default 250 ms did not (a clean-clone run
 * at load 9 made a first round a task).
 */
const CONFORMANCE_TASK_AFTER_MS = 600;

/** The suite through two gateways behind a round-robin balancer; a failure is kept, so the direct run stands on its own. */
async function runThroughGateways(): Promise<void> {
  try {
    gatewayUpstream = await startTaskUpstream();
    nats = await startNatsServer();
    // allSettled: when one fails to start, the other still gets stopped in afterAll.
    const started = await Promise.allSettled(['tasks-a', 'tasks-b'].map((id) => startConformanceGateway(nats!.url, gatewayUpstream!.url, id, ['--tasks', 'on', '--task-after', String(CONFORMANCE_TASK_AFTER_MS)])));
    gateways = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
    for (const s of started) if (s.status === 'rejected') throw s.reason;
    proxy = await startRoundRobinProxy(gateways.map((g) => `http://127.0.0.1:${g.port}`));
    viaGateways = await runEach(`${proxy.url}/mcp`, 1);
    leftRunning.viaGateways = await stillRunning(gatewayUpstream);
  } catch (err) {
    gatewayFailure = err;
  }
}

beforeAll(async () => {
  // Both runs at once, each on its own upstream: the direct one mostly waits
  // out the suite's request timeouts (the plain server makes no task), which
  // one after the other cost ~20 s of a ~55 s file.
  directUpstream = await startTaskUpstream();
  const runDirect = async () => {
    direct = await runEach(directUpstream!.url, 2);
    leftRunning.direct = await stillRunning(directUpstream!);
  };
  await Promise.all([runDirect(), runThroughGateways()]);
}, 400_000);

afterAll(async () => {
  await proxy?.close();
  await Promise.all(gateways.map((g) => g.stop('SIGTERM', 5_000)));
  await directUpstream?.close();
  await gatewayUpstream?.close();
  await nats?.cleanup();
});

const skippedIds = (result: ScenarioResult | undefined): string[] => checkIds((result?.checks ?? []).filter((c: Check) => c.status === 'SKIPPED'));

/** The through-gateway results, or the reason there are none. */
function throughGateways(): Map<string, ScenarioResult> {
  if (gatewayFailure !== undefined) throw new Error(`the gateways did not run the suite: ${String(gatewayFailure instanceof Error ? gatewayFailure.stack : gatewayFailure)}`);
  return viaGateways;
}

describe('MCP conformance tasks selection', () => {
  it('runs the ten tasks-* server scenarios of the suite', () => {
    expect([...scenarios].sort()).toEqual([...TASKS_SCENARIOS].sort());
  });
});

describe('MCP conformance tasks baseline', () => {
  it('is for the installed suite, and names only its scenarios, each with a reason', () => {
    expect(baseline.suite).toBe(suiteId(SuitePackage.alpha));
    for (const [scenario, entry] of Object.entries(baseline.server)) {
      expect(scenarios, `baseline entry ${scenario}`).toContain(scenario);
      expect(entry.reason.length, `reason of ${scenario}`).toBeGreaterThan(20);
      if (entry.viaGateways !== undefined) expect(entry.viaGateways.reason.length, `viaGateways reason of ${scenario}`).toBeGreaterThan(20);
    }
  });
});

describe.each(TASKS_SCENARIOS)('MCP conformance tasks %s', (scenario) => {
  const entry = baseline.server[scenario];

  it('directly: fails with exactly the checks the baseline names', () => {
    const got = direct.get(scenario);
    expect(checkIds(failingChecks(got)), explainFailures(got)).toEqual([...(entry?.checks ?? [])].sort());
    expect(skippedIds(got)).toEqual([...(entry?.skipped ?? [])].sort());
  });

  it('through two gateways (--tasks on): passes, or fails with exactly the checks viaGateways names', () => {
    const got = throughGateways().get(scenario);
    expect(checkIds(failingChecks(got)), explainFailures(got)).toEqual([...(entry?.viaGateways?.checks ?? [])].sort());
    expect(skippedIds(got)).toEqual([...(entry?.skipped ?? [])].sort());
  });
});

describe('MCP conformance tasks: the deployment', () => {
  it('the balancer sent the run\'s requests to both gateways in turn', () => {
    throughGateways();
    const history = proxy?.history() ?? [];
    const targets = new Set(history.map((r) => r.target));
    expect(targets.size).toBe(2);
    for (let i = 1; i < history.length; i += 1) expect(history[i]!.target).not.toBe(history[i - 1]!.target);
  });

  it('a task cancelled while its call runs reads cancelled afterwards (the suite records this, but does not score it)', () => {
    const cancel = throughGateways()
      .get('tasks-lifecycle')
      ?.checks.find((c) => c.id === 'sep-2663-cancel-ack-empty-result') as (Check & { details?: { statusAfterCancel?: string } }) | undefined;
    expect(cancel?.details?.statusAfterCancel).toBe('cancelled');
  });

  it('no upstream call is left running after either run (a cancelled task stops its call)', () => {
    expect(leftRunning.direct).toEqual({});
    throughGateways();
    expect(leftRunning.viaGateways).toEqual({});
  });

  it('neither gateway logged an error', () => {
    throughGateways();
    for (const gateway of gateways) expect(loggedErrors(gateway), gateway.name).toEqual([]);
  });
});
