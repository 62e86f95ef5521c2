import { afterAll, beforeAll } from 'vitest';
import { startNatsServer, type NatsServer, type ServiceProcess } from '@tether/testing';
import { describeConformance, readBaseline, startConformanceGateway } from './harness.js';
import { listServerScenarios, runSuite, suiteCli, SuitePackage, suiteId, suiteNode, type ScenarioResult } from './suite.js';
import { startConformanceUpstream, type ConformanceUpstream } from './upstream.js';

// The official MCP conformance suite 0.1.16 (server scenarios of the 2025
// revisions, active and pending), run once directly against an SDK server and
// once through a tether-gateway in front of it. Directly, a scenario passes or
// fails exactly as expected-failures.json says; through the gateway its result
// is the same. Not a `*.test.ts` file: the suite needs Node >= 22, so `npm
// test` runs the conformance files on their own
// (test/conformance/vitest.config.ts), once, with Node 24.

const node = suiteNode();
const cli = suiteCli(SuitePackage.stable);
const scenarios = listServerScenarios(node, cli);

let upstream: ConformanceUpstream | undefined;
let nats: NatsServer | undefined;
let gateway: ServiceProcess | undefined;
let direct = new Map<string, ScenarioResult>();
let viaGateway = new Map<string, ScenarioResult>();

beforeAll(async () => {
  upstream = await startConformanceUpstream();
  nats = await startNatsServer();
  gateway = await startConformanceGateway(nats.url, upstream.url, 'conformance');
  direct = await runSuite({ node, cli, url: upstream.url, scenarios });
  viaGateway = await runSuite({ node, cli, url: `http://127.0.0.1:${gateway.port}/mcp`, scenarios });
}, 420_000);

afterAll(async () => {
  await gateway?.stop('SIGTERM', 5_000);
  await upstream?.close();
  await nats?.cleanup();
});

describeConformance({
  title: 'MCP conformance',
  suite: suiteId(SuitePackage.stable),
  scenarios,
  baseline: readBaseline(new URL('./expected-failures.json', import.meta.url)),
  runs: () => ({ direct, viaGateway, gateway }),
});
