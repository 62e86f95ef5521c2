/**
 * Readers for the files under deploy/ and for the facts they must agree with:
 * the services' flags (from their own `--help`), the metric instruments (from
 * packages/telemetry), the workspaces. Used by the cross-check tests.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const DEPLOY = join(REPO, 'deploy');

export const readText = (path: string): string => readFileSync(path, 'utf8');
export const deployPath = (...parts: string[]): string => join(DEPLOY, ...parts);

// `any` on purpose: manifests are walked field by field, and a missing field
// is a test failure with a message, not a type error.
export type Doc = any;

/** One YAML document; `<<` merge keys (compose anchors) are applied. */
export function readYaml(path: string): Doc {
  return parse(readText(path), { merge: true });
}

/** Every document of a multi-document YAML file; a syntax error throws with the file named. */
export function readYamlDocs(path: string): Doc[] {
  return parseAllDocuments(readText(path), { merge: true }).map((doc) => {
    if (doc.errors.length > 0) throw new Error(`${path}: ${doc.errors.map((e) => e.message).join('; ')}`);
    return doc.toJS();
  }).filter((d) => d !== null && d !== undefined);
}

/** A flag of a service, as its `--help` prints it. */
export interface ServiceFlag {
  readonly flag: string;
  readonly env: string;
  readonly fallback: string | undefined;
}

/** The `--flag ENV_TWIN help (default x)` lines of a service's `--help` (built dist), keyed by env twin. */
export function serviceFlags(main: string): Map<string, ServiceFlag> {
  const out = spawnSync(process.execPath, [join(REPO, main), '--help'], { encoding: 'utf8', timeout: 20_000 });
  if (out.status !== 0) throw new Error(`${main} --help exited ${out.status}: ${out.stderr}`);
  const flags = new Map<string, ServiceFlag>();
  for (const line of out.stdout.split('\n')) {
    const m = /^\s+--([a-z0-9-]+)\s+([A-Z][A-Z0-9_]+)\s+(.*)$/.exec(line);
    if (m === null) continue;
    const fallback = /\(default (.*)\)\s*$/.exec(m[3]!)?.[1];
    flags.set(m[2]!, { flag: m[1]!, env: m[2]!, fallback });
  }
  if (flags.size === 0) throw new Error(`${main} --help listed no flags`);
  return flags;
}

export const GATEWAY_MAIN = 'services/gateway/dist/main.js';
export const SESSION_LOG_MAIN = 'services/session-log/dist/main.js';
export const INSPECT_MAIN = 'packages/inspect/dist/inspect-main.js';
export const SDK_EXAMPLE_MAIN = 'examples/sdk-server/dist/main.js';

/** `10s`, `5m`, `1h`, `250ms`, `5000` (ms) → seconds. */
export function durationSeconds(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value.trim());
  if (m === null) throw new Error(`not a duration: ${value}`);
  const n = Number(m[1]);
  const unit = m[2] ?? 'ms';
  return unit === 'ms' ? n / 1000 : unit === 's' ? n : unit === 'm' ? n * 60 : n * 3600;
}

/** One instruction of a Dockerfile, continuation lines joined. */
export interface DockerInstruction {
  readonly op: string;
  readonly args: string;
  /** Index of the build stage (FROM) it belongs to. */
  readonly stage: number;
}

export function readDockerfile(path: string): DockerInstruction[] {
  const lines = readText(path).split('\n');
  const joined: string[] = [];
  let current = '';
  for (const raw of lines) {
    const line = raw.trimEnd();
    if (current === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    if (line.trim().startsWith('#')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    joined.push(current + line);
    current = '';
  }
  let stage = -1;
  return joined.map((text) => {
    const m = /^\s*([A-Za-z]+)\s+(.*)$/.exec(text);
    if (m === null) throw new Error(`${path}: cannot read instruction ${text}`);
    const op = m[1]!.toUpperCase();
    if (op === 'FROM') stage += 1;
    return { op, args: m[2]!.trim(), stage };
  });
}

/** `packages/*`, `services/*`, `examples/*` workspace dirs (relative), from the root package.json. */
export function workspaceDirs(): string[] {
  const root = JSON.parse(readText(join(REPO, 'package.json'))) as { workspaces: string[] };
  const dirs: string[] = [];
  for (const pattern of root.workspaces) {
    const parent = pattern.replace(/\/\*$/, '');
    if (!existsSync(join(REPO, parent))) continue;
    for (const entry of readdirSync(join(REPO, parent), { withFileTypes: true })) {
      if (entry.isDirectory() && existsSync(join(REPO, parent, entry.name, 'package.json'))) dirs.push(`${parent}/${entry.name}`);
    }
  }
  return dirs;
}

/** The instruments created in packages/telemetry, with their kind and unit. */
export interface Instrument {
  readonly name: string;
  readonly kind: 'Counter' | 'Histogram' | 'UpDownCounter' | 'Gauge' | 'ObservableGauge';
  readonly unit: string | undefined;
}

export function telemetryInstruments(): Instrument[] {
  const source = readText(join(REPO, 'packages/telemetry/src/metrics.ts'));
  const found: Instrument[] = [];
  for (const m of source.matchAll(/meter\.create(Counter|Histogram|UpDownCounter|Gauge|ObservableGauge)\(\s*'([^']+)'\s*(?:,\s*\{([^}]*)\})?/g)) {
    const unit = /unit:\s*'([^']*)'/.exec(m[3] ?? '')?.[1];
    found.push({ kind: m[1] as Instrument['kind'], name: m[2]!, unit });
  }
  return found;
}

/**
 * The Prometheus series names the collector's Prometheus exporter makes of an
 * OTLP instrument (OpenTelemetry's Prometheus compatibility rules, suffixes
 * on): dots become underscores, the unit is appended (`ms` → `_milliseconds`,
 * annotations like `{event}` are dropped), monotonic counters get `_total`,
 * histograms `_bucket`, `_sum`, `_count`; up-down counters are gauges.
 */
export function prometheusNames(instrument: Instrument): string[] {
  const units: Record<string, string> = { ms: 'milliseconds', s: 'seconds', By: 'bytes', '1': '' };
  const unit = instrument.unit === undefined || instrument.unit.startsWith('{') ? '' : (units[instrument.unit] ?? instrument.unit);
  const base = instrument.name.replace(/\./g, '_') + (unit === '' ? '' : `_${unit}`);
  if (instrument.kind === 'Counter') return [`${base}_total`];
  if (instrument.kind === 'Histogram') return [`${base}_bucket`, `${base}_sum`, `${base}_count`];
  return [base];
}

/** Resolves a compose path (relative to the compose file's dir). */
export function composePath(composeFile: string, path: string): string {
  return resolve(dirname(composeFile), path);
}
