/**
 * The printed report of `npm run bench:log`: a column for the server
 * measured (and one with `sync_interval: always` for appends), and a target
 * column judged on it; then the targets on their own.
 */
import type { Level, ServerRun, SyncAlwaysRun } from './log-server.js';
import * as t from './log-targets.js';
import type { PeerRun } from './peers/log-peers.js';
import { renderPeers } from './peers/log-report.js';
import { int, ms, ratio, table } from './stats.js';
import type { Summary } from './stats.js';
import type { Target } from './throughput.js';

export interface ReportInput {
  readonly header: string;
  readonly runs: readonly ServerRun[];
  readonly syncAlways: SyncAlwaysRun | undefined;
  /** The peer stores of DESIGN §12 (peers/), when measured. */
  readonly peers?: PeerRun | undefined;
  readonly runtimeS: number;
}

export const serverLabel = (run: { role: string; version: string }): string => `${run.role} ${run.version}`;

/** One row: a figure, a cell per server (and the sync-always column), the current server's target. */
interface Row {
  readonly figure: string;
  readonly cell: (run: ServerRun) => string;
  readonly sync?: string;
  readonly target?: string;
}

interface Ctx extends ReportInput {
  readonly current: ServerRun | undefined;
}

export function renderReport(input: ReportInput): string {
  const ctx: Ctx = { ...input, current: input.runs.find((r) => r.role === 'current') };
  const { runs, syncAlways, current } = ctx;
  const out = [input.header, ''];

  out.push('## Append throughput (events/s, median of rounds; 1 untimed append per stream first, so writers are open)', '');
  out.push(sideBySide(ctx, appendRows(ctx), true), '');
  out.push("* diagnostic: raw publishes with Tether's 4 headers, msg id and expected-last-subject-seq, to a stream with the same republish rule.");
  if (syncAlways) {
    const seen = syncAlways.confirmed === undefined ? 'could not read /varz' : `/varz sync_always: ${String(syncAlways.confirmed)}`;
    out.push(`sync_interval always: a separate ${syncAlways.version} server started with \`jetstream { sync_interval: always }\` (${seen}); appends only.`);
  }
  for (const r of [...runs, ...(syncAlways ? [{ ...syncAlways, role: 'sync-always' }] : [])]) {
    const rounds = r.throughput.map((x) => `${x.target} c=${x.concurrency}: ${x.roundsPerSec.map((v) => Math.round(v)).join(', ')}`);
    out.push(`rounds on ${serverLabel(r)}: ${rounds.join('; ')}`);
  }

  out.push('', '## Resume latency, 100-event backlog (ms; from the call until the 100th event is in hand)', '');
  out.push(sideBySide(ctx, resumeRows(ctx), false), '');
  out.push('* diagnostic: the same 100 events read with one batch direct get; no classification or checks.');
  for (const r of runs) {
    if (r.skipped !== undefined) out.push(`${serverLabel(r)}: ${r.skipped}`);
    const paths = r.logServer === undefined ? 'not reported (no log.server in this build)' : `replay ${r.logServer.replay}, classify ${r.logServer.classify} (log.server: ${r.logServer.version})`;
    out.push(`${serverLabel(r)}: log paths ${paths}`);
  }

  const events = levelsOf(runs);
  const fillCell = (l: Level | undefined): string => (l ? `${int(l.fill.perSec)} (${l.fill.seconds.toFixed(1)} s)` : 'n/a');
  out.push('', 'Log fill (128 streams at once; sessions of 1-3 streams of 100-400 events, last one an end marker), events/s (seconds):', '');
  out.push(table(['level', ...runs.map(serverLabel)], events.map((e) => [int(e), ...runs.map((r) => fillCell(t.levelAt(r, e)))])));

  const lastLevel = (r: ServerRun): Level | undefined => r.levels[r.levels.length - 1];
  const calls = (r: ServerRun): Record<string, number> => lastLevel(r)?.apiCallsPerResume ?? {};
  const kinds = [...new Set(runs.flatMap((r) => Object.keys(calls(r))))].sort();
  const apiRows = [...kinds.map((k) => [k, ...runs.map((r) => String(calls(r)[k] ?? 0))]), ['total', ...runs.map((r) => String(sum(Object.values(calls(r)))))]];
  out.push('', "JetStream API requests of one resume, at each server's largest level (counted on $JS.API.>; a batch direct get is one request):", '');
  out.push(table(['request', ...runs.map((r) => `${serverLabel(r)} @ ${int(lastLevel(r)?.events ?? Number.NaN)}`)], apiRows));

  const targetTable = (rows: readonly t.TargetRow[], wanted: string): string =>
    table(['figure', wanted, 'measured', 'verdict'], rows.map((r) => [r.target, r.wanted, r.measured, r.verdict]));
  if (current) out.push('', `## DESIGN §12 targets on the current server (${current.version})`, '', targetTable(t.currentTargets(current), 'wanted'));
  if (input.peers !== undefined) out.push('', renderPeers(input.peers, runs));
  const parts = [...runs.map((r) => `${serverLabel(r)} ${r.seconds.toFixed(0)} s`), ...(syncAlways ? [`sync always ${syncAlways.seconds.toFixed(0)} s`] : [])];
  out.push('', `total bench runtime: ${input.runtimeS.toFixed(0)} s (${parts.join(', ')})`);
  return out.join('\n');
}

