import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type ModernUpstream, type NatsServer, type ServiceProcess } from '@tether/testing';
import { describeConformance, readBaseline, startConformanceGateway, type OtherGateway } from './harness.js';
import { listServerScenarios, requiredServerScenarios, runSuite, suiteCli, SuitePackage, suiteId, suiteNode, type ScenarioResult } from './suite.js';
import { startModernConformanceUpstream } from './upstream.js';

// The official MCP conformance suite 0.2.0-alpha.12 at the 2026-07-28 wire
// (stateless, per-request _meta, SEP-2243 headers, multi-round-trip input),
// run once directly against an SDK v2 server (createMcpHandler) and once
// through a tether-gateway in front of it, which passes these requests
// through (they name no session). Directly, a scenario passes or fails
// exactly as expected-failures-2026-07-28.json says; through the gateway its
// result is the same, check by check. Twice: once with `--tasks off` (every
// request passes through untouched) and once with `--tasks on` (the default:
// the gateway runs slow task-supporting calls as durable tasks; none of these
// scenarios' tools declares task support, so nothing may change but checks of
// the Tasks extension itself, should a scenario have any).
//
// The scenarios: every server scenario of the suite that applies at
// 2026-07-28 (`--spec-version 2026-07-28`): the 37 the revision requires and
// the 3 pending ones it runs unscored. Not the Tasks extension (`tasks-*`,
// unscored too): tasks.conformance.ts runs those.

const REVISION = '2026-07-28';
const node = suiteNode();
const cli = suiteCli(SuitePackage.alpha);
const select = ['--suite', 'all', '--spec-version', REVISION];
const scenarios = listServerScenarios(node, cli, ['--spec-version', REVISION]);
const required = requiredServerScenarios(node, cli, REVISION);

let upstream: ModernUpstream | undefined;
let nats: NatsServer | undefined;
/** The Tasks extension's own checks (SEP-2663): the only ones a `--tasks on` gateway may decide differently. */
const TASKS_ON: OtherGateway = { label: '--tasks on', ignore: (id) => id.startsWith('tasks-') || id.startsWith('sep-2663-') };

let gateway: ServiceProcess | undefined;
let tasksGateway: ServiceProcess | undefined;
let direct = new Map<string, ScenarioResult>();
let viaGateway = new Map<string, ScenarioResult>();
let viaTasksGateway = new Map<string, ScenarioResult>();

beforeAll(async () => {
  upstream = await startModernConformanceUpstream();
  nats = await startNatsServer();
  gateway = await startConformanceGateway(nats.url, upstream.url, 'conformance-2026', ['--tasks', 'off']);
  tasksGateway = await startConformanceGateway(nats.url, upstream.url, 'conformance-2026-tasks', ['--tasks', 'on']);
  // ~5 s each; the suite's own per-scenario timeout is 30 s.
  direct = await runSuite({ node, cli, url: upstream.url, scenarios, select, timeoutMs: 120_000 });
  viaGateway = await runSuite({ node, cli, url: `http://127.0.0.1:${gateway.port}/mcp`, scenarios, select, timeoutMs: 120_000 });
  viaTasksGateway = await runSuite({ node, cli, url: `http://127.0.0.1:${tasksGateway.port}/mcp`, scenarios, select, timeoutMs: 120_000 });
}, 300_000);

afterAll(async () => {
  await gateway?.stop('SIGTERM', 5_000);
  await tasksGateway?.stop('SIGTERM', 5_000);
  await upstream?.close();
  await nats?.cleanup();
});

describe(`MCP conformance ${REVISION} selection`, () => {
  it(`runs every server scenario ${REVISION} requires, and no tasks-* one`, () => {
    expect(required.length).toBeGreaterThan(30);
    expect(required.filter((s) => !scenarios.includes(s))).toEqual([]);
    expect(scenarios.filter((s) => s.startsWith('tasks-'))).toEqual([]);
  });
});

describeConformance({
  title: `MCP conformance ${REVISION}`,
  suite: suiteId(SuitePackage.alpha),
  scenarios,
  baseline: readBaseline(new URL('./expected-failures-2026-07-28.json', import.meta.url)),
  runs: () => ({ direct, viaGateway, gateway, viaOthers: new Map([[TASKS_ON.label, { results: viaTasksGateway, gateway: tasksGateway }]]) }),
  others: [TASKS_ON],
});
