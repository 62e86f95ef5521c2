/**
 * The stores the cursor-loss probe runs on (cursor-loss.ts), each built the
 * way it runs for real: Tether's `TetherEventStore` on its own NATS
 * connection per "process", the SDK's example store, server-everything's
 * store, and the two Redis layouts on a private redis-server per
 * persistence mode.
 */
import { createWriterPresence, TetherEventStore } from '@tether/sdk';
import { SessionLog } from '@tether/session-log';
import { BENCH_PRINCIPAL, newSdkStore, StoreName } from '../sdk/stores.js';
import type { BenchEventStore } from '../sdk/stores.js';
import type { ProbeSubject } from './cursor-loss.js';
import { newEverythingStore } from './everything-store.js';
import { newRedisStore, PersistenceName, redisKind } from './redis-peers.js';
import type { RedisBacking, RedisLayout } from './redis-peers.js';

const IN_MEMORY = 'never drops an event: keeps every event in memory until the process ends';

export function sdkSubject(): ProbeSubject {
  return {
    name: StoreName.sdk,
    open: async () => newSdkStore(),
    restart: async () => newSdkStore(),
    restartNote: 'a new instance (process restarted)',
    neverTrims: IN_MEMORY,
  };
}

export function everythingSubject(): ProbeSubject {
  return {
    name: StoreName.everything,
    open: async () => newEverythingStore(),
    restart: async () => newEverythingStore(),
    restartNote: 'a new instance (process restarted)',
    neverTrims: IN_MEMORY,
  };
}

export function redisSubject(layout: RedisLayout, backing: RedisBacking): ProbeSubject {
  return {
    name: StoreName[redisKind(layout, backing.server.persistence)],
    open: async () => newRedisStore(layout, backing.client),
    openRing: async (ring) => newRedisStore(layout, backing.client, ring),
    async restart(before) {
      const prefix = (before as { prefix?: unknown }).prefix;
      if (typeof prefix !== 'string') throw new Error('not a store of this subject');
      await backing.crashAndRestart();
      return newRedisStore(layout, backing.client, undefined, prefix);
    },
    restartNote: `redis-server SIGKILLed and started again on its dir (${PersistenceName[backing.server.persistence]})`,
  };
}

/**
 * Tether: each `open` is its own "process" (connection, writer presence);
 * `restart` ends that process and opens the session on a new one; the
 * small ring is a log with `maxMsgsPerStream` (JetStream's
 * `max_msgs_per_subject`) in a namespace of its own. `close` ends the rest.
 */
export function tetherSubject(natsUrl: string): ProbeSubject & { close(): Promise<void> } {
  const processes = new Map<BenchEventStore, { log: SessionLog; presence: ReturnType<typeof createWriterPresence> }>();
  const start = async (log: SessionLog, sessionId?: string): Promise<TetherEventStore> => {
    const presence = createWriterPresence(log);
    const session = sessionId === undefined ? await log.createSession(BENCH_PRINCIPAL) : await log.getSession(sessionId);
    if (session === undefined) throw new Error(`session ${sessionId ?? ''} is gone from the registry`);
    const store = new TetherEventStore({ log, session, presence });
    processes.set(store, { log, presence });
    return store;
  };
  const end = async (store: BenchEventStore): Promise<void> => {
    const p = processes.get(store);
    processes.delete(store);
    await p?.presence.close();
    await p?.log.close();
  };
  return {
    name: StoreName.tether,
    open: async () => start(await SessionLog.create({ servers: natsUrl })),
    openRing: async (ring) => start(await SessionLog.create({ servers: natsUrl, namespace: `ring${ring}`, maxMsgsPerStream: ring })),
    async restart(before) {
      const sessionId = (before as TetherEventStore).sessionId;
      await end(before);
      return start(await SessionLog.create({ servers: natsUrl }), sessionId);
    },
    restartNote: 'the process restarted (connection and writer presence closed, the session opened on a new one); NATS kept running',
    async close() {
      for (const store of [...processes.keys()]) await end(store);
    },
  };
}
