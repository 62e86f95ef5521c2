import { InMemoryEventStore } from '@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js';
import { createWriterPresence, TetherEventStore } from '@tether/sdk';
import type { JsonRpcMessage, WriterPresence } from '@tether/sdk';
import { principalDigest, SessionLog } from '@tether/session-log';
import { progressMessage } from '../payload.js';

/**
 * What both stores share (the SDK's `EventStore` interface, both SDK
 * majors): enough to fill and resume them by the same code.
 */
export interface BenchEventStore {
  storeEvent(streamId: string, message: JsonRpcMessage): Promise<string>;
  replayEventsAfter(lastEventId: string, sink: { send: (eventId: string, message: JsonRpcMessage) => Promise<void> }): Promise<string>;
}

/**
 * The stores a figure is measured on, named as the tables name them: Tether's,
 * the SDK's example store, and the peers of DESIGN §12 (test/bench/peers/):
 * the reference server's own store and a Redis store in two layouts, each on
 * a redis-server without persistence and on one that fsyncs every write.
 */
export const StoreName = {
  tether: 'TetherEventStore',
  sdk: 'SDK InMemoryEventStore',
  everything: 'server-everything InMemoryEventStore',
  redisStreams: 'Redis Streams, no persistence',
  redisStreamsAof: 'Redis Streams, AOF fsync always',
  contextforge: 'ContextForge layout, no persistence',
  contextforgeAof: 'ContextForge layout, AOF fsync always',
} as const;
export type StoreKind = keyof typeof StoreName;

/** One process's view of the session log: a connection, its writer presence, a store per session. */
export interface TetherSide {
  readonly log: SessionLog;
  readonly presence: WriterPresence;
  /** A fresh session and the store bound to it (the README: one store per session). */
  newStore(): Promise<TetherEventStore>;
  close(): Promise<void>;
}

export const BENCH_PRINCIPAL = principalDigest('Bearer sdk-bench');

export async function openTether(natsUrl: string): Promise<TetherSide> {
  const log = await SessionLog.create({ servers: natsUrl });
  const presence = createWriterPresence(log);
  return {
    log,
    presence,
    // No `requestsOf`: a POST stream ends at its first response, what both SDK clients send (one request per POST).
    newStore: async () => new TetherEventStore({ log, session: await log.createSession(BENCH_PRINCIPAL), presence }),
    async close() {
      await presence.close();
      await log.close();
    },
  };
}

export function newSdkStore(): BenchEventStore {
  // The example's `send` takes the SDK's JSONRPCMessage; ours hands it the same objects.
  return new InMemoryEventStore() as unknown as BenchEventStore;
}

/** Event `index` of a stream: a 200-byte progress notification. */
export function notification(streamId: string, index: number): JsonRpcMessage {
  return progressMessage(streamId, index) as JsonRpcMessage;
}

/** The response that ends a POST stream (the store appends its `end` marker after it). */
export function response(requestId: number): JsonRpcMessage {
  return { jsonrpc: '2.0', id: requestId, result: { content: [{ type: 'text', text: 'done' }] } };
}
