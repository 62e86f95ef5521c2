import { int, ms, ratio, table } from '../stats.js';
import type { CursorProbe } from './cursors.js';
import { BACKLOG } from './resume.js';
import type { ResumeLevel } from './resume.js';
import { ThroughputMode } from './store-throughput.js';
import type { ThroughputRow } from './store-throughput.js';
import { StoreName } from './stores.js';
import { TaskStoreName } from './tasks.js';
import type { TasksRun } from './tasks.js';

export interface SdkBenchReport {
  readonly header: string;
  readonly resume: readonly ResumeLevel[];
  readonly throughput: readonly ThroughputRow[];
  readonly tasks: TasksRun | undefined;
  readonly cursors: readonly CursorProbe[];
  readonly streamEvents: number;
  readonly runtimeS: number;
}

/** Three-decimal ms for the sub-millisecond in-memory figures. */
const fine = (value: number): string => (Number.isFinite(value) && value < 1 ? value.toFixed(3) : ms(value));

export function renderReport(r: SdkBenchReport): string {
  const out = [r.header, ''];
  if (r.resume.length > 0) {
    out.push(
      `## Resume latency: \`replayEventsAfter\` of a ${BACKLOG}-event backlog (ms)`,
      '',
      `One session (one store) holding the stored events in streams of ${int(r.streamEvents)} (progress notifications, then the response that ends the stream);`,
      `the cursor is the event ${BACKLOG} before a random stream's end, timed until \`replayEventsAfter\` resolves (the SDK transport answers only then).`,
      '',
      table(
        ['stored events', 'streams', 'store', 'p50', 'p90', 'p99', 'max', 'samples', 'anomalies', 'p50 SDK / Tether'],
        r.resume.flatMap((level) => {
          const rowOf = (name: string, s: ResumeLevel['tether'], vs: string): string[] => [
            int(level.storedEvents),
            int(level.streams),
            name,
            fine(s.total.p50),
            fine(s.total.p90),
            fine(s.total.p99),
            fine(s.total.max),
            int(s.total.n),
            int(s.anomalies),
            vs,
          ];
          return [rowOf(StoreName.tether, level.tether, ''), rowOf(StoreName.sdk, level.sdk, ratio(level.sdk.total.p50 / level.tether.total.p50))];
        }),
      ),
      '',
      `The SDK store's samples pick the cursor in the order it replays (\`localeCompare\` of its ids), so each sends exactly ${BACKLOG} events.`,
      `Resumed at the cursor ${BACKLOG} events before a stream's end *in the order stored*, it sends:`,
      '',
      table(
        ['stored events', 'probes', 'mean sent', 'mean missing', 'mean sent from before the cursor', `exactly the ${BACKLOG}, in order`],
        r.resume.map((l) => [int(l.storedEvents), int(l.sdkStoredOrderProbe.probes), l.sdkStoredOrderProbe.meanSent.toFixed(1), l.sdkStoredOrderProbe.meanMissing.toFixed(1), l.sdkStoredOrderProbe.meanExtra.toFixed(1), `${l.sdkStoredOrderProbe.exact} of ${l.sdkStoredOrderProbe.probes}`]),
      ),
      '',
    );
  }
  if (r.throughput.length > 0) {
    const modes = [...new Set(r.throughput.map((t) => t.mode))];
    out.push(
      '## `storeEvent` throughput (events/s, median of rounds)',
      '',
      'Each lane awaits every `storeEvent` before the next (the SDK transport writes an event to its client only once stored); fresh streams each round.',
      '',
      table(
        ['mode', 'events per round', StoreName.tether, StoreName.sdk, 'SDK / Tether', 'Tether rounds'],
        modes.map((mode) => {
          const t = r.throughput.find((x) => x.mode === mode && x.store === 'tether');
          const s = r.throughput.find((x) => x.mode === mode && x.store === 'sdk');
          return [ThroughputMode[mode], int(t?.events ?? Number.NaN), int(t?.medianPerSec ?? Number.NaN), int(s?.medianPerSec ?? Number.NaN), ratio((s?.medianPerSec ?? Number.NaN) / (t?.medianPerSec ?? Number.NaN)), (t?.rounds ?? []).map(int).join(', ')];
        }),
      ),
      '',
    );
  }
  if (r.tasks !== undefined) {
    const t = r.tasks;
    out.push(
      '## Task create and get latency (ms, one call at a time)',
      '',
      `createDurableTasks on nats-server ${t.durable.version}: expiry ${t.durable.ttlPath}, results up to ${int(t.durable.maxResultBytes)} bytes.`,
      '',
      table(
        ['store', 'create p50', 'create p99', 'get p50', 'get p99', 'calls', 'get misses'],
        t.rows.map((row) => [TaskStoreName[row.store], fine(row.create.p50), fine(row.create.p99), fine(row.get.p50), fine(row.get.p99), int(row.create.n), int(row.misses)]),
      ),
      '',
    );
  }
  if (r.cursors.length > 0) {
    out.push(
      '## What each store does with other cursors (not timed)',
      '',
      table(
        ['cursor', 'store', 'replayEventsAfter', 'events sent'],
        r.cursors.map((c) => [c.cursor, StoreName[c.store], c.outcome, int(c.sent)]),
      ),
      '',
      'The SDK transport answers a throw with 500 `Error replaying events`; the SDK store (no `getStreamIdForEventId`) returning `""` gets a 200 SSE stream with no events, kept open.',
      '',
    );
  }
  out.push(`runtime ${r.runtimeS.toFixed(0)} s`);
  return out.join('\n');
}
