import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isEpoch, isSessionId } from '@tether/protocol';
import { isSessionLogError } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ALICE, MALLORY, bytes, sleep, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open();
});
afterAll(async () => {
  await fx.teardown();
});

describe('sessions', () => {
  it('creates sessions with unguessable ids, a random epoch, the principal digest and metadata', async () => {
    const a = await log.createSession(ALICE, { route: '/mcp', upstream: 'http://127.0.0.1:3001/mcp' });
    const b = await log.createSession(ALICE);
    expect(isSessionId(a.sessionId)).toBe(true);
    expect(isEpoch(a.epoch)).toBe(true);
    expect(a.sessionId).not.toBe(b.sessionId);
    expect(a.epoch).not.toBe(b.epoch);
    const got = await log.getSession(a.sessionId);
    expect(got).toEqual(a);
    expect(got?.meta.upstream).toBe('http://127.0.0.1:3001/mcp');
  });

  it('authorizes only the creating principal; a mismatch looks exactly like an unknown session', async () => {
    const s = await log.createSession(ALICE);
    await expect(log.sessions.authorize(s.sessionId, ALICE)).resolves.toMatchObject({ sessionId: s.sessionId });
    const mismatch = await log.sessions.authorize(s.sessionId, MALLORY).catch((e: unknown) => e);
    const unknown = await log.sessions.authorize('AAAAAAAAAAAAAAAAAAAAAA', ALICE).catch((e: unknown) => e);
    expect(isSessionLogError(mismatch, 'session_not_found')).toBe(true);
    expect(isSessionLogError(unknown, 'session_not_found')).toBe(true);
    expect((mismatch as Error).message).toBe((unknown as Error).message);
  });

  it('rejects a malformed session id with invalid_argument instead of building a subject from it', async () => {
    for (const bad of ['', 'a.b', 'tether.>', '*', 'x'.repeat(23)]) {
      const err = await log.getSession(bad).catch((e: unknown) => e);
      expect(isSessionLogError(err, 'invalid_argument')).toBe(true);
    }
  });

  it('touch moves the idle clock; an untouched session idles out', async () => {
    const short = await fx.open({ sessionIdleMs: 1_500 });
    const s = await short.createSession(ALICE);
    await sleep(900);
    const touched = await short.sessions.touch(s.sessionId);
    expect(touched!.touchedAtMs).toBeGreaterThan(s.touchedAtMs);
    await sleep(900);
    expect(await short.getSession(s.sessionId)).toBeDefined();
    await sleep(2_500);
    expect(await short.getSession(s.sessionId)).toBeUndefined();
  });

  it('close marks the session closed, purges its events and tells every instance', async () => {
    const s = await log.createSession(ALICE);
    const other = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('{"a":1}'));
    await log.append(other.sessionId, '0', 'event', bytes('{"b":1}'));
    const nc = await fx.raw();
    const sub = nc.subscribe(`${log.config.subjectPrefix}.ctl.${s.sessionId}`, { max: 1 });
    const control = (async () => {
      for await (const m of sub) return m.json<{ type: string; sessionId: string }>();
      return undefined;
    })();
    expect(await log.closeSession(s.sessionId)).toBe(true);
    expect(await control).toEqual({ type: 'closed', sessionId: s.sessionId });
    expect((await log.getSession(s.sessionId))?.state).toBe('closed');
    const err = await log.readPage(s.sessionId, '0', 0, 10).catch((e: unknown) => e);
    expect(isSessionLogError(err, 'session_not_found')).toBe(true);
    const appendErr = await log.append(s.sessionId, '0', 'event', bytes('{}')).catch((e: unknown) => e);
    expect(isSessionLogError(appendErr, 'session_closed')).toBe(true);
    // The other session's events are untouched.
    expect(await log.readPage(other.sessionId, '0', 0, 10)).toHaveLength(1);
    expect(await log.closeSession('BBBBBBBBBBBBBBBBBBBBBB')).toBe(false);
  });
});

describe('leases', () => {
  it('acquire, held by another, renew, release, and takeover after expiry', async () => {
    const s = await log.createSession(ALICE);
    const lease = await log.leases.acquire(s.sessionId, '0', 'gw-a', 60_000);
    const held = await log.leases.acquire(s.sessionId, '0', 'gw-b', 60_000).catch((e: unknown) => e);
    expect(isSessionLogError(held, 'lease_held')).toBe(true);
    expect((held as { fields: { holder?: string } }).fields.holder).toBe('gw-a');
    const renewed = await log.leases.renew(lease, 60_000);
    expect(renewed.revision).toBeGreaterThan(lease.revision);
    await expect(log.leases.renew(lease, 60_000)).rejects.toMatchObject({ code: 'lease_lost' });
    await log.leases.release(renewed);
    expect(await log.leases.holder(s.sessionId, '0')).toBeUndefined();
    const b = await log.leases.acquire(s.sessionId, '0', 'gw-b', 300);
    await sleep(400);
    expect(await log.leases.holder(s.sessionId, '0')).toBeUndefined();
    const c = await log.leases.acquire(s.sessionId, '0', 'gw-c', 60_000);
    expect(c.owner).toBe('gw-c');
    await expect(log.leases.renew(b, 60_000)).rejects.toMatchObject({ code: 'lease_lost' });
  });

  it('refuses malformed session and stream ids with invalid_argument, never making a strange key', async () => {
    const s = await log.createSession(ALICE);
    await expect(log.leases.acquire(s.sessionId, 'a.b.>', 'gw-a', 60_000)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(log.leases.acquire('not-a-session', '0', 'gw-a', 60_000)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(log.leases.holder(s.sessionId, '*')).rejects.toMatchObject({ code: 'invalid_argument' });
  });
});
