/**
 * The peers of `npm run bench:log` (DESIGN §12, "Peers, same run"), beside
 * the session log in the same run:
 *
 * - resume latency at every level the first server measures: each peer
 *   holds the same events as the log (`storeEvent` per event, in the order
 *   the log acknowledged them) and is resumed at the same cursors, timed
 *   from `replayEventsAfter` until the 100th event of the stream was sent;
 *   the Redis peers on a redis-server without persistence and on one with
 *   `appendfsync always`;
 * - append throughput, `storeEvent` at 1 and 64 lanes (each its own session
 *   and stream, every append awaited), on two fresh redis-servers likewise;
 * - what each does with a cursor it no longer holds (cursor-loss.ts),
 *   TetherEventStore included, on a private nats-server of its own.
 *
 * The Redis peers keep one key prefix per MCP session (the SDK's GET stream
 * id is the same in every session) and a ring of 10,000 events per stream,
 * above every stream the fill writes, so that nothing is trimmed while
 * measuring. server-everything's store is one instance per session, as that
 * server makes it, rebuilt at each level like the SDK store.
 */
import { startNatsServer } from '@tether/testing';
import type { FilledStream, LogFill } from '../fill.js';
import { progressMessage } from '../payload.js';
import { BACKLOG, sampleLoop } from '../resume.js';
import type { SampleBudget, SamplePlan } from '../resume.js';
import { newSdkStore } from '../sdk/stores.js';
import type { BenchEventStore, StoreKind } from '../sdk/stores.js';
import { int, median, ms, progress, summarize } from '../stats.js';
import type { Summary } from '../stats.js';
import { probeCursorLoss } from './cursor-loss.js';
import type { CursorLossRow } from './cursor-loss.js';
import { everythingStoreSource, newEverythingStore } from './everything-store.js';
import type { EverythingStoreSource } from './everything-store.js';
import { newRedisStore, RedisBacking, redisKind, RedisLayout } from './redis-peers.js';
import { findRedisServer, RedisPersistence, redisVersion, startRedisServer } from './redis-server.js';
import { everythingSubject, redisSubject, sdkSubject, tetherSubject } from './subjects.js';

export interface PeerKnobs {
  readonly levels: readonly number[];
  readonly oneMillion: 'auto' | 'yes' | 'no';
  readonly maxFillS: number;
  readonly rounds: number;
  readonly tputCounts: ReadonlyMap<number, number>;
}

export interface PeerThroughput {
  readonly store: StoreKind;
  readonly concurrency: number;
  readonly count: number;
  readonly roundsPerSec: readonly number[];
  readonly medianPerSec: number;
}

export interface PeerResume {
  readonly store: StoreKind;
  readonly events: number;
  /** Undefined when the level was not measured for this peer (`skipped` says why). */
  readonly total: Summary | undefined;
  /** Samples that did not send the stream's 100 events after the cursor, in order. */
  readonly anomalies: number;
  /** Mean events of other streams sent before the stream's 100th (server-everything sends the whole session). */
  readonly foreignMean: number;
  /** How the peer was filled to this level: events added, seconds, events/s. */
  readonly fill: { readonly added: number; readonly seconds: number; readonly perSec: number } | undefined;
  readonly skipped: string | undefined;
}

export interface PeerRun {
  readonly redis: { readonly version: string; readonly bin: string } | undefined;
  /** Why no Redis peer ran, when none did. */
  readonly redisMissing: string | undefined;
  readonly everything: Omit<EverythingStoreSource, 'source'>;
  readonly throughput: readonly PeerThroughput[];
  readonly resume: readonly PeerResume[];
  readonly cursorLoss: readonly CursorLossRow[];
  /** What each cursor-loss subject's restart restarted. */
  readonly restartNotes: Readonly<Record<string, string>>;
  readonly seconds: number;
}

const FILL_LANES = 64;
const PERSISTENCES = [RedisPersistence.none, RedisPersistence.aofAlways] as const;
const LAYOUTS = [RedisLayout.streams, RedisLayout.contextforge] as const;

interface RedisHeld {
  readonly kind: StoreKind;
  readonly layout: RedisLayout;
  readonly backing: RedisBacking;
  readonly stores: Map<string, BenchEventStore>;
  /** Event ids by fill stream index, then event index. */
  readonly ids: string[][];
  held: number;
  lastRate: number;
  stopped: string | undefined;
}

export class LogPeers {
  readonly #knobs: PeerKnobs;
  readonly #started = performance.now();
  readonly #bin: string | undefined;
  /** The redis-servers the levels fill, one per persistence mode (none without redis-server). */
  readonly #levelServers: readonly RedisBacking[];
  readonly #held: RedisHeld[];
  readonly #resume: PeerResume[] = [];

