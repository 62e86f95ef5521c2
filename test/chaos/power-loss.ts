/**
 * Power-loss accounting (the `nats_power_loss` fault): what the log tap held
 * as acknowledged in a window before every NATS node was SIGKILLed, compared
 * position by position with what the log holds after the restart, and then
 * how each lost event ended for the clients that had it. Pure functions; the
 * tap (`log-tap.ts`) feeds them, the checker and the report use them.
 */
import { decodeEventId } from '@tether/protocol';
import type { StreamReport } from './checker.js';
import type { LogRecord } from './log-tap.js';
import type { Exchange } from './record.js';
import { bump } from './util.js';

/** A message at one position: a log event of `key` (`<session>/<stream>`), or `key: undefined` for anything else stored there (an audit event). */
export interface Held {
  readonly key: string | undefined;
  readonly record: LogRecord;
}

/** One acknowledged event the log does not hold after a power loss. */
export interface LostEvent {
  readonly key: string;
  readonly record: LogRecord;
  /** `overwritten`: another message sits at its position now; `absent`: nothing does. */
  readonly how: 'overwritten' | 'absent';
}

/**
 * Purged, not lost: absent, and its session was closed (a close purges the
 * session's events) before the re-check read its position (`readAt`). The
 * time is the closed record's own (`touchedAtMs`, set by the close). A
 * session closed only after its position was read empty had its events
 * taken by the loss, so they count as lost; without a read time every
 * absent event counts as lost.
 */
export function isPurged(event: LostEvent, closedAt: ReadonlyMap<string, number>, readAt: number | undefined): boolean {
  const closed = closedAt.get(event.key.split('/')[0] ?? '');
  return event.how === 'absent' && closed !== undefined && readAt !== undefined && closed <= readAt;
}

/** When the re-check read `pos` empty (else when it ended): the time `isPurged` compares a close with. */
export function absentReadAt(account: PowerLossAccount, pos: number): number | undefined {
  return account.absentAt.get(pos) ?? account.checkedAt;
}

/** The tap's view just before a power loss. */
export interface LossMark {
  readonly at: number;
  /** Highest position the tap saw acknowledged (its consumer, or the leader's republish). */
  readonly lastPos: number;
  /** First position re-checked after the restart. */
  readonly fromPos: number;
}

/** What one power loss did to the acknowledged log events the tap held, in one partition of the log. */
export interface PowerLossAccount {
  /** The partition (its stream numbers the positions); 0 on an unpartitioned log. */
  readonly partition: number;
  readonly mark: LossMark;
  /** Log events the tap held in `[fromPos, lastPos]`. */
  acked: number;
  /** Of those, found again at their position, same stream, seq and bytes. */
  survived: number;
  lost: LostEvent[];
  /** Held positions not compared (the re-read did not get there in time): the account is partial when > 0. */
  unchecked: number;
  /** The partition stream's last position when the re-read began: below `mark.lastPos`, the tail was lost. */
  lastPosAfterRestart: number | undefined;
  /** When the re-read was compared (ms since epoch). */
  checkedAt: number | undefined;
  /**
   * Every position of the window the re-read found empty, with when that
   * read answered: held or not. An absent event's session closed by then was
   * purged (`isPurged`); one the tap never held is judged from the clients
   * that had it (`unheldGone`).
   */
  absentAt: Map<number, number>;
}

/**
 * Compares what was held in the window with what was read there after the
 * restart. `reread` maps a position to the message found there, or to
 * `null` when the log holds nothing at it (looked up one by one). Returns
 * the account's counts.
 */
export function compareWindow(held: ReadonlyMap<number, Held>, reread: ReadonlyMap<number, Held | null>): { survived: number; lost: LostEvent[]; unchecked: number } {
  let survived = 0;
  let unchecked = 0;
  const lost: LostEvent[] = [];
  for (const [pos, h] of held) {
    if (h.key === undefined) continue;
    const now = reread.get(pos);
    if (now === undefined) {
      unchecked += 1;
      continue;
    }
    if (now === null) {
      lost.push({ key: h.key, record: h.record, how: 'absent' });
      continue;
    }
    if (now.key === h.key && now.record.seq === h.record.seq && now.record.digest === h.record.digest && now.record.epoch === h.record.epoch) survived += 1;
    else lost.push({ key: h.key, record: h.record, how: 'overwritten' });
  }
  return { survived, lost, unchecked };
}

