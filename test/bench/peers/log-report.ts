/**
 * The peers' part of the `npm run bench:log` report: appends, resume
 * latency per level (Tether and the SDK store from the first server's run
 * beside them) and the cursor-loss verdicts.
 */
import type { ServerRun } from '../log-server.js';
import { StoreName } from '../sdk/stores.js';
import type { StoreKind } from '../sdk/stores.js';
import { int, ms, table } from '../stats.js';
import type { Summary } from '../stats.js';
import { CURSOR_CASES, CursorCaseName } from './cursor-loss.js';
import type { CursorLossRow } from './cursor-loss.js';
import type { PeerRun } from './log-peers.js';
import { PersistenceName, RedisLayoutNote } from './redis-peers.js';

const pair = (s: Summary | undefined): string => (s === undefined || s.n === 0 ? 'n/a' : `${ms(s.p50)} / ${ms(s.p99)} (${s.n})`);

/** `explicit: …`, `silent: …`, `held: …`, `n/a: …`: a verdict and what happened. */
export const cursorCell = (rows: readonly CursorLossRow[], store: string, c: string): string => {
  const r = rows.find((x) => x.store === store && x.case === c);
  return r === undefined ? 'not run' : `${r.outcome.kind}: ${r.outcome.detail}`;
};

export function renderPeers(peers: PeerRun, runs: readonly ServerRun[]): string {
  const first = runs[0];
  const label = first === undefined ? '' : `${first.role} ${first.version}`;
  const out: string[] = ['## Peers, same run (DESIGN §12): the same events and cursors, other stores', ''];
  if (peers.redisMissing !== undefined) out.push(`WARNING: no Redis peer was measured: ${peers.redisMissing}.`, '');

  const tput = (store: StoreKind, c: number): string => int(peers.throughput.find((t) => t.store === store && t.concurrency === c)?.medianPerSec ?? Number.NaN);
  const rounds = (store: StoreKind): string =>
    peers.throughput
      .filter((t) => t.store === store)
      .map((t) => `c=${t.concurrency}: ${t.roundsPerSec.map(int).join(', ')}`)
      .join('; ');
  const concurrencies = [...new Set(peers.throughput.map((t) => t.concurrency))].sort((a, b) => a - b);
  const tputStores = [...new Set(peers.throughput.map((t) => t.store))];
  const tetherTput = (c: number, target: string, partitions = 1): string =>
    int(first?.throughput.find((t) => t.target === target && t.concurrency === c && t.partitions === partitions)?.medianPerSec ?? Number.NaN);
  out.push('Append (events/s, median of rounds): `storeEvent` of a 200-byte progress notification, each lane its own session and stream, every append awaited; 1 untimed append per lane first.', '');
  out.push(
    table(
      ['store', ...concurrencies.map((c) => (c === 1 ? '1 stream' : `${c} streams`)), 'rounds'],
      [
        [`Tether SessionLog.append, N=1 (${label}, table above)`, ...concurrencies.map((c) => tetherTput(c, 'tether')), ''],
        ...(first?.partitions ?? []).filter((n) => n > 1).map((n) => [`Tether SessionLog.append, N=${n} (${label}, table above)`, ...concurrencies.map((c) => tetherTput(c, 'tether-partitioned', n)), '']),
        [`raw JetStream publish+ack (${label}, table above)`, ...concurrencies.map((c) => tetherTput(c, 'raw')), ''],
        ...tputStores.map((s) => [StoreName[s], ...concurrencies.map((c) => tput(s, c)), rounds(s)]),
      ],
    ),
    '',
  );

  const levels = [...new Set([...(first?.levels.map((l) => l.events) ?? []), ...peers.resume.map((r) => r.events)])].sort((a, b) => a - b);
  const resumeStores = [...new Set(peers.resume.map((r) => r.store))];
  const peerCell = (store: StoreKind, e: number): string => {
    const r = peers.resume.find((x) => x.store === store && x.events === e);
    if (r === undefined) return 'not run';
    if (r.total === undefined) return `skipped: ${r.skipped ?? ''}`;
    const extras = [r.anomalies > 0 ? `${r.anomalies} anomalies` : '', r.foreignMean >= 0.5 ? `+${int(r.foreignMean)} other streams' events sent` : ''].filter((x) => x !== '');
    return `${pair(r.total)}${extras.length > 0 ? `; ${extras.join(', ')}` : ''}`;
  };
  const level = (e: number) => first?.levels.find((l) => l.events === e);
  const logCell = (e: number, pick: (l: NonNullable<ReturnType<typeof level>>) => Summary | undefined): string => {
    const l = level(e);
    return l !== undefined ? pair(pick(l)) : first?.skipped !== undefined ? `skipped: ${first.skipped}` : 'not run';
  };
  out.push(`Resume latency, 100-event backlog, ms p50 / p99 (samples): from the call until the stream's 100th event after the cursor (Tether: \`log.resume()\`; the others: \`replayEventsAfter\`). Same events, same cursors, levels of the ${label} run.`, '');
  out.push(
    table(
      ['store', ...levels.map((e) => `@ ${int(e)}`)],
      [
        ...(first?.partitions ?? []).map((n) => [`Tether, log of N=${n} (${label})`, ...levels.map((e) => logCell(e, (l) => l.layouts.find((x) => x.partitions === n)?.tether.total))]),
        [`${StoreName.sdk} (one store for all sessions)`, ...levels.map((e) => logCell(e, (l) => l.sdk.total))],
        ...resumeStores.map((s) => [StoreName[s], ...levels.map((e) => peerCell(s, e))]),
      ],
    ),
    '',
  );
  const fills = peers.resume.filter((r) => r.fill !== undefined && r.store !== 'everything');
  if (fills.length > 0) {
    out.push(`Redis peers filled with the log's events, ${64} streams at once, each stream's events in order: ${fills.map((r) => `${StoreName[r.store]} @ ${int(r.events)} ${int(r.fill?.perSec ?? Number.NaN)}/s (${(r.fill?.seconds ?? 0).toFixed(1)} s)`).join('; ')}.`, '');
  }

  const cursorStores = [...new Set(peers.cursorLoss.map((r) => r.store))];
  out.push('What each store does with a cursor it no longer holds (run, not assumed; the SDK transport path: `getStreamIdForEventId` when the store has it, then `replayEventsAfter`):', '');
  out.push(table(['store', ...CURSOR_CASES.map((c) => CursorCaseName[c]), 'restart is'], cursorStores.map((s) => [s, ...CURSOR_CASES.map((c) => cursorCell(peers.cursorLoss, s, c)), peers.restartNotes[s] ?? ''])), '');
  out.push(
    '* explicit: an error (the SDK transport answers 500, or 400 when getStreamIdForEventId finds nothing); silent: a success with nothing, a gap, or events that are not the continuation; held: the store still had the cursor and sent exactly what followed it (no loss); n/a: the store never drops an event.',
    `* trimmed: 25 events stored in a ring of 10 (Tether: maxMsgsPerStream 10), cursor the 3rd; restart: 20 stored, cursor the 10th; unknown: a cursor issued by the store of another session.`,
    `* Redis Streams: ${RedisLayoutNote['redis-streams']}. ContextForge layout: ${RedisLayoutNote.contextforge}. Both keyed per MCP session, ring ${int(10_000)} events per stream while measured, TTL 3600 s; redis-server ${peers.redis?.version ?? 'n/a'} (${peers.redis?.bin ?? 'not found'}), private, loopback, ${PersistenceName.none}, and one with ${PersistenceName['aof-always']}; the levels on one pair of servers, appends and probes on a fresh pair.`,
    `* server-everything ${peers.everything.version}: the store class of ${peers.everything.file}, one per session (it is its own class, not the SDK's InMemoryEventStore: a replay sends every later event of the session, of any stream, and returns the last id sent instead of a stream id).`,
    `peers: ${peers.seconds.toFixed(0)} s, from before the first server to the end (their levels ran inside that server's run)`,
  );
  return out.join('\n');
}
