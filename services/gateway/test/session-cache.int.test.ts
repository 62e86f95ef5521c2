/**
 * The gateway's session cache on a real nats-server: a close on another
 * instance reaches it on the control subject, and it never answers for a
 * principal or a session the registry would refuse.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionLogError, principalDigest, SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { SessionCache } from '../src/log/session-cache.js';

const ALICE = principalDigest('Bearer alice');
const MALLORY = principalDigest('Bearer mallory');

let nats: NatsServer;
let here: SessionLog;
let elsewhere: SessionLog;
let cache: SessionCache;
let reads = 0;

beforeAll(async () => {
  nats = await startNatsServer();
  const layout = { streamName: `CACHE_${process.pid}`, subjectPrefix: `cache${process.pid}`, sessionsBucket: `cs_${process.pid}`, leasesBucket: `cl_${process.pid}`, principalsBucket: `cp_${process.pid}` };
  here = await SessionLog.create({ servers: nats.url, ...layout });
  elsewhere = await SessionLog.create({ servers: nats.url, ...layout });
  cache = new SessionCache((listener) => here.listenAllControl(listener), here.config.sessionIdleMs, (sessionId, principal) => {
    reads += 1;
    return here.sessions.authorize(sessionId, principal);
  });
});
afterAll(async () => {
  cache.close();
  await here.close();
  await elsewhere.close();
  await nats.cleanup();
});

const notFound = (err: unknown): boolean => isSessionLogError(err, 'session_not_found');

describe('SessionCache', () => {
  it('reads the registry once, then answers from memory', async () => {
    const s = await elsewhere.createSession(ALICE);
    const before = reads;
    expect((await cache.authorize(s.sessionId, ALICE)).epoch).toBe(s.epoch);
    expect((await cache.authorize(s.sessionId, ALICE)).epoch).toBe(s.epoch);
    expect(reads - before).toBe(1);
  });

  it('refuses another principal from the cache exactly as the registry does', async () => {
    const s = await elsewhere.createSession(ALICE);
    await cache.authorize(s.sessionId, ALICE);
    await expect(cache.authorize(s.sessionId, MALLORY)).rejects.toSatisfy(notFound);
  });

  it('drops a session closed on another instance as soon as its control message arrives', async () => {
    const s = await elsewhere.createSession(ALICE);
    await cache.authorize(s.sessionId, ALICE);
    expect(await elsewhere.closeSession(s.sessionId, 'other')).toBe(true);
    await here.connection.flush();
    let refused = false;
    for (let i = 0; i < 50 && !refused; i += 1) {
      refused = await cache.authorize(s.sessionId, ALICE).then(
        () => false,
        (err: unknown) => notFound(err),
      );
      if (!refused) await new Promise((r) => setTimeout(r, 10));
    }
    expect(refused).toBe(true);
  });

  it('does not cache a record read while a close was heard (the read may predate it)', async () => {
    const s = await elsewhere.createSession(ALICE);
    const other = await elsewhere.createSession(ALICE);
    let count = 0;
    const slow = new SessionCache((listener) => here.listenAllControl(listener), here.config.sessionIdleMs, async (sessionId, principal) => {
      count += 1;
      const record = await here.sessions.authorize(sessionId, principal);
      if (count === 1) {
        // A close of some session arrives while the first read is in flight.
        await elsewhere.closeSession(other.sessionId, 'other');
        await new Promise((r) => setTimeout(r, 100));
      }
      return record;
    });
    try {
      await slow.authorize(s.sessionId, ALICE);
      await slow.authorize(s.sessionId, ALICE);
      await slow.authorize(s.sessionId, ALICE);
      // The first answer was not kept; the second was.
      expect(count).toBe(2);
    } finally {
      slow.close();
    }
  });

  it('reads again once the idle timeout it knows of has run out', async () => {
    const s = await elsewhere.createSession(ALICE);
    let count = 0;
    const short = new SessionCache((listener) => here.listenAllControl(listener), 50, (id, p) => {
      count += 1;
      return here.sessions.authorize(id, p);
    });
    try {
      await short.authorize(s.sessionId, ALICE);
      await new Promise((r) => setTimeout(r, 80));
      await short.authorize(s.sessionId, ALICE);
      expect(count).toBe(2);
    } finally {
      short.close();
    }
  });
});
