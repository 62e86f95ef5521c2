/**
 * The checker's own copy of the log: a reader that follows the whole log
 * stream from its first message (an ephemeral pull consumer, rebuilt from the
 * last position it saw whenever a node dies under it), so events of sessions
 * that were later terminated and purged can still be compared with what
 * clients received. It keeps digests, never payloads.
 *
 * A consumer reads one replica's store, which may lag the leader's. So the
 * tap also listens to the stream's republish (`<prefix>.live.>`), which the
 * stream leader sends as it stores each message with its own sequence: it
 * holds what the consumer had not read when a power loss struck, and where
 * both copies hold an event at different positions the leader's wins and the
 * disagreement is counted (`replicaMismatches`; replicas that numbered events
 * differently were a defect of the old 2.9 floor, so any count is a finding).
 *
 * A partitioned log (`--log-partitions N`) is N streams, each numbering its
 * own positions: one partition tap per stream (`startPartitionTap`), each
 * keeping only its own sessions' republished copies (the live subjects carry
 * no partition, and `Nats-Sequence` is the partition stream's), combined by
 * `startLogTap` into one copy. A session lives in one partition, so the
 * streams' keys never collide; positions do, and stay per partition.
 */
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager, StoredMsg } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { LogHeader } from '@tether/protocol';
import { createSubjects, partitionOf } from '@tether/session-log';
import { compareWindow, missingFromCopy } from './power-loss.js';
import type { Held, LossMark, PowerLossAccount } from './power-loss.js';
import { digest, meaningOf, sleep } from './util.js';

/** One stored log message, as the tap read it. */
export interface LogRecord {
  /** JetStream sequence: the `pos` of the event id. */
  readonly pos: number;
  readonly seq: number;
  readonly prev: number;
  readonly epoch: string;
  readonly kind: string;
  readonly digest: string;
  readonly endReason: string | undefined;
  readonly upstreamId: string | undefined;
  /** `Tether-Writer`: the process incarnation that appended it ('' for none, e.g. a session's first GET prime). */
  readonly writer?: string | undefined;
  /** For a JSON-RPC response: its id (JSON) and whether it is a result. */
  readonly response?: { readonly id: string; readonly ok: boolean } | undefined;
}

/** What a tap counts. `replicaMismatches`: events the consumer's replica numbered differently from the leader (replaced by the leader's). */
export interface TapStats {
  /** Messages read. */
  messages: number;
  /** How many times the reader had to be rebuilt. */
  rebuilds: number;
  holesFilled: number;
  holesPurged: number;
  leaderCopies: number;
  replicaMismatches: number;
  /** Positions a power loss's re-read found empty that the stream's leader held when the tap stopped (a replica still recovering answered the re-read). */
  absentFoundLater: number;
}

/** The tap of one partition stream (the whole log when it has one). */
export interface PartitionTap {
  /** This tap's partition (0 on an unpartitioned log). */
  readonly partition: number;
  /** Stored messages per `<session>/<stream>`, in log order. */
  readonly streams: ReadonlyMap<string, readonly LogRecord[]>;
  /** Its counts, and `lastPos`: the highest position its consumer read. */
  readonly stats: TapStats & { lastPos: number };
  /** Positions the tap missed and found gone when it looked them up (purged with their session). */
  readonly purged: ReadonlySet<number>;
  /** One account per power loss (`markBeforeLoss`, then `resyncAfterLoss`). */
  readonly losses: readonly PowerLossAccount[];
  /**
   * Just before every node is SIGKILLed: the highest position the tap saw
   * acknowledged (its consumer or the leader's republish), and where the
   * window to re-check starts (`windowMs` back, after the previous mark, at
   * most `maxPositions` back). `at`: the mark's time (default now).
   */
  markBeforeLoss(windowMs: number, maxPositions: number, at?: number): LossMark;
  /**
   * After every node is back: re-reads the log from the mark's window start,
   * compares each position with what the tap held there, puts what the log
   * holds now in its copy, and returns the account. Positions the re-read
   * skipped are looked up one by one; what `timeoutMs` leaves uncompared is
   * counted `unchecked`.
   */
  resyncAfterLoss(mark: LossMark, timeoutMs: number): Promise<PowerLossAccount>;
  /** Takes an event the log lost (absent after a power loss, its session still open) out of the tap's copy. */
  drop(key: string, record: LogRecord): void;
  /** Waits (bounded) until the tap has read everything stored so far, then stops. */
  stop(timeoutMs?: number): Promise<void>;
}

