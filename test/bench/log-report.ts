/**
 * The printed report of `npm run bench:log`: appends with a column for the
 * server measured (and one with `sync_interval: always`) and a target
 * column; resume latency per level and partition count, each beside the
 * raw batch direct get of the same events and the targets; then the targets
 * on their own.
 */
import type { LayoutLevel, Level, ServerRun, SyncAlwaysRun } from './log-server.js';
import * as t from './log-targets.js';
import type { PeerRun } from './peers/log-peers.js';
import { renderPeers } from './peers/log-report.js';
import { int, ms, ratio, table } from './stats.js';
import type { Summary } from './stats.js';
import type { Target, ThroughputResult } from './throughput.js';

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

const pair = (s: Summary | undefined): string => (s === undefined ? 'n/a' : `${ms(s.p50)} / ${ms(s.p99)}`);

export function renderReport(input: ReportInput): string {
  const ctx: Ctx = { ...input, current: input.runs.find((r) => r.role === 'current') };
  const { runs, syncAlways, current } = ctx;
  const out = [input.header, ''];

  out.push('## Append throughput (events/s, median of rounds; 1 untimed append per stream first, so writers are open)', '');
  out.push(sideBySide(ctx, appendRows(ctx), true), '');
  out.push("* diagnostic: raw publishes with Tether's 4 headers, msg id and expected-last-subject-seq, to a stream with the same republish rule.");
  out.push('N=16 (and any N > 1 of BENCH_LOG_PARTITIONS): the same appends on a log of N partitions, on the same single server, at 64 streams only, alternating with the other targets in each round.');
  if (syncAlways) {
    const seen = syncAlways.confirmed === undefined ? 'could not read /varz' : `/varz sync_always: ${String(syncAlways.confirmed)}`;
    out.push(`sync_interval always: a separate ${syncAlways.version} server started with \`jetstream { sync_interval: always }\` (${seen}); appends only, unpartitioned.`);
  }
  const roundName = (x: ThroughputResult): string => (x.partitions > 1 ? `tether N=${x.partitions}` : x.target);
  for (const r of [...runs, ...(syncAlways ? [{ ...syncAlways, role: 'sync-always' }] : [])]) {
    const rounds = r.throughput.map((x) => `${roundName(x)} c=${x.concurrency}: ${x.roundsPerSec.map((v) => Math.round(v)).join(', ')}`);
    out.push(`rounds on ${serverLabel(r)}: ${rounds.join('; ')}`);
  }

  for (const r of runs) out.push('', ...renderResume(r));

  const calls = (l: LayoutLevel | undefined): Record<string, number> => l?.apiCallsPerResume ?? {};
  for (const r of runs) {
    const last = r.levels[r.levels.length - 1];
    const layouts = last?.layouts ?? [];
    const kinds = [...new Set(layouts.flatMap((l) => Object.keys(calls(l))))].sort();
    const apiRows = [...kinds.map((k) => [k, ...layouts.map((l) => String(calls(l)[k] ?? 0))]), ['total', ...layouts.map((l) => String(sum(Object.values(calls(l)))))]];
    out.push('', `JetStream API requests of one resume on ${serverLabel(r)} @ ${int(last?.events ?? Number.NaN)} (counted on $JS.API.>; a batch direct get is one request):`, '');
    out.push(table(['request', ...layouts.map((l) => `N=${l.partitions}`)], apiRows));
  }

  const targetTable = (rows: readonly t.TargetRow[], wanted: string): string =>
    table(['figure', wanted, 'measured', 'verdict'], rows.map((r) => [r.target, r.wanted, r.measured, r.verdict]));
  if (current) {
    out.push('', `## DESIGN §12 targets on the current server (${current.version}); resume targets on the partitioned log, N=${t.judgedPartitions(current)}`, '');
    out.push(targetTable(t.currentTargets(current, input.peers), 'wanted'));
  }
  if (input.peers !== undefined) out.push('', renderPeers(input.peers, runs));
  const parts = [...runs.map((r) => `${serverLabel(r)} ${r.seconds.toFixed(0)} s`), ...(syncAlways ? [`sync always ${syncAlways.seconds.toFixed(0)} s`] : [])];
  out.push('', `total bench runtime: ${input.runtimeS.toFixed(0)} s (${parts.join(', ')})`);
  return out.join('\n');
}

