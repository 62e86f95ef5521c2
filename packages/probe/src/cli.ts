import { parseArgs } from 'node:util';
import { ProbeError, ProbeErrorCode, isProbeError } from './errors.js';
import { runProbe } from './probe.js';
import type { ProbeOptions } from './probe.js';
import { exitCodeOf, formatHuman, formatJson } from './report.js';

export const USAGE = `usage: tether-probe URL [--via URL] [--tool NAME [--args JSON]] [--header 'K: V']... [--json]
                    [--cut-after N] [--wait-ms N] [--timeout-ms N]

Cuts a streaming MCP request, resumes it with Last-Event-ID (on --via if given)
and names what came back: correct, replay_from_zero, gap, fork,
fallback_without_ids, explicit_refusal or not_resumable.
Exit status: 0 no silent failure, 1 silent failure, 2 the probe could not run.
`;

/** Parsed command line: probe options plus output format. */
export interface CliArgs {
  readonly options: ProbeOptions;
  readonly json: boolean;
}

/** Parses `argv` (without node and script). Throws `ProbeError` `usage`; returns undefined for `--help`. */
export function parseCliArgs(argv: readonly string[]): CliArgs | undefined {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: {
        via: { type: 'string' },
        tool: { type: 'string' },
        args: { type: 'string' },
        header: { type: 'string', multiple: true },
        json: { type: 'boolean' },
        'cut-after': { type: 'string' },
        'wait-ms': { type: 'string' },
        'timeout-ms': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new ProbeError(ProbeErrorCode.usage, err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  if (values.help === true) return undefined;
  if (positionals.length !== 1) throw new ProbeError(ProbeErrorCode.usage, `expected one URL, got ${positionals.length}`);
  const url = checkUrl(positionals[0] as string, 'URL');
  const options: ProbeOptions = {
    url,
    via: values.via === undefined ? undefined : checkUrl(values.via, '--via'),
    tool: values.tool,
    args: values.args === undefined ? undefined : parseToolArgs(values.args),
    headers: Object.fromEntries((values.header ?? []).map(parseHeader)),
    cutAfterEvents: count(values['cut-after'], '--cut-after', 1),
    waitMs: count(values['wait-ms'], '--wait-ms', 0),
    timeoutMs: count(values['timeout-ms'], '--timeout-ms', 1),
  };
  if (options.args !== undefined && options.tool === undefined) throw new ProbeError(ProbeErrorCode.usage, '--args needs --tool');
  return { options, json: values.json === true };
}

/** Runs the CLI. Returns the exit status; writes the report to `out` and problems to `err`. */
export async function main(argv: readonly string[], io: { out(s: string): void; err(s: string): void }): Promise<number> {
  try {
    const cli = parseCliArgs(argv);
    if (cli === undefined) {
      io.out(USAGE);
      return 0;
    }
    const report = await runProbe(cli.options);
    io.out(cli.json ? formatJson(report) + '\n' : formatHuman(report));
    return exitCodeOf(report);
  } catch (e) {
    const code = isProbeError(e) ? e.code : 'unexpected';
    io.err(`tether-probe: ${code}: ${e instanceof Error ? e.message : String(e)}\n`);
    if (isProbeError(e, ProbeErrorCode.usage)) io.err(USAGE);
    return 2;
  }
}

function checkUrl(text: string, what: string): string {
  try {
    const u = new URL(text);
    if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
  } catch {
    // fall through
  }
  throw new ProbeError(ProbeErrorCode.usage, `${what} must be an http(s) URL, got '${text}'`);
}

function parseToolArgs(text: string): Record<string, unknown> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new ProbeError(ProbeErrorCode.usage, `--args must be JSON, got '${text}'`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ProbeError(ProbeErrorCode.usage, '--args must be a JSON object');
  return v as Record<string, unknown>;
}

function parseHeader(text: string): [string, string] {
  const colon = text.indexOf(':');
  const name = colon === -1 ? '' : text.slice(0, colon).trim();
  if (name === '' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw new ProbeError(ProbeErrorCode.usage, `--header must look like 'Name: value', got '${text}'`);
  }
  return [name.toLowerCase(), text.slice(colon + 1).trim()];
}

function count(text: string | undefined, what: string, min: number): number | undefined {
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min || !/^[0-9]+$/.test(text)) {
    throw new ProbeError(ProbeErrorCode.usage, `${what} must be an integer >= ${min}, got '${text}'`);
  }
  return n;
}
