import { request } from 'node:http';
import { connect } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNatsCluster, type NatsCluster } from '@tether/testing';

// A real 3-node cluster whose routes all run through the kit's route
// proxies: isolating a node must take every route it has (none may have
// gone around the proxies, e.g. to a peer's route port learnt by gossip),
// keep its client port working, and heal must bring the routes back,
// through the proxies again.

interface Route {
  readonly remoteName: string;
  readonly didSolicit: boolean;
  readonly port: number;
}

async function routez(monitorPort: number): Promise<Route[]> {
  const body = await new Promise<string>((done, reject) => {
    const req = request({ host: '127.0.0.1', port: monitorPort, path: '/routez', agent: false, timeout: 5_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(text));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('GET /routez timed out')));
    req.on('error', reject);
    req.end();
  });
  const routes = (JSON.parse(body) as { routes?: Record<string, unknown>[] }).routes ?? [];
  return routes.map((r) => ({ remoteName: String(r['remote_name']), didSolicit: r['did_solicit'] === true, port: Number(r['port']) }));
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

let cluster: NatsCluster;
let names: string[];
beforeAll(async () => {
  cluster = await startNatsCluster({ size: 3, proxyRoutes: true });
  names = await Promise.all(cluster.servers.map((s) => serverName(s.monitorPort)));
}, 120_000);
afterAll(async () => {
  await cluster?.cleanup();
});

async function serverName(monitorPort: number): Promise<string> {
  const body = await new Promise<string>((done, reject) => {
    request({ host: '127.0.0.1', port: monitorPort, path: '/varz', agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => done(text));
    })
      .on('error', reject)
      .end();
  });
  return String((JSON.parse(body) as { server_name: string }).server_name);
}

/**
 * Every route of every node, each explained by a proxy: the remote end of a
 * connection the node dialed is a proxy from it; of one it accepted, a
 * socket that a proxy to it opened. (`did_solicit` does not tell which: an
 * accepted route that replaced a dialed duplicate is marked solicited.)
 * Returns the routes that are not.
 */
async function routesAroundProxies(): Promise<string[]> {
  const stray: string[] = [];
  for (const [node, server] of cluster.servers.entries()) {
    for (const route of await routez(server.monitorPort)) {
      const dialed = cluster.routeProxies.some((p) => p.from === node && p.port === route.port);
      const accepted = cluster.routeProxies.some((p) => p.to === node && p.targetSidePorts().includes(route.port));
      if (!dialed && !accepted) stray.push(`${names[node]} has a route to ${route.remoteName} on port ${route.port} (solicited: ${route.didSolicit})`);
    }
  }
  return stray;
}

async function peersOf(node: number): Promise<string[]> {
  return [...new Set((await routez(cluster.servers[node]!.monitorPort)).map((r) => r.remoteName))].sort();
}

describe('startNatsCluster({ proxyRoutes: true })', () => {
  it('isolate cuts every route of a node, its clients keep working; heal restores the routes, all through the proxies', async () => {
    const [a, b, c] = names as [string, string, string];
    // Fully meshed, every route through a proxy.
    await until('a full mesh', async () => ((await peersOf(0)).length === 2 && (await peersOf(1)).length === 2 && (await peersOf(2)).length === 2 ? true : undefined));
    expect(await routesAroundProxies()).toEqual([]);

    // Twice: a rejoining node is gossiped to its peers, which must not dial it directly.
    for (let round = 1; round <= 2; round += 1) {
      const cut = cluster.isolate(0);
      expect(cut).toBeGreaterThan(0);
      // The isolated node keeps dialing (explicit routes retry every second) and is refused every time.
      await sleep(2_500);
      expect(await peersOf(0)).toEqual([]);
      expect(await peersOf(1)).toEqual([c]);
      expect(await peersOf(2)).toEqual([b]);
      expect(await routesAroundProxies()).toEqual([]);

      // Its client port is untouched: a new connection there works (a request answered through the node).
      const nc = await connect({ servers: cluster.urls[0]!, reconnect: false, ignoreClusterUpdates: true });
      try {
        nc.subscribe('isolated.echo', { callback: (_err, msg) => void msg.respond(msg.data) });
        expect((await nc.request('isolated.echo', 'ping', { timeout: 5_000 })).string()).toBe('ping');
      } finally {
        await nc.close();
      }

      cluster.heal(0);
      await until(`${a} back in the mesh (round ${round})`, async () => ((await peersOf(0)).length === 2 && (await peersOf(1)).includes(a) && (await peersOf(2)).includes(a) ? true : undefined));
      // Gossip of the rejoined node has had time to act.
      await sleep(1_500);
      expect(await routesAroundProxies()).toEqual([]);
      process.stdout.write(`round ${round}: ${cut} route connections cut; mesh after heal: ${JSON.stringify(await Promise.all([0, 1, 2].map(peersOf)))}\n`);
    }
  }, 120_000);
});
