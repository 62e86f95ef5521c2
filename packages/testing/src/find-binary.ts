import { execFileSync } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { NatsServerNotFoundError, NatsServerTooOldError } from './errors.js';
import { MIN_NATS_SERVER_VERSION, natsServerVersion, natsVersionAtLeast } from './version.js';

/**
 * The repository's scripts/nats-server.sh. This file runs from
 * packages/testing/src (tests, through vitest's alias) or packages/testing/dist
 * (tsx scripts, built code): the repository root is three levels up from both.
 */
export const NATS_SERVER_SCRIPT: string = fileURLToPath(new URL('../../../scripts/nats-server.sh', import.meta.url));

/** The script may fetch a server first (apt-get against Debian's archive): seconds, rarely a minute. */
const SCRIPT_TIMEOUT_MS = 300_000;

/** Inputs of {@link resolveNatsServerBinary}; injectable so tests can point at their own script. */
export interface ResolveNatsServerBinaryInput {
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Run as `bash <script> current` when NATS_SERVER_BIN is unset; it prints a path or exits non-zero. */
  readonly script: string;
}

/**
 * Finds the nats-server binary to launch: `$NATS_SERVER_BIN` if set (it must
 * exist and be executable; it is never silently ignored), else what
 * `bash scripts/nats-server.sh current` prints (the newest server it can find
 * or fetch; cached per script for this process). Never PATH's nats-server:
 * Debian 12's is 2.9.10. Either way the binary must report 2.11 or later.
 *
 * @throws NatsServerNotFoundError (`code: 'nats_server_not_found'`) whose
 *   message says how to get one.
 * @throws NatsServerTooOldError (`code: 'nats_server_too_old'`) naming the
 *   binary and the version it reports.
 */
export function findNatsServerBinary(): string {
  return resolveNatsServerBinary({ env: process.env, script: NATS_SERVER_SCRIPT });
}

/** Core of {@link findNatsServerBinary}: reads only what it is pointed at. */
export function resolveNatsServerBinary(input: ResolveNatsServerBinaryInput): string {
  const explicit = input.env['NATS_SERVER_BIN'];
  let bin: string;
  let source: string;
  if (explicit !== undefined && explicit !== '') {
    bin = resolve(explicit);
    const problem = executableProblem(bin);
    if (problem !== undefined) throw new NatsServerNotFoundError(`NATS_SERVER_BIN=${explicit} ${problem}`, [bin]);
    source = `NATS_SERVER_BIN=${explicit}`;
  } else {
    bin = currentFromScript(input.script);
    source = `${input.script} current`;
  }
  const version = natsServerVersion(bin);
  const { major, minor } = MIN_NATS_SERVER_VERSION;
  if (!natsVersionAtLeast(version, major, minor)) throw new NatsServerTooOldError({ bin, version, minimum: `${major}.${minor}`, source });
  return bin;
}

const fromScript = new Map<string, string>();

/** `bash <script> current`, once per script and process; its stderr (why it found none) goes into the error. */
function currentFromScript(script: string): string {
  const known = fromScript.get(script);
  if (known !== undefined) return known;
  if (!existsSync(script)) throw new NatsServerNotFoundError(`NATS_SERVER_BIN is unset and ${script}, which finds a current nats-server, does not exist`, [script]);
  let out: string;
  try {
    out = execFileSync('bash', [script, 'current'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: SCRIPT_TIMEOUT_MS });
  } catch (err) {
    const said = String((err as { stderr?: unknown }).stderr ?? '').trim();
    throw new NatsServerNotFoundError(`NATS_SERVER_BIN is unset and \`bash ${script} current\` found no nats-server 2.11 or later${said === '' ? '' : `:\n${said}\n`}`, [script]);
  }
  const bin = out.trim().split('\n').pop() ?? '';
  const problem = bin === '' ? 'no path' : executableProblem(bin);
  if (problem !== undefined) throw new NatsServerNotFoundError(`\`bash ${script} current\` printed ${bin === '' ? 'no path' : `${bin}, which ${problem}`}`, [script]);
  fromScript.set(script, bin);
  return bin;
}

/** Why `path` cannot be run, or undefined if it can. */
function executableProblem(path: string): string | undefined {
  try {
    if (!statSync(path).isFile()) return 'is not a regular file';
  } catch {
    return 'does not exist';
  }
  try {
    accessSync(path, constants.X_OK);
  } catch {
    return 'is not executable';
  }
  return undefined;
}
