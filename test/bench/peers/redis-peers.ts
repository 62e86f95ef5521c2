/**
 * The Redis-backed peers on one private redis-server: a store per MCP
 * session (its own key prefix), in either layout, with the ring size and TTL
 * the bench picks.
 */
import { randomUUID } from 'node:crypto';
import type { BenchEventStore, StoreKind } from '../sdk/stores.js';
import { ContextForgeEventStore } from './contextforge-store.js';
import { closeRedis, connectRedis } from './redis-client.js';
import type { BenchRedis } from './redis-client.js';
import type { RedisPersistence, RedisServer } from './redis-server.js';
import { RedisStreamsEventStore } from './redis-streams-store.js';

export const RedisLayout = { streams: 'redis-streams', contextforge: 'contextforge' } as const;
export type RedisLayout = (typeof RedisLayout)[keyof typeof RedisLayout];

/** What each layout is, for the notes under the tables. */
export const RedisLayoutNote: Record<RedisLayout, string> = {
  'redis-streams': 'a Redis stream per SDK stream: one Lua script per event (XADD MAXLEN = ring, EXPIRE), XRANGE from the cursor',
  contextforge:
    "IBM ContextForge's RedisEventStore layout (mcpgateway/transports/redis_event_store.py): per stream a meta hash, a sorted set of ids by seq and a hash of messages, plus an index key per event; one Lua script per event (store, evict past the ring, TTLs); a resume is GET index, HGET start_seq, ZRANGEBYSCORE, then one HGET per event",
};

export const PersistenceName: Record<RedisPersistence, string> = {
  none: "no persistence (--save '' --appendonly no)",
  'aof-always': 'AOF fsync always (--appendonly yes --appendfsync always)',
};

/** The store kind (and table name) of a layout on a server of a persistence mode. */
export function redisKind(layout: RedisLayout, persistence: RedisPersistence): StoreKind {
  const aof = persistence === 'aof-always';
  return layout === RedisLayout.streams ? (aof ? 'redisStreamsAof' : 'redisStreams') : aof ? 'contextforgeAof' : 'contextforge';
}

/** Ring size of the measured stores: above every stream the benches write (≤ 1,000 events), so nothing is trimmed while measuring. */
export const MEASURE_RING = 10_000;
/** ContextForge's default TTL of a stream. */
export const TTL_SECONDS = 3_600;

/** One redis-server and a client of it; `reconnect` after the server restarted. */
export class RedisBacking {
  readonly server: RedisServer;
  #client: BenchRedis;

  private constructor(server: RedisServer, client: BenchRedis) {
    this.server = server;
    this.#client = client;
  }

  static async open(server: RedisServer): Promise<RedisBacking> {
    return new RedisBacking(server, await connectRedis(server.url));
  }

  get client(): BenchRedis {
    return this.#client;
  }

  /** Kills the server (SIGKILL), starts it again on the same port and dir, and connects a new client. */
  async crashAndRestart(): Promise<void> {
    closeRedis(this.#client);
    await this.server.restart();
    this.#client = await connectRedis(this.server.url);
  }

  /**
   * Waits until no AOF rewrite runs or is scheduled (`INFO persistence`), so
   * that a background rewrite after a fill (a fork writing the whole data
   * set) does not share the cores with what is measured next. Up to `maxMs`.
   */
  async settle(maxMs = 120_000): Promise<void> {
    const deadline = Date.now() + maxMs;
    while (Date.now() < deadline) {
      const info = String(await this.#client.info('persistence'));
      if (!/aof_rewrite_in_progress:1|aof_rewrite_scheduled:1|rdb_bgsave_in_progress:1/.test(info)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async close(): Promise<void> {
    closeRedis(this.#client);
    await this.server.stop();
  }
}

/** A store of one session; `prefix` names the session (a fresh one if omitted). */
export function newRedisStore(layout: RedisLayout, client: BenchRedis, ring = MEASURE_RING, prefix = `bench:${randomUUID()}`): BenchEventStore & { readonly prefix: string } {
  const store =
    layout === RedisLayout.streams
      ? new RedisStreamsEventStore({ client, keyPrefix: prefix, maxLen: ring, ttlSeconds: TTL_SECONDS })
      : new ContextForgeEventStore({ client, keyPrefix: prefix, maxEvents: ring, ttlSeconds: TTL_SECONDS });
  return Object.assign(store, { prefix });
}
