import { jetstream, jetstreamManager, StorageType } from '@nats-io/jetstream';
import type { JetStreamClient } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import { EventKind, LogHeader, newEpoch } from '@tether/protocol';
import { principalDigest, SessionLog } from '@tether/session-log';
import { layoutNames } from './log-layouts.js';
import { progressPayload } from './payload.js';
import { median, progress } from './stats.js';

/** What is being appended: the session log, or raw JetStream publishes. */
export const Target = {
  tether: 'tether',
  /** `SessionLog.append` on a log of `partitions` > 1 streams (the result's `partitions`). */
  tetherPartitioned: 'tether-partitioned',
  raw: 'raw',
  rawShaped: 'raw-shaped',
} as const;
export type Target = (typeof Target)[keyof typeof Target];

export interface ThroughputResult {
  readonly target: Target;
  /** Partitions of the log appended to: 1 for every target but `tether-partitioned`. */
  readonly partitions: number;
  readonly concurrency: number;
  readonly count: number;
  /** Events per second of every round, in run order. */
  readonly roundsPerSec: readonly number[];
  readonly medianPerSec: number;
}

export interface ThroughputOptions {
  readonly url: string;
  readonly rounds: number;
  /** Events per measured run, by concurrency. */
  readonly counts: ReadonlyMap<number, number>;
  /**
   * Partition counts (> 1) of logs also appended to, each at
   * `partitionedConcurrency` only, beside the unpartitioned log. Default none.
   */
  readonly partitioned?: readonly number[];
  /** Default 64. */
  readonly partitionedConcurrency?: number;
}

/** One lane appends `n` events one after another. */
type Lane = (n: number) => Promise<void>;

/**
 * Append throughput of the session log beside raw publish-with-ack, at each
 * concurrency, alternating targets within a round so drift hits all alike.
 *
 * - `tether`: `SessionLog.append` (one stream per lane, one session per lane).
 * - `tether-partitioned`: the same on a log of N partitions (each of
 *   `options.partitioned`), at `partitionedConcurrency` streams only.
 * - `raw`: `js.publish(subject, payload)` awaiting the ack, one subject per
 *   lane, to a plain file stream.
 * - `raw-shaped` (diagnostic): raw publishes carrying what Tether adds on the
 *   wire (its four headers, a msg id, the expected-last-subject-sequence
 *   check) to a stream with the same republish rule. The gap between `raw`
 *   and `raw-shaped` is the server's cost of the log's guarantees; the gap
 *   between `raw-shaped` and `tether` is the client library's own cost.
 */