/**
 * The log events a re-read found that the tap's copy lacks
 * (`inCopy(key, pos)`): ones it never read, ones that replaced what it had,
 * and ones it knew only from the leader's republished copy. "Held" is not
 * "in the copy": an event held only as the leader's copy survives the
 * comparison and must still join the copy, or the copy keeps a hole the
 * checker reads as an event the log never held (finding 14).
 */
export function missingFromCopy(reread: ReadonlyMap<number, Held | null>, inCopy: (key: string, pos: number) => boolean): Array<{ readonly key: string; readonly record: LogRecord }> {
  const out: Array<{ readonly key: string; readonly record: LogRecord }> = [];
  for (const [pos, now] of reread) {
    if (now === null || now.key === undefined || inCopy(now.key, pos)) continue;
    out.push({ key: now.key, record: now.record });
  }
  return out;
}

/** The power-loss part of the report. */
export interface PowerLossReport {
  /** Power losses whose accounting ran (one account per partition each, with one mark time). */
  readonly losses: number;
  /** Acknowledged log events held in the windows before them, and how many of them were found again. */
  readonly acked: number;
  readonly survived: number;
  /** Lost: acknowledged, and not in the log after the restart (the session still open, or its close came after the loss). */
  readonly lost: number;
  /** Absent, and their session closed (purged) before the re-check: not counted as lost (see `isPurged`). */
  readonly purged: number;
  /** Not compared (a re-read that ran out of time). */
  readonly unchecked: number;
  /** Lost tails: restarts after which a partition stream ended before its last acknowledged position (counted per partition). */
  readonly shorterLogs: number;
  /**
   * Each lost event by how it ended for the clients: `not delivered` (no
   * client had it), else the class of the stream of every client that had
   * it (`complete` before the loss, `explicit <verdict>`, `open`,
   * `unfinished …`, or `violation <kinds>`: silent).
   */
  readonly lostByEnd: Readonly<Record<string, number>>;
  /** Lost events delivered to a client whose stream then ended silently (a violation): counted in the silent violations too. */
  readonly silent: number;
  readonly examples: readonly string[];
}

/**
 * Joins the accounts with what the clients saw: for each lost event, the
 * streams of the clients that had received it and how they ended.
 * `closedAt` holds when each closed session was closed (see `isPurged`).
 */