  private constructor(knobs: PeerKnobs, bin: string | undefined, levelServers: readonly RedisBacking[]) {
    this.#knobs = knobs;
    this.#bin = bin;
    this.#levelServers = levelServers;
    this.#held = levelServers.flatMap((backing) =>
      LAYOUTS.map((layout) => ({ kind: redisKind(layout, backing.server.persistence), layout, backing, stores: new Map(), ids: [], held: 0, lastRate: 0, stopped: undefined })),
    );
  }

  /** Starts the redis-servers the resume levels fill, without persistence and with fsync always (none if redis-server is missing: said loudly). */
  static async start(knobs: PeerKnobs): Promise<LogPeers> {
    const bin = findRedisServer();
    if (bin === undefined) {
      progress('WARNING: redis-server not found (REDIS_SERVER_BIN, /usr/bin/redis-server, PATH): the Redis peers are NOT measured; apt-get install redis-server');
      return new LogPeers(knobs, undefined, []);
    }
    const servers = await startBackings(bin);
    progress(`peers: server-everything ${everythingStoreSource().version} store from ${everythingStoreSource().file}`);
    return new LogPeers(knobs, bin, servers);
  }

  /** At one level of the log: every resume peer holds the same events and is resumed at the same cursors. */
  async atLevel(fill: LogFill, events: number, plans: readonly SamplePlan[], budget: SampleBudget): Promise<void> {
    this.#resume.push(await this.#everythingLevel(fill, events, plans, budget));
    for (const held of this.#held) this.#resume.push(await this.#redisLevel(held, fill, events, plans, budget));
  }

  /** Levels the log did not reach (the 1M rule), so no peer was measured there either. */
  noteSkipped(events: readonly number[], reason: string): void {
    for (const e of events) {
      for (const store of ['everything' as const, ...this.#held.map((h) => h.kind)]) {
        if (this.#resume.some((r) => r.store === store && r.events === e)) continue;
        this.#resume.push({ store, events: e, total: undefined, anomalies: 0, foreignMean: 0, fill: undefined, skipped: `with the log's level (${reason})` });
      }
    }
  }

  /** Stops the levels' servers (also done by `finish`); for a run that ends early. */
  async close(): Promise<void> {
    for (const b of this.#levelServers) await b.close();
  }

  /** Appends, then the cursor probes (with TetherEventStore on a private nats-server running `natsBin`); stops every server. */
  async finish(natsBin: string | undefined): Promise<PeerRun> {
    // The levels' servers go (their events are no longer needed): appends and probes get fresh ones, with no large AOF behind them.
    await this.close();
    let fresh: RedisBacking[] = [];
    try {
      if (this.#bin !== undefined) fresh = await startBackings(this.#bin);
      const none = fresh.find((b) => b.server.persistence === RedisPersistence.none);
      const aof = fresh.find((b) => b.server.persistence === RedisPersistence.aofAlways);
      const throughput = await this.#throughput(none, aof);
      const { rows, notes } = await this.#cursorLoss(none, aof, natsBin);
      const src = everythingStoreSource();
      return {
        redis: this.#bin === undefined ? undefined : { version: redisVersion(this.#bin), bin: this.#bin },
        redisMissing: this.#bin === undefined ? 'redis-server not found (REDIS_SERVER_BIN, /usr/bin/redis-server, PATH); apt-get install redis-server' : undefined,
        everything: { version: src.version, file: src.file },
        throughput,
        resume: this.#resume,
        cursorLoss: rows,
        restartNotes: notes,
        seconds: (performance.now() - this.#started) / 1000,
      };
    } finally {
      for (const b of fresh) await b.close();
    }
  }

  async #everythingLevel(fill: LogFill, events: number, plans: readonly SamplePlan[], budget: SampleBudget): Promise<PeerResume> {
    // One store per session, as server-everything makes them; rebuilt at each level (like the SDK store) so one level's memory is freed before the next.
    const stores = new Map<string, BenchEventStore>();
    const ids: string[][] = fill.streams.map(() => []);
    const started = performance.now();
    for (let i = 0; i < events; i += 1) {
      const index = fill.order[i] ?? 0;
      const stream = fill.streams[index] as FilledStream;
      const list = ids[index] as string[];
      let store = stores.get(stream.sessionId);
      if (store === undefined) stores.set(stream.sessionId, (store = newEverythingStore()));
      list.push(await store.storeEvent(stream.streamId, progressMessage(stream.streamId, list.length)));
    }
    const seconds = (performance.now() - started) / 1000;
    const r = await measurePeerResume(fill, plans, budget, (s) => stores.get(s.sessionId), ids);
    progress(`peer server-everything @ ${int(events)}: built in ${seconds.toFixed(1)} s; resume p50 ${ms(r.total.p50)} ms, p99 ${ms(r.total.p99)} ms (n=${r.total.n}), ${r.foreignMean.toFixed(0)} events of other streams sent per resume`);
    return { store: 'everything', events, ...r, fill: { added: events, seconds, perSec: events / seconds }, skipped: undefined };
  }

  async #redisLevel(held: RedisHeld, fill: LogFill, events: number, plans: readonly SamplePlan[], budget: SampleBudget): Promise<PeerResume> {
    const skip = (reason: string): PeerResume => {
      held.stopped ??= reason;
      progress(`peer ${held.kind} @ ${int(events)}: ${held.stopped}`);
      return { store: held.kind, events, total: undefined, anomalies: 0, foreignMean: 0, fill: undefined, skipped: held.stopped };
    };
    if (held.stopped !== undefined) return skip(held.stopped);
    if (events >= 1_000_000) {
      const estimateS = (events - held.held) / Math.max(1, held.lastRate);
      if (this.#knobs.oneMillion === 'no') return skip(`${int(events)} skipped: BENCH_LOG_1M=no`);
      if (this.#knobs.oneMillion === 'auto' && estimateS > this.#knobs.maxFillS) {
        return skip(`${int(events)} skipped: filling ${int(events - held.held)} more at the measured ${int(held.lastRate)} events/s would take ~${estimateS.toFixed(0)} s, over the ${this.#knobs.maxFillS} s budget (BENCH_LOG_1M=yes forces it)`);
      }
    }
    // The new events, grouped by stream in order; streams are written FILL_LANES at once, each stream's events one after another.
    const pending = new Map<number, number>();
    for (let i = held.held; i < events; i += 1) {
      const index = fill.order[i] ?? 0;
      pending.set(index, (pending.get(index) ?? 0) + 1);
    }
    const queue = [...pending.entries()];
    const started = performance.now();
    await Promise.all(
      Array.from({ length: FILL_LANES }, async () => {
        for (let job = queue.shift(); job !== undefined; job = queue.shift()) {
          const [index, n] = job;
          const stream = fill.streams[index] as FilledStream;
          const list = (held.ids[index] ??= []);
          let store = held.stores.get(stream.sessionId);
          if (store === undefined) held.stores.set(stream.sessionId, (store = newRedisStore(held.layout, held.backing.client)));
          for (let k = 0; k < n; k += 1) list.push(await store.storeEvent(stream.streamId, progressMessage(stream.streamId, list.length)));
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    const added = events - held.held;
    held.held = events;
    held.lastRate = added / seconds;
    // An AOF rewrite the fill set off runs in a fork: let it end before anything is timed.
    await held.backing.settle();
    const r = await measurePeerResume(fill, plans, budget, (s) => held.stores.get(s.sessionId), held.ids);
    progress(`peer ${held.kind} @ ${int(events)}: filled ${int(added)} in ${seconds.toFixed(1)} s (${int(held.lastRate)}/s); resume p50 ${ms(r.total.p50)} ms, p99 ${ms(r.total.p99)} ms (n=${r.total.n})`);
    return { store: held.kind, events, ...r, fill: { added, seconds, perSec: held.lastRate }, skipped: undefined };
  }

  async #throughput(none: RedisBacking | undefined, aof: RedisBacking | undefined): Promise<PeerThroughput[]> {
    const peers: [StoreKind, () => BenchEventStore][] = [
      ['sdk', newSdkStore],
      ['everything', newEverythingStore],
      ...(none === undefined
        ? []
        : ([
            [redisKind(RedisLayout.streams, RedisPersistence.none), () => newRedisStore(RedisLayout.streams, none.client)],
            [redisKind(RedisLayout.contextforge, RedisPersistence.none), () => newRedisStore(RedisLayout.contextforge, none.client)],
          ] as [StoreKind, () => BenchEventStore][])),
      ...(aof === undefined
        ? []
        : ([
            [redisKind(RedisLayout.streams, RedisPersistence.aofAlways), () => newRedisStore(RedisLayout.streams, aof.client)],
            [redisKind(RedisLayout.contextforge, RedisPersistence.aofAlways), () => newRedisStore(RedisLayout.contextforge, aof.client)],
          ] as [StoreKind, () => BenchEventStore][])),
    ];
    const rounds = new Map<string, number[]>();
    const counts = [...this.#knobs.tputCounts.entries()];
    progress('peers: append throughput, warm-up');
    for (const [c, count] of counts) for (const [, make] of peers) await appendRun(make, c, Math.min(2_000, Math.floor(count / 4)));
    for (let round = 1; round <= this.#knobs.rounds; round += 1) {
      for (const [c, count] of counts) {
        for (const [kind, make] of peers) {
          const perSec = await appendRun(make, c, count);
          rounds.set(`${kind}/${c}`, [...(rounds.get(`${kind}/${c}`) ?? []), perSec]);
          progress(`peers: append round ${round}/${this.#knobs.rounds}: ${kind} c=${c}: ${int(perSec)} events/s`);
        }
      }
    }
    return counts.flatMap(([c, count]) =>
      peers.map(([store]) => {
        const perSec = rounds.get(`${store}/${c}`) ?? [];
        return { store, concurrency: c, count, roundsPerSec: perSec, medianPerSec: median(perSec) };
      }),
    );
  }

  async #cursorLoss(none: RedisBacking | undefined, aof: RedisBacking | undefined, natsBin: string | undefined): Promise<{ rows: CursorLossRow[]; notes: Record<string, string> }> {
    const nats = await startNatsServer(natsBin === undefined ? {} : { bin: natsBin });
    const tether = tetherSubject(nats.url);
    const subjects = [
      tether,
      sdkSubject(),
      everythingSubject(),
      ...(none === undefined ? [] : [redisSubject(RedisLayout.streams, none), redisSubject(RedisLayout.contextforge, none)]),
      ...(aof === undefined ? [] : [redisSubject(RedisLayout.streams, aof), redisSubject(RedisLayout.contextforge, aof)]),
    ];
    const rows: CursorLossRow[] = [];
    const notes: Record<string, string> = {};
    try {
      progress(`peers: cursor-loss probes (TetherEventStore on nats-server ${nats.version})`);
      for (const s of subjects) {
        rows.push(...(await probeCursorLoss(s)));
        notes[s.name] = s.restartNote;
      }
    } finally {
      await tether.close();
      await nats.cleanup();
    }
    return { rows, notes };
  }
}

/** A private redis-server of each persistence mode, with a client. */
async function startBackings(bin: string): Promise<RedisBacking[]> {
  const out: RedisBacking[] = [];
  for (const p of PERSISTENCES) {
    const b = await RedisBacking.open(await startRedisServer(p, bin));
    progress(`peers: redis-server ${b.server.version} (${bin}), ${p}, at ${b.server.url}, pid ${b.server.pid}`);
    out.push(b);
  }
  return out;
}

/** Resume latency of one peer at the plans' cursors: from `replayEventsAfter` until the stream's 100th event after the cursor was sent. */
async function measurePeerResume(
  fill: LogFill,
  plans: readonly SamplePlan[],
  budget: SampleBudget,
  storeOf: (s: FilledStream) => BenchEventStore | undefined,
  ids: readonly (readonly string[] | undefined)[],
): Promise<{ total: Summary; anomalies: number; foreignMean: number }> {
  const stop = new Error('enough events');
  let anomalies = 0;
  const samples = await sampleLoop(plans, budget, async (plan) => {
    const stream = fill.streams[plan.stream] as FilledStream;
    const store = storeOf(stream);
    const cursor = ids[plan.stream]?.[plan.cursor];
    if (store === undefined || cursor === undefined) throw new Error(`peer holds no stream ${plan.stream}`);
    let own = 0;
    let foreign = 0;
    let inOrder = true;
    let totalMs = Number.NaN;
    const start = performance.now();
    try {
      await store.replayEventsAfter(cursor, {
        send: async (_id, message) => {
          const p = (message as { params?: { progressToken?: unknown; progress?: unknown } }).params;
          if (p?.progressToken !== stream.streamId) {
            foreign += 1;
            return;
          }
          own += 1;
          if (p.progress !== plan.cursor + own) inOrder = false;
          if (own === BACKLOG) {
            totalMs = performance.now() - start;
            throw stop;
          }
        },
      });
    } catch (err) {
      if (err !== stop) throw err;
    }
    if (own !== BACKLOG || !inOrder) anomalies += 1;
    return { totalMs, foreign };
  });
  const foreign = samples.map((s) => s.foreign);
  return {
    total: summarize(samples.map((s) => s.totalMs).filter(Number.isFinite)),
    anomalies,
    foreignMean: foreign.reduce((a, b) => a + b, 0) / Math.max(1, foreign.length),
  };
}

/** `count` appends over `c` lanes, each a fresh session store and stream, every append awaited; one untimed append per lane first. */
async function appendRun(make: () => BenchEventStore, c: number, count: number): Promise<number> {
  const lanes = Array.from({ length: c }, (_, i) => ({ store: make(), stream: `tput-${process.hrtime.bigint()}-${i}`, n: 0 }));
  await Promise.all(lanes.map(async (l) => l.store.storeEvent(l.stream, progressMessage(l.stream, l.n++))));
  const start = performance.now();
  await Promise.all(
    lanes.map(async (l, i) => {
      const mine = Math.floor(count / c) + (i < count % c ? 1 : 0);
      for (let k = 0; k < mine; k += 1) await l.store.storeEvent(l.stream, progressMessage(l.stream, l.n++));
    }),
  );
  return count / ((performance.now() - start) / 1000);
}