/**
 * The checker's copy of the whole log: one partition tap per partition
 * stream, combined. What is per position stays per partition (`purged`, the
 * marks, each account's `partition`).
 */
export interface LogTap {
  /** The log's partition count. */
  readonly partitions: number;
  /** Stored messages per `<session>/<stream>`, in log order (every partition's; a session is in one). */
  readonly streams: ReadonlyMap<string, readonly LogRecord[]>;
  /** Every partition tap's counts, summed. */
  readonly stats: Readonly<TapStats>;
  /** Each partition tap's counts, in partition order. */
  readonly byPartition: readonly Readonly<TapStats>[];
  /** Per partition (index `partitionOf(session, partitions)`): positions missed and found gone (purged with their session). */
  readonly purged: readonly ReadonlySet<number>[];
  /** One account per power loss and partition (each account names its partition). */
  readonly losses: readonly PowerLossAccount[];
  /** Every partition tap's mark (`PartitionTap.markBeforeLoss`), one time for all, in partition order. */
  markBeforeLoss(windowMs: number, maxPositions: number): readonly LossMark[];
  /** Every partition's re-check at once (`PartitionTap.resyncAfterLoss`): one account per partition. */
  resyncAfterLoss(marks: readonly LossMark[], timeoutMs: number): Promise<PowerLossAccount[]>;
  /** Takes an event the log lost out of its partition's copy. */
  drop(key: string, record: LogRecord): void;
  /** Stops every partition tap (each waits, bounded, until it has read everything stored so far). */
  stop(timeoutMs?: number): Promise<void>;
}

const NANOS_PER_S = 1_000_000_000;
const MAX_HOLES = 100_000;

/** Positions a power loss's re-check asks for in one batch direct get. */
const RECHECK_BATCH = 500;

export interface LogTapOptions {
  /** The log's subject prefix (`namespaceNames(ns).subjectPrefix`). Default `tether`. */
  readonly subjectPrefix?: string;
}

export interface PartitionTapOptions extends LogTapOptions {
  /** The partition this tap reads (its stream is that partition's). Default 0. */
  readonly partition?: number;
  /** The log's partition count. Default 1: the unpartitioned log. */
  readonly partitions?: number;
}

/**
 * The checker's copy of a log on `streamNames` (partition k's stream at
 * index k; one name for an unpartitioned log): a partition tap per stream,
 * combined.
 */
