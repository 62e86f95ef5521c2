import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status } from '@grpc/grpc-js';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { ResumeVerdict } from '@tether/cursor-proto';
import type { CursorServiceClient } from '@tether/cursor-proto';
import { bytes, collect, failure, rpc, startServiceFixture } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

// Three services on one nats-server: the default layout and two namespaces.
let fx: ServiceFixture;
const clients = new Map<string, CursorServiceClient>();
beforeAll(async () => {
  fx = await startServiceFixture();
  for (const ns of ['', 'alpha', 'beta']) {
    const service = await fx.start(ns === '' ? [] : ['--namespace', ns], `session-log-${ns || 'default'}`);
    clients.set(ns, fx.client({ target: service.target }));
  }
});
afterAll(async () => {
  await fx.teardown();
});

const on = (ns: string) => rpc(clients.get(ns)!);
const resume = (ns: string, sessionId: string, lastEventId: string) => clients.get(ns)!.resume({ sessionId, lastEventId, principal: 'user-1' }, new Metadata());
const refusal = (call: ReturnType<typeof resume>) =>
  collect(call).then(
    (msgs) => { throw new Error(`expected a refusal, got ${msgs.length} messages`); },
    (err: Awaited<ReturnType<typeof failure>> & { received: unknown[] }) => ({ code: err.code, verdict: err.detail?.verdict, received: err.received.length }),
  );

async function seeded(ns: string): Promise<{ sessionId: string; ids: string[] }> {
  const { session } = await on(ns).open('user-1');
  const ids: string[] = [];
  for (let i = 1; i <= 3; i += 1) ids.push((await on(ns).append({ sessionId: session!.sessionId, stream: '0', payload: bytes(`e${i}`) })).id);
  return { sessionId: session!.sessionId, ids };
}

describe('tether-session-log namespaces on one NATS account', () => {
  it('start side by side, each with its own stream, subjects and buckets; the default keeps today\'s names', async () => {
    const nc = await connect({ servers: fx.nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      const subjects = new Map<string, string[]>();
      for await (const info of jsm.streams.list()) subjects.set(info.config.name, info.config.subjects ?? []);
      expect(subjects.get('TETHER_LOG')).toEqual(['tether.log.>', 'tether.audit.>']);
      expect(subjects.get('TETHER_LOG_alpha')).toEqual(['tether_alpha.log.>', 'tether_alpha.audit.>']);
      expect(subjects.get('TETHER_LOG_beta')).toEqual(['tether_beta.log.>', 'tether_beta.audit.>']);
      const buckets: string[] = [];
      for await (const s of await new Kvm(nc).list()) buckets.push(s.bucket);
      for (const suffix of ['', '_alpha', '_beta']) {
        for (const base of ['tether_sessions', 'tether_leases', 'tether_principals']) expect(buckets).toContain(`${base}${suffix}`);
      }
      expect(buckets).toHaveLength(9);
    } finally {
      await nc.close();
    }
  });

  it('a session of one namespace is unknown in another, even to the same caller and principal', async () => {
    const { sessionId, ids } = await seeded('alpha');
    expect((await on('alpha').get(sessionId)).session?.sessionId).toBe(sessionId);
    for (const ns of ['beta', '']) {
      const f = await failure(on(ns).get(sessionId));
      expect([f.code, f.detail?.code]).toEqual([status.NOT_FOUND, 'session_not_found']);
      expect((await failure(on(ns).append({ sessionId, stream: '0', payload: bytes('x') }))).code).toBe(status.NOT_FOUND);
      expect(await on(ns).touch(sessionId)).toEqual({ touched: false });
      expect(await on(ns).close(sessionId)).toEqual({ closed: false });
      expect(await refusal(resume(ns, sessionId, ids[0]!))).toEqual({ code: status.NOT_FOUND, verdict: ResumeVerdict.UNKNOWN_SESSION, received: 0 });
    }
    // Untouched at home.
    const rest = await collect(resume('alpha', sessionId, ids[0]!), 3);
    expect(rest.length).toBeGreaterThan(0);
  });

  it('a cursor of one namespace is refused by another, on a session of its own', async () => {
    const alpha = await seeded('alpha');
    const beta = await seeded('beta');
    expect(await refusal(resume('beta', beta.sessionId, alpha.ids[1]!))).toEqual({ code: status.FAILED_PRECONDITION, verdict: ResumeVerdict.EPOCH_MISMATCH, received: 0 });
  });
});