function sideBySide(ctx: Ctx, rows: readonly Row[], withSync: boolean): string {
  const { runs, current, syncAlways } = ctx;
  const syncHere = (r: ServerRun): boolean => withSync && r === current && syncAlways !== undefined;
  const header = [
    'figure',
    ...runs.flatMap((r) => [serverLabel(r), ...(syncHere(r) ? [`${serverLabel(r)}, sync_interval always`] : [])]),
    ...(current ? [`target (${serverLabel(current)})`] : []),
  ];
  const body = rows.map((row) => [
    row.figure,
    ...runs.flatMap((r) => [row.cell(r), ...(syncHere(r) ? [row.sync ?? ''] : [])]),
    ...(current ? [row.target ?? ''] : []),
  ]);
  return table(header, body);
}

function appendRows(ctx: Ctx): Row[] {
  const { runs, syncAlways, current } = ctx;
  const concurrencies = [...new Set(runs.flatMap((r) => r.throughput.map((x) => x.concurrency)))].sort((a, b) => a - b);
  return concurrencies.flatMap((c): Row[] => {
    const at64 = c === t.TARGETS.appendAt;
    const streams = c === 1 ? '1 stream' : `${c} streams`;
    const sync = (target: Target): number => (syncAlways ? t.tput(syncAlways.throughput, target, c) : Number.NaN);
    const events = (target: Target, figure: string): Row => ({ figure: `${figure}, ${streams}`, cell: (r) => int(t.tput(r.throughput, target, c)), sync: int(sync(target)) });
    return [
      events('raw', 'raw publish+ack'),
      events('raw-shaped', 'raw, tether-shaped*'),
      events('tether', 'Tether append'),
      {
        figure: `Tether / raw, ${streams}`,
        cell: (r) => t.pct(t.appendShare(r, c)),
        sync: t.pct(sync('tether') / sync('raw')),
        ...opt('target', at64 && current ? `≥ ${t.pct(t.TARGETS.appendShare)}: ${t.appendVerdict(current)}` : undefined),
      },
    ];
  });
}

function resumeRows(ctx: Ctx): Row[] {
  const { runs, current } = ctx;
  const pair = (s: Summary | undefined): string => (s === undefined ? 'n/a' : `${ms(s.p50)} / ${ms(s.p99)}`);
  const rows = levelsOf(runs).flatMap((e): Row[] => {
    const lv = (r: ServerRun): Level | undefined => t.levelAt(r, e);
    const cur = current && lv(current);
    const target = (text: string, ok: (l: Level) => t.Verdict) => (cur ? `${text}: ${ok(cur)}` : undefined);
    const at = `@ ${int(e)}`;
    return [
      {
        figure: `Tether p50 ${at}`,
        cell: (r) => ms(lv(r)?.tether.total.p50 ?? Number.NaN),
        ...opt('target', target(`≤ ${t.TARGETS.resumeP50Ms} ms`, t.p50Verdict)),
      },
      {
        figure: `Tether p99 ${at}`,
        cell: (r) => ms(lv(r)?.tether.total.p99 ?? Number.NaN),
        ...opt('target', target(`≤ ${t.TARGETS.resumeP99Ms} ms`, t.p99Verdict)),
      },
      { figure: `Tether classify / 1st event p50 ${at}`, cell: (r) => withLevel(lv(r), (l) => `${ms(l.tether.classify.p50)} / ${ms(l.tether.firstEvent.p50)}`) },
      { figure: `raw batch direct get p50 / p99* ${at}`, cell: (r) => pair(lv(r)?.rawDirectBatch) },
      { figure: `SDK store p50 / p99 ${at}`, cell: (r) => pair(lv(r)?.sdk.total) },
      {
        figure: `SDK / Tether p50 ${at}`,
        cell: (r) => ratio(t.sdkFactor(lv(r))),
        ...opt('target', e === t.TARGETS.sdkAt ? target(`≥ ${t.TARGETS.sdkFactor}×`, (l) => t.sdkVerdict(l)) : undefined),
      },
      { figure: `samples Tether / SDK; anomalies ${at}`, cell: (r) => withLevel(lv(r), (l) => `${l.tether.total.n} / ${l.sdk.total.n}; ${l.tether.anomalies + l.sdk.anomalies}`) },
    ];
  });
  const flat = (r: ServerRun): string => {
    const f = t.flatness(r);
    return `${ratio(f.p50)} / ${ratio(f.p99)} (${int(f.to)})`;
  };
  rows.push({ figure: 'Tether p50 / p99, largest level ÷ 10k', cell: flat, ...opt('target', current ? `≤ ${t.TARGETS.flat}× to 1M: ${t.flatness(current).verdict}` : undefined) });
  return rows;
}

function levelsOf(runs: readonly ServerRun[]): number[] {
  return [...new Set(runs.flatMap((r) => r.levels.map((l) => l.events)))].sort((a, b) => a - b);
}

function withLevel(l: Level | undefined, f: (l: Level) => string): string {
  return l === undefined ? 'n/a' : f(l);
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** `{ [key]: value }` when value is defined, else nothing (exactOptionalPropertyTypes). */
function opt<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
