/**
 * `npm run chaos -- --duration 60s --clients 6 --seed 1 --json chaos.json`
 *
 * Runs the chaos harness (3-node NATS R3, three gateways behind a round-robin
 * balancer, two upstreams, raw SSE and SDK clients, a seeded fault schedule),
 * prints the summary, writes the report as JSON, and exits 1 if any silent
 * violation was found (2 on bad arguments or a harness failure).
 */
import { writeFile } from 'node:fs/promises';
import { runChaos } from './chaos.js';
import { formatSummary } from './summary.js';
import { parseDuration } from './util.js';

const USAGE = `Usage: npm run chaos -- [--duration 60s] [--clients 6] [--seed 1] [--json out.json] [--settle 20s] [--fault-gap 4s] [--gateway-logs dir]

  --duration     how long clients start new calls (then in-flight calls settle)
  --clients      clients in all; every third is an official SDK client behind the resume guard, the rest raw SSE clients
  --seed         seeds the fault schedule and every client's choices
  --json         where to write the full report
  --settle       how long in-flight calls may take after the duration (default 20s)
  --fault-gap    mean time between faults after every kind fired once (default 4s)
  --gateway-logs write each gateway's log to <dir>/<instance>.log (for investigations)
  --dump         write every recorded exchange and the checker's copy of the log to a JSON file
  --events       events per stream_progress call, MIN-MAX (default 10-80)
  --cut-chance   chance that a client cuts a response at a random point (default 0.7)
`;

function parseArgs(argv: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      process.stdout.write(USAGE);
      process.exit(0);
    }
    if (!arg.startsWith('--')) throw new Error(`unexpected argument ${JSON.stringify(arg)}`);
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg.slice(2) : arg.slice(2, eq);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined) throw new Error(`--${name} needs a value`);
    if (!['duration', 'clients', 'seed', 'json', 'settle', 'fault-gap', 'gateway-logs', 'dump', 'events', 'cut-chance'].includes(name)) throw new Error(`unknown flag --${name}`);
    out[name] = value;
  }
  return out;
}

async function main(): Promise<number> {
  let args: Record<string, string>;
  let durationMs: number;
  let clients: number;
  let seed: number;
  try {
    args = parseArgs(process.argv.slice(2));
    durationMs = parseDuration(args['duration'] ?? '60s');
    clients = Number(args['clients'] ?? '6');
    seed = Number(args['seed'] ?? '1');
    if (!Number.isInteger(clients) || clients < 1 || clients > 200) throw new Error(`--clients must be an integer from 1 to 200, got ${args['clients']}`);
    if (!Number.isInteger(seed) || seed < 0) throw new Error(`--seed must be a non-negative integer, got ${args['seed']}`);
    if (durationMs < 5_000) throw new Error('--duration must be at least 5s');
  } catch (err) {
    process.stderr.write(`chaos: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const load: { minEvents?: number; maxEvents?: number; cutChance?: number } = {};
  if (args['events'] !== undefined) {
    const m = /^(\d+)-(\d+)$/.exec(args['events']);
    if (m === null || Number(m[1]) < 1 || Number(m[2]) < Number(m[1])) {
      process.stderr.write(`chaos: --events must look like 10-80, got ${args['events']}\n`);
      return 2;
    }
    load.minEvents = Number(m[1]);
    load.maxEvents = Number(m[2]);
  }
  if (args['cut-chance'] !== undefined) {
    const p = Number(args['cut-chance']);
    if (!(p >= 0 && p <= 1)) {
      process.stderr.write(`chaos: --cut-chance must be from 0 to 1, got ${args['cut-chance']}\n`);
      return 2;
    }
    load.cutChance = p;
  }
  const command = `npm run chaos -- ${process.argv.slice(2).join(' ')}`.trim();
  const report = await runChaos({
    durationMs,
    clients,
    seed,
    ...(args['settle'] === undefined ? {} : { settleMs: parseDuration(args['settle']) }),
    ...(args['fault-gap'] === undefined ? {} : { meanFaultGapMs: parseDuration(args['fault-gap']) }),
    ...(args['gateway-logs'] === undefined ? {} : { gatewayLogDir: args['gateway-logs'] }),
    ...(args['dump'] === undefined ? {} : { dumpPath: args['dump'] }),
    load,
    say: (line) => process.stdout.write(`${line}\n`),
  });
  process.stdout.write(`\n${formatSummary(report, command)}\n`);
  if (args['json'] !== undefined) {
    await writeFile(args['json'], `${JSON.stringify({ command, ...report }, null, 2)}\n`);
    process.stdout.write(`report written to ${args['json']}\n`);
  }
  return report.silentViolations.total > 0 ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`chaos: the harness failed: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(2);
  },
);
