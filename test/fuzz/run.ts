/**
 * `npm run fuzz -- --cases N --seed S [--suite NAME]`: the fuzz suites of
 * `npm test` (test/fuzz: the gateway's HTTP surface and the session-log
 * service's gRPC surface, each against real processes, the gateway's token
 * validation on two routes (`--auth jwt`, against a real issuer), two
 * gateways serving tasks, and the SDK's stores in process: the EventStore,
 * the durable task store, writer presence and the session router, each on a
 * real nats-server) with many more cases and another seed. It scales every
 * property's run count by the same factor (`TETHER_FUZZ_RUNS`) so that the
 * suites run at least N cases in all, runs them with vitest, and prints what
 * ran: each suite's summary, then one line `fuzz: N cases, seed S, F failed
 * properties`. `--suite` runs only the suites named (the factor then counts
 * theirs alone). Exits 1 when a property failed (the failure names its seed
 * and shrunk case), 2 on bad arguments.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Cases each suite's properties run at factor 1 (their `RUNS`, what `npm
 * test` runs), by the suite's name, which is also its file's
 * (`test/fuzz/<suite>.fuzz.test.ts`). Checks that do not scale come on top
 * (gateway-auth's 6 final real tokens, gateway-tasks' 5 requests with the
 * store down): each suite prints what it ran as `fuzz <suite>: seed S, N
 * cases`, and the total printed at the end is what actually ran.
 */
const CASES_AT_FACTOR_1 = { gateway: 562, 'gateway-auth': 340, 'gateway-tasks': 630, grpc: 1_200, sdk: 590 } as const;
type Suite = keyof typeof CASES_AT_FACTOR_1;
const SUITES = Object.keys(CASES_AT_FACTOR_1) as Suite[];
const casesOf = (suites: readonly Suite[]): number => suites.reduce((sum, suite) => sum + CASES_AT_FACTOR_1[suite], 0);
const DEFAULT_SEED = 0x7e7e4;

const USAGE = `Usage: npm run fuzz -- [--cases N] [--seed S] [--suite NAME]...

  --cases N     how many cases to run in all, at least (default: what npm test
                runs of the suites chosen, ${casesOf(SUITES)} for all)
  --seed S      the fast-check seed (an integer; default ${DEFAULT_SEED}, npm test's)
  --suite NAME  run only this suite (repeat for more; default all):
                ${SUITES.join(', ')}

Runs test/fuzz (the gateway's HTTP surface and the session-log service's gRPC
surface, against real nats-server and service processes, the gateway's token
validation on two routes against a real issuer, two gateways serving tasks,
and the SDK's stores and session router on a real nats-server) with every
property's run count scaled to reach N; NATS_SERVER_BIN picks the server.`;

interface Args {
  readonly cases: number;
  readonly seed: number;
  readonly suites: readonly Suite[];
}

function parse(argv: readonly string[]): Args {
  let cases: number | undefined;
  let seed = DEFAULT_SEED;
  const suites: Suite[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i]!;
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE);
      process.exit(0);
    }
    const eq = arg.indexOf('=');
    const name = eq === -1 ? arg : arg.slice(0, eq);
    const value = eq === -1 ? argv[++i] : arg.slice(eq + 1);
    if (name !== '--cases' && name !== '--seed' && name !== '--suite') throw new Error(`unknown argument ${JSON.stringify(arg)}`);
    if (value === undefined) throw new Error(`${name} needs a value`);
    if (name === '--suite') {
      if (!(SUITES as string[]).includes(value)) throw new Error(`--suite must be one of ${SUITES.join(', ')}, got ${JSON.stringify(value)}`);
      if (!suites.includes(value as Suite)) suites.push(value as Suite);
      continue;
    }
    const n = Number(value);
    if (name === '--cases') {
      if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--cases must be a positive integer, got ${JSON.stringify(value)}`);
      cases = n;
    } else {
      if (!Number.isSafeInteger(n)) throw new Error(`--seed must be an integer, got ${JSON.stringify(value)}`);
      seed = n;
    }
  }
  const chosen = suites.length === 0 ? SUITES : suites;
  return { cases: cases ?? casesOf(chosen), seed, suites: chosen };
}

let args: Args;
try {
  args = parse(process.argv.slice(2));
} catch (err) {
  console.error(`fuzz: ${(err as Error).message}\n\n${USAGE}`);
  process.exit(2);
}

const factor = Math.max(1, args.cases / casesOf(args.suites));
// vitest filters by path: each suite's own file, or the whole folder.
const files = args.suites.length === SUITES.length ? ['test/fuzz'] : args.suites.map((suite) => `test/fuzz/${suite}.fuzz.test.ts`);
const root = fileURLToPath(new URL('../..', import.meta.url));
const startedAt = Date.now();
// Each property runs `factor` times its cases: so may its test (vitest's 60 s default per test).
const timeoutMs = String(Math.round(60_000 * factor + 60_000));
const run = spawnSync(process.execPath, ['node_modules/vitest/vitest.mjs', 'run', ...files, '--project', 'io', '--testTimeout', timeoutMs, '--hookTimeout', timeoutMs], {
  cwd: root,
  env: { ...process.env, TETHER_FUZZ_RUNS: String(factor), TETHER_FUZZ_SEED: String(args.seed), NO_COLOR: '1' },
  encoding: 'utf8',
  maxBuffer: 256 * 1024 * 1024,
  stdio: ['ignore', 'pipe', 'inherit'],
});
const out = run.stdout ?? '';
process.stdout.write(out);
const totals = [...out.matchAll(/^fuzz (\S+): seed (-?\d+), (\d+) cases in/gm)].map((m) => ({ suite: m[1]!, cases: Number(m[3]) }));
const cases = totals.reduce((sum, t) => sum + t.cases, 0);
const failed = Number(/Tests\s+(\d+) failed/.exec(out)?.[1] ?? (run.status === 0 ? '0' : '1'));
console.log(
  `fuzz: ${cases} cases (${totals.map((t) => `${t.suite} ${t.cases}`).join(', ') || 'no suite summary printed'}), seed ${args.seed}, factor ${factor.toFixed(2)}, ${failed} failed properties, ${((Date.now() - startedAt) / 1000).toFixed(0)} s`,
);
process.exit(run.status === 0 && totals.length > 0 ? 0 : 1);