export async function startLogTap(servers: readonly string[], streamNames: readonly string[], options: LogTapOptions = {}): Promise<LogTap> {
  const partitions = streamNames.length;
  if (partitions < 1) throw new Error('startLogTap: no log stream named');
  const taps: PartitionTap[] = [];
  try {
    for (const [partition, streamName] of streamNames.entries()) taps.push(await startPartitionTap(servers, streamName, { ...options, partition, partitions }));
  } catch (err) {
    await Promise.all(taps.map((t) => t.stop(0).catch(() => undefined)));
    throw err;
  }
  const tapOf = (key: string): PartitionTap => taps[partitionOf(key.split('/')[0] ?? '', partitions)]!;
  return {
    partitions,
    get streams() {
      // Merged when asked (the checker asks once, after stop): partition taps add streams as they read.
      if (taps.length === 1) return taps[0]!.streams;
      const merged = new Map<string, readonly LogRecord[]>();
      for (const tap of taps) for (const [key, list] of tap.streams) merged.set(key, list);
      return merged;
    },
    get stats() {
      const sum: TapStats = { messages: 0, rebuilds: 0, holesFilled: 0, holesPurged: 0, leaderCopies: 0, replicaMismatches: 0, absentFoundLater: 0 };
      for (const { stats } of taps) for (const name of Object.keys(sum) as Array<keyof TapStats>) sum[name] += stats[name];
      return sum;
    },
    byPartition: taps.map((t) => t.stats),
    purged: taps.map((t) => t.purged),
    get losses() {
      return taps.flatMap((t) => t.losses);
    },
    markBeforeLoss(windowMs, maxPositions) {
      const at = Date.now();
      return taps.map((t) => t.markBeforeLoss(windowMs, maxPositions, at));
    },
    async resyncAfterLoss(marks, timeoutMs) {
      if (marks.length !== taps.length) throw new Error(`resyncAfterLoss: ${marks.length} marks for ${taps.length} partitions`);
      return Promise.all(taps.map((t, i) => t.resyncAfterLoss(marks[i]!, timeoutMs)));
    },
    drop(key, record) {
      tapOf(key).drop(key, record);
    },
    async stop(timeoutMs) {
      await Promise.all(taps.map((t) => t.stop(timeoutMs)));
    },
  };
}

