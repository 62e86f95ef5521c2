/**
 * Where a cluster's Raft leaders are, and moving them. Copied from
 * packages/session-log/test/partition-failover.int.test.ts (`lead()` and
 * its helpers) rather than imported from a test.
 */
import type { JetStreamManager } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** A node's `server_name`, from its monitor's /varz. */
export async function serverName(monitorPort: number): Promise<string> {
  const varz = (await (await fetch(`http://127.0.0.1:${monitorPort}/varz`)).json()) as { server_name: string };
  return varz.server_name;
}

/** The JetStream meta leader as a node's monitor sees it (/jsz), undefined if it names none. */
export async function metaLeader(monitorPort: number): Promise<string | undefined> {
  try {
    const jsz = (await (await fetch(`http://127.0.0.1:${monitorPort}/jsz`)).json()) as { meta_cluster?: { leader?: string } };
    return jsz.meta_cluster?.leader;
  } catch {
    return undefined;
  }
}

/** A stream's Raft leader (`KV_<bucket>` for a bucket), undefined while it has none. */
export async function leaderOf(jsm: JetStreamManager, stream: string): Promise<string | undefined> {
  try {
    return (await jsm.streams.info(stream)).cluster?.leader;
  } catch {
    return undefined;
  }
}

/** Moves a stream's Raft leadership to `target`: a step-down that names it as the preferred successor, until it holds. */
export async function lead(nc: NatsConnection, jsm: JetStreamManager, stream: string, target: string): Promise<void> {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    if ((await leaderOf(jsm, stream)) === target) return;
    await nc.request(`$JS.API.STREAM.LEADER.STEPDOWN.${stream}`, JSON.stringify({ placement: { preferred: target } }), { timeout: 5_000 }).catch(() => undefined);
    for (let wait = 0; wait < 20 && (await leaderOf(jsm, stream)) === undefined; wait += 1) await sleep(100);
  }
  throw new Error(`${stream}: leadership did not move to ${target}`);
}
