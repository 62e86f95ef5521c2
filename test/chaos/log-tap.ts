/**
 * The checker's own copy of the log: a reader that follows the whole log
 * stream from its first message (an ephemeral pull consumer, rebuilt from the
 * last position it saw whenever a node dies under it), so events of sessions
 * that were later terminated and purged can still be compared with what
 * clients received. It keeps digests, never payloads.
 *
 * A consumer reads one replica's store, and under repeated leader kills
 * nats-server 2.9.10 replicas can disagree on sequence numbers. So the tap
 * also listens to the stream's republish (`<prefix>.live.>`), which the
 * stream leader sends as it stores each message with its own sequence: where
 * both copies hold an event and disagree, the leader's wins, and the
 * disagreement is counted (`replicaMismatches`).
 */
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager } from '@nats-io/jetstream';
import type { JetStreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { LogHeader } from '@tether/protocol';
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
  /** For a JSON-RPC response: its id (JSON) and whether it is a result. */
  readonly response?: { readonly id: string; readonly ok: boolean } | undefined;
}

export interface LogTap {
  /** Stored messages per `<session>/<stream>`, in log order. */
  readonly streams: ReadonlyMap<string, readonly LogRecord[]>;
  /** Messages read, and how many times the reader had to be rebuilt. */
  /** `replicaMismatches`: events the consumer's replica numbered differently from the leader (replaced by the leader's). */
  readonly stats: { messages: number; rebuilds: number; lastPos: number; holesFilled: number; holesPurged: number; leaderCopies: number; replicaMismatches: number };
  /** Positions the tap missed and found gone when it looked them up (purged with their session). */
  readonly purged: ReadonlySet<number>;
  /** Waits (bounded) until the tap has read everything stored so far, then stops. */
  stop(timeoutMs?: number): Promise<void>;
}

const NANOS_PER_S = 1_000_000_000;
const MAX_HOLES = 100_000;

export async function startLogTap(servers: readonly string[], streamName: string, subjectPrefix = 'tether'): Promise<LogTap> {
  const nc: NatsConnection = await connect({ servers: [...servers], maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  const jsm: JetStreamManager = await jetstreamManager(nc, { timeout: 5_000 });
  const js = jetstream(nc, { timeout: 5_000 });
  const streams = new Map<string, LogRecord[]>();
  const stats = { messages: 0, rebuilds: 0, lastPos: 0, holesFilled: 0, holesPurged: 0, leaderCopies: 0, replicaMismatches: 0 };
  const prefix = `${subjectPrefix}.log.`;
  // The leader's copy: `<session>/<stream>` → seq → record (pos = the leader's sequence).
  const leader = new Map<string, Map<number, LogRecord>>();
  const livePrefix = `${subjectPrefix}.live.`;
  const liveSub = nc.subscribe(`${livePrefix}>`, {
    callback: (err, msg) => {
      if (err !== null || stopped) return;
      const pos = Number(msg.headers?.get('Nats-Sequence'));
      const [session, stream] = msg.subject.slice(livePrefix.length).split('.');
      if (!Number.isSafeInteger(pos) || session === undefined || stream === undefined) return;
      const record = toRecord(pos, msg.headers, msg.data);
      const key = `${session}/${stream}`;
      const bySeq = leader.get(key) ?? new Map<number, LogRecord>();
      if (bySeq.size === 0) leader.set(key, bySeq);
      bySeq.set(record.seq, record);
      stats.leaderCopies += 1;
    },
  });
  let stopped = false;
  let caughtUpAt = 0;
  const holes: number[] = [];
  const purged = new Set<number>();
  const stopSignal = new AbortController();

  const record = (subject: string, pos: number, headers: { get(name: string): string } | undefined, data: Uint8Array): void => {
    if (!stopped) stats.lastPos = Math.max(stats.lastPos, pos);
    stats.messages += 1;
    if (!subject.startsWith(prefix)) return;
    const [session, stream] = subject.slice(prefix.length).split('.');
    if (session === undefined || stream === undefined) return;
    const key = `${session}/${stream}`;
    const list = streams.get(key) ?? [];
    if (list.length === 0) streams.set(key, list);
    // A rebuilt reader starts after the last position it saw: never twice the same message.
    list.push(toRecord(pos, headers, data));
  };

  const loop = (async () => {
    while (!stopped) {
      let name: string | undefined;
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
        while (!stopped) {
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
            for (let pos = stats.lastPos + 1; pos < msg.seq && holes.length < MAX_HOLES; pos += 1) holes.push(pos);
            record(msg.subject, msg.seq, msg.headers, msg.data);
          }
          // Nothing more stored than what we hold (right now): the tap is caught up.
          if (got === 0 || pending === 0) caughtUpAt = Date.now();
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
    streams,
    stats,
    purged,
    async stop(timeoutMs = 15_000) {
      const askedAt = Date.now();
      while (caughtUpAt <= askedAt && Date.now() < askedAt + timeoutMs) await sleep(100);
      stopped = true;
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
    response: responseOf(data),
  };
}

/** The id and kind of a JSON-RPC response payload; undefined for anything else (kept small: only responses). */
export function responseOf(payload: Uint8Array): LogRecord['response'] {
  if (payload.length === 0 || payload.length > 4_096) return undefined;
  const m = meaningOf(Buffer.from(payload).toString('utf8'));
  return m.t === 'response' ? { id: m.id, ok: m.ok } : undefined;
}
