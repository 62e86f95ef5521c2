import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionLogError, principalDigest, SessionLog } from '@tether/session-log';
import { ALICE, isolatedNames, MALLORY, sleep, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
beforeAll(async () => {
  fx = await startLogFixture();
});
afterAll(async () => {
  await fx.teardown();
});

/** Two instances of one log (two gateways): same stream and buckets, separate connections. */
async function twoInstances(limit: number, extra: { sessionIdleMs?: number } = {}): Promise<[SessionLog, SessionLog]> {
  const names = isolatedNames();
  return [await fx.open({ ...names, ...extra, maxSessionsPerPrincipal: limit }), await fx.open({ ...names, ...extra, maxSessionsPerPrincipal: limit })];
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return isSessionLogError(err) ? err.code : String(err);
  }
}

describe('sessions per principal', () => {
  it('refuses the session past the limit on any instance, naming the limit; other principals are not affected', async () => {
    const [a, b] = await twoInstances(2);
    await a.createSession(ALICE);
    await b.createSession(ALICE);
    const refused = await a.createSession(ALICE).catch((err: unknown) => err);
    expect(isSessionLogError(refused, 'too_many_sessions')).toBe(true);
    expect((refused as Error).message).toBe('this principal already has 2 open sessions; the limit is 2');
    expect((refused as { fields: { detail: unknown } }).fields.detail).toEqual({ open: 2, limit: 2 });
    expect(await codeOf(b.createSession(ALICE))).toBe('too_many_sessions');
    expect((await b.createSession(MALLORY)).state).toBe('active');
  });

  it('a closed session gives its place back, on whichever instance closed it', async () => {
    const [a, b] = await twoInstances(1);
    const first = await a.createSession(ALICE);
    expect(await codeOf(b.createSession(ALICE))).toBe('too_many_sessions');
    expect(await b.closeSession(first.sessionId)).toBe(true);
    const second = await b.createSession(ALICE);
    expect(second.sessionId).not.toBe(first.sessionId);
  });

  it('concurrent creations on two instances never both take the last place', async () => {
    const [a, b] = await twoInstances(3);
    const principal = principalDigest('Bearer racer');
    const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).createSession(principal)));
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r) => r.status === 'rejected').map((r) => (r as PromiseRejectedResult).reason as unknown);
    expect(created).toHaveLength(3);
    expect(refused.every((err) => isSessionLogError(err, 'too_many_sessions'))).toBe(true);
  });

  it('a session that idled out frees its place when the principal is at its limit', async () => {
    const [a] = await twoInstances(2, { sessionIdleMs: 1_000 });
    await a.createSession(ALICE);
    await a.createSession(ALICE);
    expect(await codeOf(a.createSession(ALICE))).toBe('too_many_sessions');
    // The registry forgets both after the idle timeout; nobody told the index.
    for (let waited = 0; waited < 10_000 && (await codeOf(a.createSession(ALICE))) === 'too_many_sessions'; waited += 250) await sleep(250);
    expect(await codeOf(a.createSession(ALICE))).toBeUndefined();
    expect(await codeOf(a.createSession(ALICE))).toBe('too_many_sessions');
  });

  it('no limit by default; a bad limit is a config error that names it', async () => {
    const log = await fx.open();
    for (let i = 0; i < 5; i += 1) await log.createSession(ALICE);
    const bad = await SessionLog.create({ servers: fx.server.url, ...isolatedNames(), maxSessionsPerPrincipal: -1 }).catch((err: unknown) => err);
    expect(isSessionLogError(bad, 'invalid_config')).toBe(true);
    expect((bad as Error).message).toMatch(/maxSessionsPerPrincipal=-1/);
  });
});
