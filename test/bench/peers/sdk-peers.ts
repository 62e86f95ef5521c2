/**
 * The peers of `npm run bench:sdk` (DESIGN §12, "Peers, same run"),
 * measured through the same SDK v1 `EventStore` calls as `TetherEventStore`
 * and the SDK's `InMemoryEventStore`: server-everything's store, and the
 * Redis store in both layouts, each on a private redis-server without
 * persistence and on one with `appendfsync always`. Without `redis-server`
 * the Redis peers are left out, said loudly.
 */
import { newSdkStore } from '../sdk/stores.js';
import type { BenchEventStore, StoreKind } from '../sdk/stores.js';
import { progress } from '../stats.js';
import { probeCursorLoss } from './cursor-loss.js';
import type { CursorLossRow } from './cursor-loss.js';
import { everythingStoreSource, newEverythingStore } from './everything-store.js';
import { newRedisStore, RedisBacking, redisKind, RedisLayout } from './redis-peers.js';
import { findRedisServer, RedisPersistence, startRedisServer } from './redis-server.js';
import { everythingSubject, redisSubject, sdkSubject, tetherSubject } from './subjects.js';

export interface SdkPeersInfo {
  readonly redis: { readonly version: string; readonly bin: string } | undefined;
  readonly redisMissing: string | undefined;
  readonly everything: { readonly version: string; readonly file: string };
}

export class SdkPeers {
  readonly info: SdkPeersInfo;
  /** Every store kind besides Tether's, in table order. */
  readonly kinds: readonly StoreKind[];
  /** Kinds measured for resume latency. */
  readonly resumeKinds: readonly StoreKind[];
  readonly #backings: ReadonlyMap<RedisPersistence, RedisBacking>;

  private constructor(info: SdkPeersInfo, backings: ReadonlyMap<RedisPersistence, RedisBacking>, withPeers = true) {
    this.info = info;
    this.#backings = backings;
    const none = backings.has(RedisPersistence.none);
    const aof = backings.has(RedisPersistence.aofAlways);
    this.kinds = withPeers ? ['sdk', 'everything', ...(none ? (['redisStreams', 'contextforge'] as const) : []), ...(aof ? (['redisStreamsAof', 'contextforgeAof'] as const) : [])] : ['sdk'];
    this.resumeKinds = this.kinds.filter((k) => k !== 'sdk');
  }

  /** `wanted: false`: only the SDK store, as before the peers. */
  static async open(wanted: boolean): Promise<SdkPeers> {
    const src = everythingStoreSource();
    const everything = { version: src.version, file: src.file };
    if (!wanted) return new SdkPeers({ redis: undefined, redisMissing: 'BENCH_SDK_PEERS=no', everything }, new Map(), false);
    const bin = findRedisServer();
    if (bin === undefined) {
      const redisMissing = 'redis-server not found (REDIS_SERVER_BIN, /usr/bin/redis-server, PATH); apt-get install redis-server';
      progress(`WARNING: ${redisMissing}: the Redis peers are NOT measured`);
      return new SdkPeers({ redis: undefined, redisMissing, everything }, new Map());
    }
    const backings = new Map<RedisPersistence, RedisBacking>();
    for (const p of [RedisPersistence.none, RedisPersistence.aofAlways]) {
      const backing = await RedisBacking.open(await startRedisServer(p, bin));
      backings.set(p, backing);
      progress(`peers: redis-server ${backing.server.version} (${p}) at ${backing.server.url}, pid ${backing.server.pid}`);
    }
    const version = backings.get(RedisPersistence.none)?.server.version ?? '?';
    progress(`peers: server-everything ${everything.version} store from ${everything.file}`);
    return new SdkPeers({ redis: { version, bin }, redisMissing: undefined, everything }, backings);
  }

  /** A store for a fresh session of `kind` (not `tether`: that one is `TetherSide.newStore`). */
  newStore(kind: StoreKind): BenchEventStore {
    if (kind === 'sdk') return newSdkStore();
    if (kind === 'everything') return newEverythingStore();
    for (const layout of [RedisLayout.streams, RedisLayout.contextforge]) {
      for (const [persistence, backing] of this.#backings) if (redisKind(layout, persistence) === kind) return newRedisStore(layout, backing.client);
    }
    throw new Error(`no ${kind} store in this run`);
  }

  /** Until no redis-server rewrites its AOF in the background. */
  async settle(): Promise<void> {
    for (const [, backing] of this.#backings) await backing.settle();
  }

  /** Every store's answer to a cursor it no longer holds, TetherEventStore on `natsUrl` included. */
  async cursorLoss(natsUrl: string): Promise<{ rows: CursorLossRow[]; restartNotes: Record<string, string> }> {
    const tether = tetherSubject(natsUrl);
    const subjects = [tether, sdkSubject(), ...(this.kinds.includes('everything') ? [everythingSubject()] : [])];
    // The redis-servers are restarted here (SIGKILL): nothing measured later needs their data.
    for (const [, backing] of this.#backings) subjects.push(redisSubject(RedisLayout.streams, backing), redisSubject(RedisLayout.contextforge, backing));
    const rows: CursorLossRow[] = [];
    const restartNotes: Record<string, string> = {};
    try {
      for (const s of subjects) {
        rows.push(...(await probeCursorLoss(s)));
        restartNotes[s.name] = s.restartNote;
      }
    } finally {
      await tether.close();
    }
    return { rows, restartNotes };
  }

  async close(): Promise<void> {
    for (const [, backing] of this.#backings) await backing.close();
  }
}
