/**
 * The contract checks on proto/ (buf.yaml), for contract.test.ts, and
 * `npm run proto:image`, which refreshes the committed baseline.
 *
 * `buf lint` and `buf breaking --against proto/cursor-v1.binpb` run with
 * `--error-format json`: one JSON object per finding on stdout, exit status
 * 100. Each finding comes back as one line, `path:line:col: message (RULE)`,
 * so a failing test names every one and the rule to look up.
 *
 * proto/cursor-v1.binpb is a buf image (imports included, no source info) of
 * the contract as released. Refreshing it declares the current proto the new
 * baseline, which hides every breaking change made since: do it on purpose,
 * only in a change that means to change the API (a new major version is a
 * new package, `tether.cursor.v2`), never to make the test pass.
 */
import { spawnSync } from 'node:child_process';
import { relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { BUF, ROOT } from './generate.js';

/** The committed image of the released contract, relative to the repository root. */
export const CONTRACT_IMAGE = 'proto/cursor-v1.binpb';

interface BufFinding {
  path?: string;
  start_line?: number;
  start_column?: number;
  type?: string;
  message?: string;
}

/** Runs buf in `cwd` (a directory with buf.yaml); returns its findings, `[]` when clean. Throws when buf itself fails. */
function findings(args: string[], cwd: string): string[] {
  const run = spawnSync(BUF, [...args, '--error-format', 'json'], { cwd, encoding: 'utf8' });
  if (run.error) throw new Error(`buf ${args[0]} did not start (${BUF}; run npm ci): ${run.error.message}`);
  const lines = run.stdout.split('\n').filter((l) => l.trim() !== '');
  const out = lines.map((line) => {
    let f: BufFinding;
    try {
      f = JSON.parse(line) as BufFinding;
    } catch {
      return line;
    }
    return `${f.path ?? '?'}:${f.start_line ?? 0}:${f.start_column ?? 0}: ${f.message ?? line} (${f.type ?? '?'})`;
  });
  if (run.status !== 0 && out.length === 0) throw new Error(`buf ${args.join(' ')} exited ${run.status}: ${run.stderr.trim()}`);
  return out;
}

/** `buf lint` findings (buf.yaml's rules and exceptions). */
export function lintFindings(cwd: string = ROOT): string[] {
  return findings(['lint'], cwd);
}

/** `buf breaking` findings of the proto in `cwd` against an image (default: the committed one). */
export function breakingChanges(cwd: string = ROOT, against: string = resolve(ROOT, CONTRACT_IMAGE)): string[] {
  return findings(['breaking', '--against', against], cwd);
}

/** `npm run proto:image`: rewrites the committed image from proto/ as it is now. */
function main(): void {
  const out = resolve(ROOT, CONTRACT_IMAGE);
  const run = spawnSync(BUF, ['build', '--exclude-source-info', '-o', out], { cwd: ROOT, stdio: 'inherit' });
  if (run.status !== 0) process.exit(run.status ?? 1);
  process.stdout.write(
    `wrote ${relative(ROOT, out)}: the new baseline for \`buf breaking\`. Commit it only in a change that means to change the API, and say so there.\n`,
  );
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) main();
