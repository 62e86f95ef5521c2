/**
 * IBM ContextForge's Redis event store, ported to the MCP SDK v1
 * `EventStore` interface: the layout and steps of `RedisEventStore` in
 * mcpgateway/transports/redis_event_store.py (IBM/mcp-context-forge, read
 * for this bench; our own TypeScript and Lua, not a copy). Per SDK stream:
 *
 * - `<prefix>:<stream>:meta`, a hash: `next_seq`, `count`, `start_seq`;
 * - `<prefix>:<stream>:events`, a sorted set: event id scored by its seq;
 * - `<prefix>:<stream>:messages`, a hash: event id → message JSON;
 * - `<prefix>:event_index:<event id>`, a string `{stream_id, seq_num}` with the TTL.
 *
 * `storeEvent` runs one Lua script: next seq, add, index, and, past the max
 * length, evict the oldest (sorted set, hash and index keys) and move
 * `start_seq`, then refresh the TTLs. Event ids are random UUIDs.
 * `replayEventsAfter` reads the index, compares the cursor's seq with
 * `start_seq`, reads the later ids by score, then each message with its own
 * `HGET`, as ContextForge does. Where ContextForge returns `None` (index
 * entry missing or expired, cursor evicted), this returns `''`: the SDK v1
 * interface returns a string, and `''` is what the SDK's own example store
 * returns for a cursor it does not hold. (ContextForge's Python SDK then ends
 * the SSE response with no events; the TypeScript SDK keeps a 200 stream
 * open with none.)
 */
import { randomUUID } from 'node:crypto';
import type { JsonRpcMessage } from '@tether/sdk';
import type { BenchEventStore } from '../sdk/stores.js';
import type { BenchRedis } from './redis-client.js';

export interface ContextForgeStoreOptions {
  readonly client: BenchRedis;
  /** ContextForge's `key_prefix` (default there `mcpgw:eventstore`); one per MCP session here. */
  readonly keyPrefix: string;
  /** ContextForge's `max_events_per_stream` (default there 100). */
  readonly maxEvents: number;
  /** ContextForge's `ttl` in seconds (default there 3600). */
  readonly ttlSeconds: number;
}

// KEYS: meta, events (zset), messages (hash). ARGV: event id, message JSON, ttl, max events, index prefix, stream id.
const STORE_LUA = `local meta, events, messages = KEYS[1], KEYS[2], KEYS[3]
local id, body, ttl, cap, index, stream = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6]
local seq = redis.call('HINCRBY', meta, 'next_seq', 1)
local count = redis.call('HINCRBY', meta, 'count', 1)
if count == 1 then redis.call('HSET', meta, 'start_seq', seq) end
redis.call('ZADD', events, seq, id)
redis.call('HSET', messages, id, body)
redis.call('SET', index .. id, cjson.encode({stream_id = stream, seq_num = seq}), 'EX', ttl)
if count > cap then
  local drop = count - cap
  local gone = redis.call('ZRANGE', events, 0, drop - 1)
  redis.call('ZREMRANGEBYRANK', events, 0, drop - 1)
  for _, old in ipairs(gone) do
    redis.call('HDEL', messages, old)
    redis.call('DEL', index .. old)
  end
  redis.call('HSET', meta, 'count', cap)
  local first = redis.call('ZRANGE', events, 0, 0, 'WITHSCORES')
  redis.call('HSET', meta, 'start_seq', first[2] or seq)
end
redis.call('EXPIRE', meta, ttl)
redis.call('EXPIRE', events, ttl)
redis.call('EXPIRE', messages, ttl)
return seq`;

export class ContextForgeEventStore implements BenchEventStore {
  readonly #o: ContextForgeStoreOptions;

  constructor(options: ContextForgeStoreOptions) {
    this.#o = options;
  }

  async storeEvent(streamId: string, message: JsonRpcMessage): Promise<string> {
    const id = randomUUID();
    const k = this.#keys(streamId);
    await this.#o.client.eval(STORE_LUA, {
      keys: [k.meta, k.events, k.messages],
      arguments: [id, JSON.stringify(message), String(this.#o.ttlSeconds), String(this.#o.maxEvents), this.#indexPrefix(), streamId],
    });
    return id;
  }

  async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JsonRpcMessage) => Promise<void> }): Promise<string> {
    const { client } = this.#o;
    const raw = await client.get(this.#indexPrefix() + lastEventId);
    if (raw === null) return '';
    let info: { stream_id?: unknown; seq_num?: unknown };
    try {
      info = JSON.parse(String(raw)) as typeof info;
    } catch {
      return '';
    }
    if (typeof info.stream_id !== 'string' || info.stream_id === '' || typeof info.seq_num !== 'number') return '';
    const streamId = info.stream_id;
    const k = this.#keys(streamId);
    // Evicted: the cursor is older than the oldest event kept.
    const start = await client.hGet(k.meta, 'start_seq');
    if (start !== null && Number.isFinite(Number(start)) && info.seq_num < Number(start)) return '';
    const ids = await client.zRangeByScore(k.events, info.seq_num + 1, '+inf');
    for (const id of ids) {
      const body = await client.hGet(k.messages, String(id));
      if (body === null) continue;
      await send(String(id), JSON.parse(String(body)) as JsonRpcMessage);
    }
    return streamId;
  }

  #keys(streamId: string): { meta: string; events: string; messages: string } {
    const base = `${this.#o.keyPrefix}:${streamId}`;
    return { meta: `${base}:meta`, events: `${base}:events`, messages: `${base}:messages` };
  }

  #indexPrefix(): string {
    return `${this.#o.keyPrefix}:event_index:`;
  }
}
