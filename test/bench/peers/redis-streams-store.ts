/**
 * A Redis Streams event store for the MCP SDK v1 `EventStore` interface:
 * one Redis stream per SDK stream, `XADD` per event and `XRANGE` from the
 * cursor, each stream a ring buffer (the oldest entries trimmed past a max
 * length) with a TTL, appended by one Lua script so the add, the trim and
 * the expiry are atomic. This is the shape the issue and DESIGN §12 call
 * "the approach of IBM ContextForge". ContextForge's own store
 * (mcpgateway/transports/redis_event_store.py, read for this bench) keeps
 * the same ring buffer with a Lua script but on a sorted set and a hash
 * instead of a stream: that layout is measured on its own as
 * `ContextForgeEventStore` (contextforge-store.ts).
 *
 * Written the plain way such a store is written, with no cursor checks of its
 * own, so the bench measures what the approach does, not what we would add:
 * a cursor is `<sdk stream id>_<entry id>`, a resume is `XRANGE key (<entry> +`.
 */
import type { JsonRpcMessage } from '@tether/sdk';
import type { BenchEventStore } from '../sdk/stores.js';
import type { BenchRedis } from './redis-client.js';

export interface RedisStreamsStoreOptions {
  readonly client: BenchRedis;
  /** Keys are `<keyPrefix>:stream:<sdk stream id>`; one prefix per MCP session (the SDK's GET stream id is the same in every session). */
  readonly keyPrefix: string;
  /** Entries a stream keeps (`XADD … MAXLEN =`); ContextForge's default ring is 100 events per stream. */
  readonly maxLen: number;
  /** Stream TTL, refreshed on every append (ContextForge's default: 3600 s). */
  readonly ttlSeconds: number;
}

// KEYS[1] the stream; ARGV[1] the message JSON, ARGV[2] the max length, ARGV[3] the TTL in seconds.
// XADD with MAXLEN = appends and trims in one command; EXPIRE keeps an idle stream from living forever.
const APPEND_LUA = `local id = redis.call('XADD', KEYS[1], 'MAXLEN', '=', ARGV[2], '*', 'm', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
return id`;

export class RedisStreamsEventStore implements BenchEventStore {
  readonly #o: RedisStreamsStoreOptions;

  constructor(options: RedisStreamsStoreOptions) {
    this.#o = options;
  }

  async storeEvent(streamId: string, message: JsonRpcMessage): Promise<string> {
    const entry = await this.#o.client.eval(APPEND_LUA, { keys: [this.#key(streamId)], arguments: [JSON.stringify(message), String(this.#o.maxLen), String(this.#o.ttlSeconds)] });
    return `${streamId}_${String(entry)}`;
  }

  /** The SDK stream id is the part before the last `_` (entry ids `<ms>-<n>` have none); no lookup. */
  async getStreamIdForEventId(eventId: string): Promise<string | undefined> {
    return split(eventId)?.streamId;
  }

  async replayEventsAfter(lastEventId: string, { send }: { send: (eventId: string, message: JsonRpcMessage) => Promise<void> }): Promise<string> {
    const parts = split(lastEventId);
    if (parts === undefined) throw new Error(`not an event id of this store: ${JSON.stringify(lastEventId)}`);
    // Bounded by the ring: at most maxLen entries come back.
    const entries = await this.#o.client.xRange(this.#key(parts.streamId), `(${parts.entry}`, '+');
    for (const e of entries ?? []) await send(`${parts.streamId}_${e.id}`, JSON.parse(String(e.message['m'])) as JsonRpcMessage);
    return parts.streamId;
  }

  #key(streamId: string): string {
    return `${this.#o.keyPrefix}:stream:${streamId}`;
  }
}

function split(eventId: string): { streamId: string; entry: string } | undefined {
  const i = eventId.lastIndexOf('_');
  return i <= 0 ? undefined : { streamId: eventId.slice(0, i), entry: eventId.slice(i + 1) };
}
