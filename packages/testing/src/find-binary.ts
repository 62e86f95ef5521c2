import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import { NatsServerNotFoundError } from './errors.js';

/** Directories searched after PATH: Debian puts nats-server in /usr/sbin, which a non-root PATH often lacks. */
export const DEFAULT_FALLBACK_DIRS: readonly string[] = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin'];

const BINARY_NAME = 'nats-server';

/** Inputs of {@link resolveNatsServerBinary}; injectable so tests never depend on the real machine. */
export interface ResolveNatsServerBinaryInput {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly fallbackDirs: readonly string[];
}

/**
 * Finds the nats-server binary to launch: `$NATS_SERVER_BIN` if set (it must
 * exist and be executable; it is never silently ignored), else the first
 * executable `nats-server` on `$PATH`, else in /usr/sbin, /usr/local/sbin,
 * /usr/local/bin.
 *
 * @throws NatsServerNotFoundError (`code: 'nats_server_not_found'`) whose
 *   message says how to install one.
 */
export function findNatsServerBinary(): string {
  return resolveNatsServerBinary({ env: process.env, fallbackDirs: DEFAULT_FALLBACK_DIRS });
}

/** Pure-ish core of {@link findNatsServerBinary}: reads only the files it is pointed at. */
export function resolveNatsServerBinary(input: ResolveNatsServerBinaryInput): string {
  const explicit = input.env['NATS_SERVER_BIN'];
  if (explicit !== undefined && explicit !== '') {
    const path = resolve(explicit);
    const problem = executableProblem(path);
    if (problem !== undefined) {
      throw new NatsServerNotFoundError(`NATS_SERVER_BIN=${explicit} ${problem}`, [path]);
    }
    return path;
  }

  const pathDirs = (input.env['PATH'] ?? '').split(delimiter).filter((dir) => dir !== '' && isAbsolute(dir));
  const dirs = [...new Set([...pathDirs, ...input.fallbackDirs])];
  const searched = dirs.map((dir) => join(dir, BINARY_NAME));
  for (const candidate of searched) {
    if (executableProblem(candidate) === undefined) return candidate;
  }
  throw new NatsServerNotFoundError(
    `nats-server not found on PATH or in ${input.fallbackDirs.join(', ') || '(no fallback dirs)'}`,
    searched,
  );
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