export function powerLossReport(
  accounts: readonly PowerLossAccount[],
  exchanges: readonly Exchange[],
  streams: readonly StreamReport[],
  closedAt: ReadonlyMap<string, number>,
  unheld: readonly UnheldGone[] = [],
): PowerLossReport {
  // Which client got which event: by position, with the digest (a position can hold another event after a loss)
  // and the epoch (one per session: it tells apart the same position in two partitions).
  const delivered = new Map<number, Array<{ client: string; digest: string; epoch: string }>>();
  for (const ex of exchanges) {
    for (const e of ex.events) {
      if (e.id === undefined || e.ack !== undefined) continue;
      const id = decodeEventId(e.id);
      if (!id.ok) continue;
      const list = delivered.get(id.value.pos) ?? [];
      if (list.length === 0) delivered.set(id.value.pos, list);
      list.push({ client: ex.client, digest: e.digest, epoch: id.value.epoch });
    }
  }
  const byKey = new Map<string, StreamReport[]>();
  for (const s of streams) {
    const list = byKey.get(s.key) ?? [];
    if (list.length === 0) byKey.set(s.key, list);
    list.push(s);
  }
  const lostByEnd: Record<string, number> = {};
  const examples: string[] = [];
  let acked = 0;
  let survived = 0;
  let lost = 0;
  let purged = 0;
  let unchecked = 0;
  let shorterLogs = 0;
  let silent = 0;
  // Every event a loss took from the window, held by the tap or only by clients (`unheldGone`), with when its position was read empty.
  const judged: Array<{ event: LostEvent; readAt: number | undefined; unheld: boolean }> = [];
  for (const account of accounts) {
    acked += account.acked;
    survived += account.survived;
    unchecked += account.unchecked;
    if (account.lastPosAfterRestart !== undefined && account.lastPosAfterRestart < account.mark.lastPos) shorterLogs += 1;
    for (const event of account.lost) judged.push({ event, readAt: absentReadAt(account, event.record.pos), unheld: false });
  }
  for (const u of unheld) judged.push({ event: { key: u.key, record: u.record, how: 'absent' }, readAt: u.readAt, unheld: true });
  for (const { event, readAt, unheld: onlyClients } of judged) {
    if (isPurged(event, closedAt, readAt)) {
      purged += 1;
      continue;
    }
    lost += 1;
    const r0 = event.record;
    const had = (delivered.get(r0.pos) ?? []).filter((d) => d.epoch === r0.epoch && (r0.kind === 'prime' || d.digest === r0.digest));
    const clients = had.length === 0 ? undefined : new Set(had.map((d) => d.client));
    const reports = (byKey.get(event.key) ?? []).filter((s) => clients?.has(s.client) === true);
    if (reports.length === 0) bump(lostByEnd, 'not delivered to any client');
    for (const r of reports) {
      const end = r.cls === 'explicit' || r.cls === 'unfinished' || r.cls === 'violation' ? `${r.cls} ${r.reason ?? '?'}` : r.cls;
      bump(lostByEnd, end);
      if (r.cls === 'violation') silent += 1;
    }
    const seenBy = onlyClients ? ', never seen by the tap' : '';
    if (examples.length < 20) examples.push(`${event.key} seq ${event.record.seq} pos ${event.record.pos} (${event.record.kind}, ${event.how}${seenBy}), delivered to ${clients === undefined ? 'no client' : [...clients].join(', ')}`);
  }
  return { losses: new Set(accounts.map((a) => a.mark.at)).size, acked, survived, lost, purged, unchecked, shorterLogs, lostByEnd, silent, examples };
}

/**
 * An event a client was delivered at a position a power loss's re-read then
 * found empty, which the tap never held (written and served while the nodes
 * came back, and gone before the tap read that far). The tap's copy has no
 * record of it, so without this the checker would call it `not_in_log`
 * whether a close purged it or the loss took it.
 */
export interface UnheldGone {
  readonly partition: number;
  readonly key: string;
  /** Built from the delivered event (its id and payload digest): the only copy anyone saw. */
  readonly record: LogRecord;
  readonly readAt: number;
}

/**
 * The delivered events at positions a re-read found empty that no copy of
 * the tap holds (`tapHolds(partition, pos)`), one per position.
 * `partitionOfSession` maps a session to its partition.
 */
export function unheldGone(
  accounts: readonly PowerLossAccount[],
  exchanges: readonly Exchange[],
  partitionOfSession: (session: string) => number,
  tapHolds: (partition: number, pos: number) => boolean,
): UnheldGone[] {
  const gone = new Map<number, Map<number, number>>();
  for (const a of accounts) {
    const map = gone.get(a.partition) ?? new Map<number, number>();
    if (map.size === 0) gone.set(a.partition, map);
    for (const [pos, at] of a.absentAt) map.set(pos, Math.max(at, map.get(pos) ?? 0));
  }
  const out = new Map<string, UnheldGone>();
  for (const ex of exchanges) {
    const session = ex.sessionId ?? ex.answeredSession;
    if (session === undefined) continue;
    const partition = partitionOfSession(session);
    const map = gone.get(partition);
    if (map === undefined) continue;
    for (const e of ex.events) {
      if (e.id === undefined || e.ack !== undefined) continue;
      const id = decodeEventId(e.id);
      if (!id.ok) continue;
      const readAt = map.get(id.value.pos);
      if (readAt === undefined || tapHolds(partition, id.value.pos)) continue;
      const at = `${partition}/${id.value.pos}`;
      if (out.has(at)) continue;
      out.set(at, {
        partition,
        key: `${session}/${id.value.stream}`,
        readAt,
        record: { pos: id.value.pos, seq: id.value.seq, prev: 0, epoch: id.value.epoch, kind: e.meaning.t === 'empty' ? 'prime' : 'event', digest: e.digest, endReason: undefined, upstreamId: undefined, writer: '', response: undefined },
      });
    }
  }
  return [...out.values()];
}