/** The tap of one partition stream (`options.partition` of `options.partitions`; the whole log by default). */
export async function startPartitionTap(servers: readonly string[], streamName: string, options: PartitionTapOptions = {}): Promise<PartitionTap> {
  const subjectPrefix = options.subjectPrefix ?? 'tether';
  const partition = options.partition ?? 0;
  const partitions = options.partitions ?? 1;
  const subjects = createSubjects(subjectPrefix, partitions);
  const nc: NatsConnection = await connect({ servers: [...servers], maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const jsm: JetStreamManager = await jetstreamManager(nc, { timeout: 5_000 });
  const js = jetstream(nc, { timeout: 5_000 });
  const streams = new Map<string, LogRecord[]>();
  const stats = { messages: 0, rebuilds: 0, lastPos: 0, holesFilled: 0, holesPurged: 0, leaderCopies: 0, replicaMismatches: 0, absentFoundLater: 0 };
  // `<prefix>.log.` (`<prefix>.log.<k>.` on a partitioned log): what precedes `<session>.<stream>`.
  const prefix = subjects.partitionLogWildcard(partition).slice(0, -1);
  // The leader's copy: `<session>/<stream>` → seq → record (pos = the leader's sequence).
  const leader = new Map<string, Map<number, LogRecord>>();
  const livePrefix = subjects.liveWildcard.slice(0, -1);
  const liveSub = nc.subscribe(subjects.liveWildcard, {
    callback: (err, msg) => {
      if (err !== null || stopped) return;
      const pos = Number(msg.headers?.get('Nats-Sequence'));
      const [session, stream] = msg.subject.slice(livePrefix.length).split('.');
      if (!Number.isSafeInteger(pos) || session === undefined || stream === undefined) return;
      // Every partition republishes into one live subject space; `Nats-Sequence` is this partition's only for its own sessions.
      if (partitions > 1 && partitionOf(session, partitions) !== partition) return;
      const record = toRecord(pos, msg.headers, msg.data);
      const key = `${session}/${stream}`;
      leaderMaxPos = Math.max(leaderMaxPos, pos);
      const bySeq = leader.get(key) ?? new Map<number, LogRecord>();
      if (bySeq.size === 0) leader.set(key, bySeq);
      bySeq.set(record.seq, record);
      stats.leaderCopies += 1;
    },
  });
  // The server holds the interest before the tap is returned: an event appended right after
  // must be republished to it (a loaded clean-clone run missed 1 of 16 without this).
  await nc.flush();
  let stopped = false;
  let caughtUpAt = 0;
  const holes: number[] = [];
  const purged = new Set<number>();
  const stopSignal = new AbortController();
  /** Every position recorded: a message is never recorded twice (re-reads, holes filled late). */
  const recorded = new Set<number>();
  const losses: PowerLossAccount[] = [];
  let leaderMaxPos = 0;
  /** (time, highest position seen), about once a second: where a loss window starts. */
  const samples: Array<{ at: number; pos: number }> = [];
  const sampler = setInterval(() => {
    samples.push({ at: Date.now(), pos: Math.max(stats.lastPos, leaderMaxPos) });
    if (samples.length > 900) samples.splice(0, samples.length - 900);
  }, 1_000);
  sampler.unref();
  let lastMarkPos = 0;
  /** A re-read after a power loss: the consumer restarts at `from`, and what it reads up to `to` is collected, not recorded. */
  let resync: { readonly from: number; readonly to: number; readonly reread: Map<number, Held>; started: boolean; reached: boolean } | undefined;
  let rebuildFrom: number | undefined;

  const keyOf = (subject: string): string | undefined => {
    if (!subject.startsWith(prefix)) return undefined;
    const [session, stream] = subject.slice(prefix.length).split('.');
    return session === undefined || stream === undefined ? undefined : `${session}/${stream}`;
  };
  const drop = (key: string, r: LogRecord): void => {
    const list = streams.get(key);
    const i = list?.indexOf(r) ?? -1;
    if (list !== undefined && i >= 0) list.splice(i, 1);
    const copy = leader.get(key)?.get(r.seq);
    if (copy?.pos === r.pos) leader.get(key)?.delete(r.seq);
  };
  const push = (key: string, r: LogRecord): void => {
    const list = streams.get(key) ?? [];
    if (list.length === 0) streams.set(key, list);
    list.push(r);
    recorded.add(r.pos);
  };

  const record = (subject: string, pos: number, headers: { get(name: string): string } | undefined, data: Uint8Array): void => {
    if (!stopped) stats.lastPos = Math.max(stats.lastPos, pos);
    const key = keyOf(subject);
    const r = resync;
    if (r !== undefined && pos >= r.from && pos <= r.to) {
      r.reread.set(pos, { key, record: toRecord(pos, headers, data) });
      if (pos === r.to) r.reached = true;
      return;
    }
    if (r !== undefined && pos > r.to) r.reached = true;
    // A rebuilt reader starts after the last position it saw, a re-read at an older one: never twice the same message.
    if (recorded.has(pos)) return;
    stats.messages += 1;
    if (key === undefined) {
      recorded.add(pos);
      return;
    }
    push(key, toRecord(pos, headers, data));
  };

  /**
   * Every position a power loss's re-read found empty, asked of the stream's
   * leader again once the run is over and every node has caught up. A batch
   * direct get is answered by any replica, and one still recovering after
   * the restart can lack what the log holds: such a position is in the log,
   * so it leaves the account (a held event found again survived; one the tap
   * never held joins its copy). What stays empty is judged by the report:
   * purged by a close, or lost (finding 14).
   */
  const recheckAbsent = async (deadline: number): Promise<void> => {
    const queue = losses.flatMap((account) => [...account.absentAt.keys()].map((pos) => ({ account, pos })));
    const worker = async (): Promise<void> => {
      for (let item = queue.pop(); item !== undefined && Date.now() < deadline; item = queue.pop()) {
        const { account, pos } = item;
        let msg: StoredMsg | null;
        try {
          msg = await jsm.streams.getMessage(streamName, { seq: pos });
        } catch {
          continue;
        }
        if (msg === null) continue;
        account.absentAt.delete(pos);
        stats.absentFoundLater += 1;
        const now: Held = { key: keyOf(msg.subject), record: toRecord(msg.seq, msg.header, msg.data) };
        const i = account.lost.findIndex((l) => l.how === 'absent' && l.record.pos === pos);
        const was = i === -1 ? undefined : account.lost[i]!;
        if (was !== undefined && was.key === now.key && was.record.seq === now.record.seq && was.record.digest === now.record.digest && was.record.epoch === now.record.epoch) {
          account.lost.splice(i, 1);
          account.survived += 1;
        }
        if (now.key !== undefined && !recorded.has(pos) && !streams.get(now.key)?.some((r) => r.pos === pos)) {
          stats.messages += 1;
          push(now.key, now.record);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, () => worker()));
  };

  const loop = (async () => {
    while (!stopped) {
      let name: string | undefined;
      if (rebuildFrom !== undefined) {
        // A re-read after a power loss: start over at the window's first position.
        stats.lastPos = rebuildFrom - 1;
        rebuildFrom = undefined;
        if (resync !== undefined) resync.started = true;
      }
      try {
        const info = await jsm.consumers.add(streamName, {
          deliver_policy: stats.lastPos === 0 ? DeliverPolicy.All : DeliverPolicy.StartSequence,
          ...(stats.lastPos === 0 ? {} : { opt_start_seq: stats.lastPos + 1 }),
          ack_policy: AckPolicy.None,
          mem_storage: true,
          num_replicas: 1,
          inactive_threshold: 30 * NANOS_PER_S,
        });
        name = info.name;
        const consumer = js.consumers.getConsumerFromInfo(info);
        while (!stopped && rebuildFrom === undefined) {
          const batch = await consumer.fetch({ max_messages: 1_000, expires: 1_000 });
          let got = 0;
          let pending = -1;
          for await (const msg of batch) {
            got += 1;
            pending = msg.info.pending;
            if (msg.seq <= stats.lastPos) continue;
            // Deliveries of an unacknowledged consumer are lost while our connection
            // moves to another node, and positions of purged sessions are gone: holes
            // are looked up one by one when the tap stops.
            for (let pos = stats.lastPos + 1; pos < msg.seq && holes.length < MAX_HOLES; pos += 1) if (!recorded.has(pos) && (resync === undefined || pos > resync.to)) holes.push(pos);
            record(msg.subject, msg.seq, msg.headers, msg.data);
          }
          // Nothing more stored than what we hold (right now): the tap is caught up.
          if (got === 0 || pending === 0) {
            caughtUpAt = Date.now();
            // A re-read that has read all there is: the log ends before (or at) the mark.
            if (resync?.started === true && pending === 0) resync.reached = true;
          }
        }
      } catch {
        if (stopped) break;
        stats.rebuilds += 1;
        await sleep(300, stopSignal.signal);
      } finally {
        if (name !== undefined) jsm.consumers.delete(streamName, name).catch(() => undefined);
      }
    }
  })();

  return {
    partition,
    streams,
    stats,
    purged,
    losses,
    markBeforeLoss(windowMs, maxPositions, at = Date.now()) {
      const lastPos = Math.max(stats.lastPos, leaderMaxPos);
      const back = [...samples].reverse().find((x) => x.at <= at - windowMs)?.pos ?? 0;
      const fromPos = Math.max(1, lastMarkPos + 1, back + 1, lastPos - maxPositions + 1);
      lastMarkPos = lastPos;
      return { at, lastPos, fromPos };
    },
    drop,
    async resyncAfterLoss(mark, timeoutMs) {
      const until = Date.now() + timeoutMs;
      // What was acknowledged in the window: the consumer's copy, and the leader's
      // republished copy of what the consumer had not read before the kill.
      const held = new Map<number, Held>();
      for (const [key, list] of streams) for (const r of list) if (r.pos >= mark.fromPos && r.pos <= mark.lastPos) held.set(r.pos, { key, record: r });
      for (const [key, bySeq] of leader) for (const r of bySeq.values()) if (r.pos >= mark.fromPos && r.pos <= mark.lastPos && !held.has(r.pos)) held.set(r.pos, { key, record: r });
      const account: PowerLossAccount = { partition, mark, acked: 0, survived: 0, lost: [], unchecked: 0, lastPosAfterRestart: undefined, checkedAt: undefined, absentAt: new Map() };
      for (const h of held.values()) if (h.key !== undefined) account.acked += 1;
      losses.push(account);
      if (mark.lastPos < mark.fromPos) return account;
      const r = { from: mark.fromPos, to: mark.lastPos, reread: new Map<number, Held>(), started: false, reached: false };
      resync = r;
      rebuildFrom = mark.fromPos;
      // Right after a restart a partition stream has no leader yet and its info fails: asked
      // again until one answers (on 8 partitions every first ask failed, finding 14).
      while (account.lastPosAfterRestart === undefined && Date.now() < until && !stopped) {
        try {
          account.lastPosAfterRestart = (await jsm.streams.info(streamName)).state.last_seq;
        } catch {
          await sleep(250);
        }
      }
      // The window is read in batch direct gets at once (the consumer re-read alone left most
      // of a large window uncompared within the timeout); the consumer's copy fills what they missed.
      const readAt = new Map<number, number>();
      const batched = await readWindowInBatches(jsm, streamName, keyOf, mark.fromPos, mark.lastPos, until, readAt);
      const unread = [...held.keys()].filter((pos) => !batched.has(pos));
      while (!r.reached && Date.now() < until && !stopped && unread.some((pos) => !r.reread.has(pos))) await sleep(100);
      if (resync === r) resync = undefined;
      // Positions neither read delivered (a delivery lost while the consumer's node
      // changed, or nothing there): asked of the stream one by one.
      const found = new Map<number, Held | null>(r.reread);
      for (const [pos, h] of batched) found.set(pos, h);
      for (const pos of held.keys()) {
        if (found.has(pos) || Date.now() >= until) continue;
        try {
          const msg = await jsm.streams.getMessage(streamName, { seq: pos });
          found.set(pos, msg === null ? null : { key: keyOf(msg.subject), record: toRecord(msg.seq, msg.header, msg.data) });
          readAt.set(pos, Date.now());
        } catch (err) {
          if (/no message found|not found/i.test(String((err as Error).message))) {
            found.set(pos, null);
            readAt.set(pos, Date.now());
          }
        }
      }
      account.checkedAt = Date.now();
      for (const [pos, h] of found) if (h === null) account.absentAt.set(pos, readAt.get(pos) ?? account.checkedAt);
      const result = compareWindow(held, found);
      account.survived = result.survived;
      account.lost = result.lost;
      account.unchecked = result.unchecked;
      // The tap's copy follows the log as it is now: what another message replaced goes out now, and
      // every event the log holds in the window that the copy lacks comes in (held only as the leader's
      // copy, or never read). An absent event stays until the run's end tells a loss (`drop`) from a purge.
      for (const l of result.lost) if (l.how === 'overwritten') drop(l.key, l.record);
      for (const m of missingFromCopy(found, (key, pos) => streams.get(key)?.some((x) => x.pos === pos) === true)) {
        stats.messages += 1;
        push(m.key, m.record);
      }
      for (const [pos, h] of found) if (h !== null) recorded.add(pos);
      return account;
    },
    async stop(timeoutMs = 15_000) {
      // Once: the harness stops the tap again on its way out, after the report.
      if (stopped) return;
      const askedAt = Date.now();
      while (caughtUpAt <= askedAt && Date.now() < askedAt + timeoutMs) await sleep(100);
      stopped = true;
      clearInterval(sampler);
      stopSignal.abort();
      await Promise.race([loop, sleep(3_000)]);
      for (const pos of holes) {
        if (Date.now() > askedAt + timeoutMs * 2) break;
        try {
          const msg = await jsm.streams.getMessage(streamName, { seq: pos });
          if (msg === null) {
            stats.holesPurged += 1;
            purged.add(pos);
            continue;
          }
          if (recorded.has(msg.seq)) continue;
          record(msg.subject, msg.seq, msg.header, msg.data);
          stats.holesFilled += 1;
        } catch (err) {
          // "no message found": purged. Anything else leaves the position unknown, which is the same for the checker.
          stats.holesPurged += 1;
          purged.add(pos);
          void err;
        }
      }
      holes.length = 0;
      await recheckAbsent(askedAt + timeoutMs * 3);
      liveSub.unsubscribe();
      // The same event (seq, chain link, bytes) at another position in the
      // replica than in the leader: the replica's numbering is off, the leader's wins.
      // (Two different events at one seq are left as read: a fork the checker reports.)
      for (const [key, list] of streams) {
        const bySeq = leader.get(key);
        if (bySeq === undefined) continue;
        for (const [i, r] of list.entries()) {
          const l = bySeq.get(r.seq);
          if (l !== undefined && l.pos !== r.pos && l.digest === r.digest && l.prev === r.prev && l.epoch === r.epoch) {
            stats.replicaMismatches += 1;
            list[i] = l;
          }
        }
      }
      for (const list of streams.values()) list.sort((a, b) => a.pos - b.pos);
      await nc.close().catch(() => undefined);
    },
  };
}

/**
 * Positions `from`..`to` as the log holds them now, read in batch direct
 * gets until `until`. One answer comes from one replica, which holds a
 * prefix of the log: a position between two messages it returned holds
 * nothing (`null`: purged or lost), and positions past the last one it
 * returned are asked again (another replica may answer). A position found
 * empty on a replica that lags would be counted lost: a loud error, never a
 * hidden loss. What the batches did not reach is left out of the map.
 * `readAt`, when given, gets when each position's batch answered (a close
 * before that explains an empty position). Exported for its test.
 */
export async function readWindowInBatches(
  jsm: JetStreamManager,
  streamName: string,
  keyOf: (subject: string) => string | undefined,
  from: number,
  to: number,
  until: number,
  readAt?: Map<number, number>,
): Promise<Map<number, Held | null>> {
  const found = new Map<number, Held | null>();
  let next = from;
  for (let fruitless = 0; next <= to && Date.now() < until && fruitless < 3; ) {
    let last = next - 1;
    try {
      const answer = await jsm.direct.getBatch(streamName, { seq: next, batch: Math.min(RECHECK_BATCH, to - next + 1) });
      for await (const msg of answer) {
        const end = Math.min(msg.seq - 1, to);
        for (let pos = last + 1; pos <= end; pos += 1) found.set(pos, null);
        last = end;
        if (msg.seq > to) break;
        found.set(msg.seq, { key: keyOf(msg.subject), record: toRecord(msg.seq, msg.header, msg.data) });
        last = msg.seq;
      }
    } catch {
      // No answer (a node still recovering): asked again, then left to the one-by-one reads.
    }
    if (readAt !== undefined) for (let pos = next, at = Date.now(); pos <= last; pos += 1) readAt.set(pos, at);
    if (last < next) {
      fruitless += 1;
      await sleep(200);
      continue;
    }
    fruitless = 0;
    next = last + 1;
  }
  return found;
}

function toRecord(pos: number, headers: { get(name: string): string } | undefined, data: Uint8Array): LogRecord {
  const h = (name: string): string => headers?.get(name) ?? '';
  return {
    pos,
    seq: Number(h(LogHeader.seq)),
    prev: Number(h(LogHeader.prev)),
    epoch: h(LogHeader.epoch),
    kind: h(LogHeader.kind),
    digest: digest(data),
    endReason: h(LogHeader.endReason) || undefined,
    upstreamId: h(LogHeader.upstreamId) || undefined,
    writer: h(LogHeader.writer),
    response: responseOf(data),
  };
}

/** The id and kind of a JSON-RPC response payload; undefined for anything else (kept small: only responses). */
export function responseOf(payload: Uint8Array): LogRecord['response'] {
  if (payload.length === 0 || payload.length > 4_096) return undefined;
  const m = meaningOf(Buffer.from(payload).toString('utf8'));
  return m.t === 'response' ? { id: m.id, ok: m.ok } : undefined;
}
