import { request } from 'node:http';
import { jetstreamManager, StorageType } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { LOOPBACK } from './ports.js';

/** A readiness probe: undefined when ready, else why not (kept for the timeout error). */
export type Probe = (timeoutMs: number) => Promise<string | undefined>;

/**
 * GET /healthz on the monitor port. It answers 200 only once the server
 * accepts clients and, with JetStream, once JetStream is enabled; in a
 * cluster it also needs contact with a meta leader and this node's streams
 * and consumers to be current, which is what a restarted member must reach.
 */
export function healthzProbe(monitorPort: number): Probe {
  return async (timeoutMs) => {
    const res = await httpGet(monitorPort, '/healthz', timeoutMs);
    return res.status === 200 ? undefined : `/healthz ${res.status}: ${res.body.trim().slice(0, 300)}`;
  };
}

/**
 * Asks the JetStream API for account info through `url`, on a fresh
 * connection that never reconnects. This is the check clients depend on: it
 * fails until JetStream has recovered its store and (clustered) a meta leader
 * answers.
 */
export function jetStreamApiProbe(url: string): Probe {
  return async (timeoutMs) => {
    const nc = await connect({ servers: url, reconnect: false, timeout: timeoutMs, ignoreClusterUpdates: true, name: 'tether-testing-readiness' });
    try {
      const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
      await jsm.getAccountInfo();
      return undefined;
    } finally {
      await nc.close();
    }
  };
}

/**
 * Creates, then deletes, a throwaway memory stream with `replicas` replicas
 * through `url`. A meta group whose peers are all current can still refuse
 * a placement for a moment ("no suitable peers for placement, peer offline":
 * the leader has not yet had every peer's JetStream stats), which a test's
 * first R3 stream met on a loaded machine. Ready once a placement succeeds.
 */
export function placementProbe(url: string, replicas: number): Probe {
  return async (timeoutMs) => {
    const nc = await connect({ servers: url, reconnect: false, timeout: timeoutMs, ignoreClusterUpdates: true, name: 'tether-testing-readiness' });
    const name = `TETHER_READY_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    try {
      const jsm = await jetstreamManager(nc, { timeout: timeoutMs, checkAPI: false });
      try {
        await jsm.streams.add({ name, subjects: [`_tether_ready.${name}`], num_replicas: replicas, storage: StorageType.Memory, max_msgs: 1 });
      } catch (err) {
        return `an R${replicas} placement: ${String(err).slice(0, 200)}`;
      }
      await jsm.streams.delete(name).catch(() => undefined);
      return undefined;
    } finally {
      await nc.close();
    }
  };
}

/** The part of /jsz that says who leads the JetStream meta group. */
export interface MetaClusterState {
  readonly leader: string | undefined;
  readonly clusterSize: number | undefined;
  /** Peers as the leader sees them (the leader itself is not listed). */
  readonly replicas: readonly { readonly name: string; readonly current: boolean; readonly offline: boolean }[];
}

/** GET /jsz and pick out `meta_cluster`. */
export async function readMetaCluster(monitorPort: number, timeoutMs: number): Promise<MetaClusterState> {
  const res = await httpGet(monitorPort, '/jsz', timeoutMs);
  if (res.status !== 200) throw new Error(`/jsz ${res.status}: ${res.body.slice(0, 300)}`);
  const meta = (JSON.parse(res.body) as { meta_cluster?: Record<string, unknown> }).meta_cluster ?? {};
  const replicas = Array.isArray(meta['replicas']) ? (meta['replicas'] as Record<string, unknown>[]) : [];
  return {
    leader: typeof meta['leader'] === 'string' && meta['leader'] !== '' ? meta['leader'] : undefined,
    clusterSize: typeof meta['cluster_size'] === 'number' ? meta['cluster_size'] : undefined,
    replicas: replicas.map((r) => ({ name: String(r['name']), current: r['current'] === true, offline: r['offline'] === true })),
  };
}

/**
 * Runs `probe` until it reports ready, `shouldStop` returns a reason, or the
 * deadline passes. Backs off from 25 ms to 250 ms: fast when the server is
 * quick, gentle on a 2-core machine when it is not. On failure, `reason` is
 * the stop reason or, on timeout, what the last probe said.
 */
export async function pollUntilReady(
  probe: Probe,
  opts: { deadline: number; shouldStop: () => string | undefined },
): Promise<{ ok: true } | { ok: false; stopped: boolean; reason: string }> {
  let delayMs = 25;
  for (;;) {
    const stop = opts.shouldStop();
    if (stop !== undefined) return { ok: false, stopped: true, reason: stop };
    // Always probe at least once, even with a tiny budget.
    const budgetMs = Math.max(100, Math.min(2_000, opts.deadline - Date.now()));
    let reason: string | undefined;
    try {
      reason = await probe(budgetMs);
    } catch (err) {
      reason = err instanceof Error ? err.message : String(err);
    }
    if (reason === undefined) return { ok: true };
    const remaining = opts.deadline - Date.now();
    if (remaining <= 0) return { ok: false, stopped: false, reason };
    await sleep(Math.min(delayMs, remaining));
    delayMs = Math.min(250, delayMs * 2);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Plain GET on loopback without keep-alive, so no socket outlives the probe. */
function httpGet(port: number, path: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolveRes, reject) => {
    const req = request({ host: LOOPBACK, port, path, method: 'GET', agent: false, timeout: timeoutMs, headers: { connection: 'close' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolveRes({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out after ${timeoutMs}ms`)));
    req.on('error', reject);
    req.end();
  });
}