/** Resume latency per level and partition count on one server, the raw read and the targets beside each; the SDK store; the fills. */
function renderResume(run: ServerRun): string[] {
  const judged = t.judgedPartitions(run);
  const out: string[] = [];
  out.push(`## Resume latency, 100-event backlog, on ${serverLabel(run)} (ms, p50 / p99; from the call until the 100th event is in hand)`, '');
  const rows = run.levels.flatMap((level) =>
    level.layouts.map((l) => {
      const r = t.rawFactor(l);
      const target = l.partitions === judged ? `p50 ≤ ${t.TARGETS.resumeP50Ms}: ${t.p50Verdict(l)}; p99 ≤ ${t.TARGETS.resumeP99Ms}: ${t.p99Verdict(l)}; ≤ ${t.TARGETS.rawFactor}× raw: ${t.rawVerdict(l)}` : '';
      return [
        int(level.events),
        `N=${l.partitions}`,
        pair(l.tether.total),
        pair(l.tether.classify),
        pair(l.tether.firstEvent),
        pair(l.rawDirectBatch),
        `${ratio(r.p50)} / ${ratio(r.p99)}`,
        `${l.tether.total.n} / ${l.rawDirectBatch.n}; ${l.tether.anomalies}`,
        target,
      ];
    }),
  );
  out.push(
    table(
      ['stored', 'log', 'log.resume() total', 'classification', '1st event', 'raw batch direct get*', 'total / raw', 'samples resume / raw; anomalies', `target (N=${judged}, DESIGN §12)`],
      rows,
    ),
    '',
  );
  out.push(
    '* the server\'s floor: the same 100 events in one `$JS.API.DIRECT.GET` `{seq, next_by_subj, batch: 100}` to the session\'s partition stream and subject, read until its 204 EOB; no classification, checks or live tail.',
    'classification: until `log.resume()` returned (registry read, the batch from the cursor and the stream head, one round trip); 1st event: until the first event of the backlog was in hand.',
  );
  const flat = run.partitions.map((n) => {
    const f = t.flatness(run, n);
    return `N=${n}: ${ratio(f.p50)} / ${ratio(f.p99)} (${int(f.from)} → ${int(f.to)})${n === judged ? `; target ≤ ${t.TARGETS.flat}× from ${int(t.TARGETS.flatFrom)} to ${int(t.TARGETS.flatTo)}: ${f.verdict}` : ''}`;
  });
  out.push(`Flat? total p50 / p99 at the largest level over the smallest: ${flat.join('; ')}.`);
  if (run.skipped !== undefined) out.push(`${serverLabel(run)}: ${run.skipped}`);
  const paths = run.logServer === undefined ? 'not reported (no log.server in this build)' : `replay ${run.logServer.replay}, classify ${run.logServer.classify} (log.server: ${run.logServer.version})`;
  out.push(`${serverLabel(run)}: log paths ${paths}`);

  out.push('', "The SDK's example InMemoryEventStore, holding the same events (one store for all sessions), resumed at the same cursors:", '');
  const sdkHeader = ['stored', 'SDK store p50 / p99', ...run.partitions.map((n) => `SDK / Tether N=${n} p50`), 'samples; anomalies'];
  const sdkRows = run.levels.map((level: Level) => [
    int(level.events),
    pair(level.sdk.total),
    ...run.partitions.map((n) => {
      const factor = ratio(t.sdkFactor(level, t.layoutOf(level, n)));
      return level.events === t.TARGETS.sdkAt && n === judged ? `${factor} (target ≥ ${t.TARGETS.sdkFactor}×: ${t.sdkVerdict(level, t.layoutOf(level, n))})` : factor;
    }),
    `${level.sdk.total.n}; ${level.sdk.anomalies}`,
  ]);
  out.push(table(sdkHeader, sdkRows), '');

  const fillCell = (l: LayoutLevel | undefined): string => (l ? `${int(l.fill.perSec)} (${l.fill.seconds.toFixed(1)} s)` : 'n/a');
  out.push('Log fill (128 streams at once; sessions of 1-3 streams of 100-400 events, last one an end marker; the same shapes in every layout), events/s (seconds):', '');
  out.push(table(['level', ...run.partitions.map((n) => `N=${n}`)], run.levels.map((level) => [int(level.events), ...run.partitions.map((n) => fillCell(t.layoutOf(level, n)))])));
  return out;
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
    const partitioned = [...new Set(runs.flatMap((r) => r.throughput.filter((x) => x.concurrency === c && x.partitions > 1).map((x) => x.partitions)))].sort((a, b) => a - b);
    return [
      events('raw', 'raw publish+ack'),
      events('raw-shaped', 'raw, tether-shaped*'),
      events('tether', 'Tether append, N=1'),
      {
        figure: `Tether N=1 / raw, ${streams}`,
        cell: (r) => t.pct(t.appendShare(r, c)),
        sync: t.pct(sync('tether') / sync('raw')),
        ...opt('target', at64 && current ? `≥ ${t.pct(t.TARGETS.appendShare)}: ${t.appendVerdict(current)}` : undefined),
      },
      ...partitioned.flatMap((n): Row[] => [
        { figure: `Tether append, N=${n}, ${streams}`, cell: (r) => int(t.tput(r.throughput, 'tether-partitioned', c, n)) },
        {
          figure: `Tether N=${n} / raw, ${streams}`,
          cell: (r) => t.pct(t.appendShare(r, c, n)),
          ...opt('target', at64 && current ? `≥ ${t.pct(t.TARGETS.appendShare)}: ${t.appendVerdict(current, n)}` : undefined),
        },
      ]),
    ];
  });
}

function sum(values: readonly number[]): number {
  return values.reduce((a, b) => a + b, 0);
}

/** `{ [key]: value }` when value is defined, else nothing (exactOptionalPropertyTypes). */
function opt<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}
