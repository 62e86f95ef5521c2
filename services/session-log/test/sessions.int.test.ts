import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { SessionState } from '@tether/cursor-proto';
import type { CursorServiceClient } from '@tether/cursor-proto';
import { failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

let fx: ServiceFixture;
let alice: ReturnType<typeof rpc>;
let bob: ReturnType<typeof rpc>;
let aliceClient: CursorServiceClient;
beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start();
  aliceClient = fx.client();
  alice = rpc(aliceClient);
  bob = rpc(fx.client({ token: TOKENS.bob }));
});
afterAll(async () => {
  await fx.teardown();
});

describe('sessions over gRPC', () => {
  it('OpenSession returns a fresh id and epoch; GetSession finds it for the same principal', async () => {
    const { session } = await alice.open('user-1', { route: '/mcp', protocol: '2025-06-18' });
    expect(session?.sessionId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(session?.epoch).toMatch(/^[a-z2-7]{10}$/);
    expect(session?.state).toBe(SessionState.ACTIVE);
    // The caller's metadata comes back; the service's own (tether.caller) does not.
    expect(session?.meta).toEqual({ route: '/mcp', protocol: '2025-06-18' });
    const got = await alice.get(session!.sessionId, 'user-1');
    expect(got.session).toEqual(session);
  });

  it('another principal, another caller and an unknown id all look the same: NOT_FOUND session_not_found', async () => {
    const { session } = await alice.open('user-1');
    const id = session!.sessionId;
    const failures = [
      await failure(alice.get(id, 'user-2')),
      await failure(bob.get(id, 'user-1')),
      await failure(alice.get('CCCCCCCCCCCCCCCCCCCCCC', 'user-1')),
    ];
    for (const f of failures) {
      expect(f.code).toBe(status.NOT_FOUND);
      expect(f.message).toBe('session not found');
      expect(f.detail?.code).toBe('session_not_found');
    }
    // Bob cannot touch, close, read or append to it either.
    expect(await bob.touch(id)).toEqual({ touched: false });
    expect(await bob.close(id)).toEqual({ closed: false });
    expect((await failure(bob.head(id, '0'))).detail?.code).toBe('session_not_found');
    expect((await failure(bob.append({ sessionId: id, stream: '0' }))).code).toBe(status.NOT_FOUND);
    expect((await alice.get(id, 'user-1')).session?.state).toBe(SessionState.ACTIVE);
  });

  it('TouchSession restarts the idle clock; CloseSession closes once, then the session is gone', async () => {
    const { session } = await alice.open();
    const id = session!.sessionId;
    await new Promise((r) => setTimeout(r, 20));
    expect(await alice.touch(id)).toEqual({ touched: true });
    expect((await alice.get(id)).session!.touchedAtMs).toBeGreaterThan(session!.touchedAtMs);
    expect(await alice.close(id)).toEqual({ closed: true });
    expect((await failure(alice.get(id))).code).toBe(status.NOT_FOUND);
    expect(await alice.touch(id)).toEqual({ touched: false });
    const append = await failure(alice.append({ sessionId: id, stream: '0' }));
    expect([append.code, append.detail?.code]).toEqual([status.NOT_FOUND, 'session_closed']);
    expect(await alice.close('DDDDDDDDDDDDDDDDDDDDDD')).toEqual({ closed: false });
  });

  it('refuses malformed ids and metadata with INVALID_ARGUMENT naming the problem', async () => {
    const bad = await failure(alice.get('not-a-session', 'x'));
    expect([bad.code, bad.detail?.code]).toEqual([status.INVALID_ARGUMENT, 'invalid_argument']);
    expect(bad.message).toContain('session_id');
    const reserved = await failure(alice.open('u', { 'tether.caller': 'bob' }));
    expect(reserved.code).toBe(status.INVALID_ARGUMENT);
    expect(reserved.message).toContain('reserved');
    const many = await failure(alice.open('u', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']))));
    expect(many.message).toContain('at most 32 entries');
    const huge = await failure(alice.open('u', { big: 'x'.repeat(5000) }));
    expect(huge.message).toContain('4096');
  });

  it('--max-sessions-per-principal: RESOURCE_EXHAUSTED too_many_sessions past it, per caller and principal; CloseSession frees a place', async () => {
    const limited = await fx.start(['--max-sessions-per-principal', '2'], 'session-log-limited');
    const a = rpc(fx.client({ target: limited.target }));
    const b = rpc(fx.client({ target: limited.target, token: TOKENS.bob }));
    const first = (await a.open('user-9')).session!;
    await a.open('user-9');
    const refused = await failure(a.open('user-9'));
    expect([refused.code, refused.detail?.code, refused.message]).toEqual([status.RESOURCE_EXHAUSTED, 'too_many_sessions', 'this principal already has 2 open sessions; the limit is 2']);
    expect(refused.detail?.facts).toEqual({ open: '2', limit: '2' });
    // Bob's "user-9" is not Alice's: a caller's principals are its own.
    expect((await b.open('user-9')).session?.state).toBe(SessionState.ACTIVE);
    expect(await a.close(first.sessionId)).toEqual({ closed: true });
    expect((await a.open('user-9')).session?.state).toBe(SessionState.ACTIVE);
  });

  it('honours deadlines: an expired deadline is DEADLINE_EXCEEDED', async () => {
    const { callUnary } = await import('@tether/cursor-proto');
    const f = await failure(callUnary(aliceClient.openSession.bind(aliceClient), { principal: 'p', meta: {} }, { deadlineMs: -1 }));
    expect(f.code).toBe(status.DEADLINE_EXCEEDED);
  });
});
