import { CURSOR_CASES, CursorCaseName } from '../peers/cursor-loss.js';
import type { CursorLossRow } from '../peers/cursor-loss.js';
import { cursorCell } from '../peers/log-report.js';
import { PersistenceName, RedisLayoutNote } from '../peers/redis-peers.js';
import type { SdkPeersInfo } from '../peers/sdk-peers.js';
import { int, ms, ratio, table } from '../stats.js';
import type { CursorProbe } from './cursors.js';
import { BACKLOG } from './resume.js';
import type { ResumeLevel } from './resume.js';
import { ThroughputMode } from './store-throughput.js';
import type { ThroughputRow } from './store-throughput.js';
import { StoreName } from './stores.js';
import type { StoreKind } from './stores.js';
import { TaskStoreName } from './tasks.js';
import type { TasksRun } from './tasks.js';

export interface SdkBenchReport {
  readonly header: string;
  readonly resume: readonly ResumeLevel[];
  readonly throughput: readonly ThroughputRow[];
  readonly tasks: TasksRun | undefined;
  readonly cursors: readonly CursorProbe[];
  /** Every store's answer to a cursor it no longer holds (peers/cursor-loss.ts), and what its restart restarted. */
  readonly cursorLoss: readonly CursorLossRow[];
  readonly restartNotes: Readonly<Record<string, string>>;
  readonly peers: SdkPeersInfo | undefined;
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
        ['stored events', 'streams', 'store', 'p50', 'p90', 'p99', 'max', 'samples', 'anomalies', 'mean sent', 'p50 ÷ Tether p50'],
        r.resume.flatMap((level) => {
          const vs = (s: ResumeLevel['tether']): string => ratio(s.total.p50 / level.tether.total.p50);
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
            // Older JSON has no meanSent.
            Number.isFinite(s.meanSent) ? int(s.meanSent) : 'n/a',
            vs,
          ];
          return [
            rowOf(StoreName.tether, level.tether, ''),
            rowOf(StoreName.sdk, level.sdk, vs(level.sdk)),
            ...(level.peers ?? []).map((p) => rowOf(StoreName[p.store], p.resume, vs(p.resume))),
          ];
        }),
      ),
      '',
      ...(r.resume.some((l) => (l.peers ?? []).length > 0)
        ? [
            'Peers hold the same session in one store each (server-everything: one instance, as it makes one per session; Redis: one key prefix), the same streams and messages,',
            "written as Tether's is (16 streams at once) but each event awaited; server-everything's like the SDK store's. server-everything's store sends every event of the session after the cursor, of every stream (mean sent).",
            '',
          ]
        : []),
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
    const others = [...new Set(r.throughput.map((t) => t.store))].filter((k) => k !== 'tether' && k !== 'sdk');
    out.push(
      '## `storeEvent` throughput (events/s, median of rounds)',
      '',
      'Each lane awaits every `storeEvent` before the next (the SDK transport writes an event to its client only once stored); fresh streams each round.',
      '',
      table(
        ['mode', 'events per round', StoreName.tether, StoreName.sdk, 'SDK / Tether', ...others.map((k) => StoreName[k]), 'Tether rounds'],
        modes.map((mode) => {
          const t = r.throughput.find((x) => x.mode === mode && x.store === 'tether');
          const s = r.throughput.find((x) => x.mode === mode && x.store === 'sdk');
          const other = (k: StoreKind): string => int(r.throughput.find((x) => x.mode === mode && x.store === k)?.medianPerSec ?? Number.NaN);
          return [
            ThroughputMode[mode],
            int(t?.events ?? Number.NaN),
            int(t?.medianPerSec ?? Number.NaN),
            int(s?.medianPerSec ?? Number.NaN),
            ratio((s?.medianPerSec ?? Number.NaN) / (t?.medianPerSec ?? Number.NaN)),
            ...others.map(other),
            (t?.rounds ?? []).map(int).join(', '),
          ];
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
  if (r.cursorLoss.length > 0) {
    const stores = [...new Set(r.cursorLoss.map((c) => c.store))];
    out.push(
      '## A cursor the store no longer holds (run, not assumed)',
      '',
      'Through the SDK transport\'s path: `getStreamIdForEventId` when the store has it, then `replayEventsAfter`.',
      '',
      table(['store', ...CURSOR_CASES.map((c) => CursorCaseName[c]), 'restart is'], stores.map((s) => [s, ...CURSOR_CASES.map((c) => cursorCell(r.cursorLoss, s, c)), r.restartNotes[s] ?? ''])),
      '',
      '* explicit: an error (500; 400 when getStreamIdForEventId finds nothing); silent: a success with nothing, a gap, or events that are not the continuation; held: still had the cursor and sent exactly what followed it; n/a: never drops an event.',
      '* trimmed: 25 events in a ring of 10 (Tether: maxMsgsPerStream 10), cursor the 3rd; restart: 20 stored, cursor the 10th; unknown: a cursor issued by the store of another session.',
      '',
    );
  }
  if (r.peers !== undefined) {
    const p = r.peers;
    out.push(
      `Peers: server-everything ${p.everything.version}, the store class of ${p.everything.file} (its own, not the SDK's InMemoryEventStore).`,
      p.redis === undefined
        ? `Redis peers NOT measured: ${p.redisMissing ?? ''}.`
        : `Redis ${p.redis.version} (${p.redis.bin}), private servers on loopback: ${PersistenceName.none}, and ${PersistenceName['aof-always']}; a key prefix per session, a ring of 10,000 events per stream while measured, TTL 3600 s. Redis Streams: ${RedisLayoutNote['redis-streams']}. ContextForge layout: ${RedisLayoutNote.contextforge}.`,
      '',
    );
  }
  out.push(`runtime ${r.runtimeS.toFixed(0)} s`);
  return out.join('\n');
}