export async function measureThroughput(options: ThroughputOptions): Promise<ThroughputResult[]> {
  const nc = await connect({ servers: options.url, noAsyncTraces: true });
  const log = await SessionLog.create({ servers: options.url, ...layoutNames('tput', 1), maxMsgsPerStream: -1 });
  const partitionedAt = options.partitionedConcurrency ?? 64;
  const partitioned = new Map<number, SessionLog>();
  try {
    for (const n of options.partitioned ?? []) {
      if (n > 1) partitioned.set(n, await SessionLog.create({ servers: options.url, ...layoutNames('tput', n), partitions: n, maxMsgsPerStream: -1 }));
    }
    const jsm = await jetstreamManager(nc);
    await jsm.streams.add({ name: 'BENCH_RAW', subjects: ['raw.>'], storage: StorageType.File, num_replicas: 1 });
    await jsm.streams.add({
      name: 'BENCH_RAW_SHAPED',
      subjects: ['rawx.log.>'],
      storage: StorageType.File,
      num_replicas: 1,
      allow_direct: true,
      republish: { src: 'rawx.log.>', dest: 'rawx.live.>' },
    });
    const js = jetstream(nc);
    const concurrencies = [...options.counts.keys()];
    /** What runs at concurrency `c`: the three targets, and the partitioned logs at their concurrency. */
    const kinds = (c: number): { target: Target; partitions: number; log: SessionLog }[] => [
      ...[Target.raw, Target.rawShaped, Target.tether].map((target) => ({ target, partitions: 1, log })),
      ...(c === partitionedAt ? [...partitioned].map(([partitions, plog]) => ({ target: Target.tetherPartitioned, partitions, log: plog })) : []),
    ];
    const keyOf = (k: { target: Target; partitions: number }, c: number): string => `${k.target}/${k.partitions}/${c}`;
    const nameOf = (k: { target: Target; partitions: number }): string => (k.target === Target.tetherPartitioned ? `tether N=${k.partitions}` : k.target);
    const rounds = new Map<string, number[]>();

    progress('throughput: warm-up');
    for (const c of concurrencies) {
      for (const k of kinds(c)) await runOnce(k.target, c, Math.min(2_000, (options.counts.get(c) ?? 0) / 4), js, k.log);
    }
    for (let round = 1; round <= options.rounds; round += 1) {
      for (const c of concurrencies) {
        for (const k of kinds(c)) {
          const count = options.counts.get(c) ?? 0;
          const perSec = await runOnce(k.target, c, count, js, k.log);
          rounds.set(keyOf(k, c), [...(rounds.get(keyOf(k, c)) ?? []), perSec]);
          progress(`throughput round ${round}/${options.rounds}: ${nameOf(k)} c=${c}: ${Math.round(perSec)} events/s`);
        }
      }
    }
    return concurrencies.flatMap((c) =>
      kinds(c).map((k) => {
        const perSec = rounds.get(keyOf(k, c)) ?? [];
        return { target: k.target, partitions: k.partitions, concurrency: c, count: options.counts.get(c) ?? 0, roundsPerSec: perSec, medianPerSec: median(perSec) };
      }),
    );
  } finally {
    for (const plog of partitioned.values()) await plog.close();
    await log.close();
    await nc.drain().catch(() => undefined);
  }
}

/** Sets up `c` fresh lanes (untimed), then times `count` appends spread over them. */
async function runOnce(target: Target, c: number, count: number, js: JetStreamClient, log: SessionLog): Promise<number> {
  const lanes = await Promise.all(Array.from({ length: c }, () => makeLane(target, js, log)));
  // One untimed append per lane: Tether opens its writer (a registry read and
  // a last-message lookup) on a stream's first append; steady state is timed.
  await Promise.all(lanes.map((lane) => lane(1)));
  const start = performance.now();
  await Promise.all(lanes.map((lane, i) => lane(Math.floor(count / c) + (i < count % c ? 1 : 0))));
  return count / ((performance.now() - start) / 1000);
}

let laneCounter = 0;

async function makeLane(target: Target, js: JetStreamClient, log: SessionLog): Promise<Lane> {
  laneCounter += 1;
  const token = `lane-${laneCounter}`;
  let n = 0;
  if (target === Target.tether || target === Target.tetherPartitioned) {
    const session = await log.createSession(principalDigest('bench'));
    const stream = log.newStreamId();
    return async (k) => {
      for (let i = 0; i < k; i += 1) await log.append(session.sessionId, stream, EventKind.event, progressPayload(token, n++));
    };
  }
  if (target === Target.raw) {
    const subject = `raw.${token}`;
    return async (k) => {
      for (let i = 0; i < k; i += 1) await js.publish(subject, progressPayload(token, n++));
    };
  }
  const subject = `rawx.log.${token}`;
  const epoch = newEpoch();
  let last = 0;
  return async (k) => {
    for (let i = 0; i < k; i += 1) {
      n += 1;
      const h = headers();
      h.set(LogHeader.epoch, epoch);
      h.set(LogHeader.seq, String(n));
      h.set(LogHeader.prev, String(last));
      h.set(LogHeader.kind, EventKind.event);
      const ack = await js.publish(subject, progressPayload(token, n), { headers: h, msgID: `${token}.${n}`, expect: { lastSubjectSequence: last } });
      last = ack.seq;
    }
  };
}
