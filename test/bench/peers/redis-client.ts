import { createClient } from 'redis';

// No reconnect: a server restarted by a probe is met with a new client, as a restarted process would.
const newClient = (url: string) => createClient({ url, socket: { reconnectStrategy: false } });

/** A node-redis client as the peer stores use it (the client's default protocol and types). */
export type BenchRedis = ReturnType<typeof newClient>;

/** Connects to a bench redis-server. */
export async function connectRedis(url: string): Promise<BenchRedis> {
  const client = newClient(url);
  // node-redis emits 'error' when the server goes away; unhandled, it would end the bench.
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Closes without waiting on a server that may be gone. */
export function closeRedis(client: BenchRedis): void {
  if (client.isOpen) client.destroy();
}
