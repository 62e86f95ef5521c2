import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SessionLog, isSessionLogError } from '@tether/session-log';
import type { LogEvent } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { ALICE, bytes, isolatedNames, sleep } from './fixtures.js';

// This file kills its own server, so it has one to itself.
let server: NatsServer;
beforeAll(async () => {
  server = await startNatsServer();
});
afterAll(async () => {
  await server.cleanup();
});

/** Appends, retrying explicit failures while the server is away; gives up after `deadlineMs`. */
async function appendThroughOutage(log: SessionLog, sessionId: string, stream: string, payload: string, deadlineMs: number) {
  const until = Date.now() + deadlineMs;
  for (let attempt = 1; ; attempt += 1) {
    try {
      // `retry`: an attempt that failed with an unknown outcome may have landed.
      return await log.append(sessionId, stream, 'event', bytes(payload), { retry: attempt > 1 });
    } catch (err) {
      if (!isSessionLogError(err) || Date.now() > until) throw err;
      await sleep(100);
    }
  }
}

describe('nats-server restarted mid-tail', () => {
  it('the tail continues without holes after kill -9 and restart on the same data, or ends explicitly', async () => {
    const log = await SessionLog.create({ servers: server.url, ...isolatedNames(), requestTimeoutMs: 1_000 });
    const session = await log.createSession(ALICE);
    const first = await log.append(session.sessionId, '0', 'event', bytes('0'));
    const result = await log.resume(session.sessionId, first.id, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const got: LogEvent[] = [];
    let failure: unknown;
    const reader = (async () => {
      try {
        for await (const event of result.events()) got.push(event);
      } catch (err) {
        failure = err;
      }
    })();
    const appended: string[] = [];
    for (let i = 1; i <= 200; i += 1) {
      appended.push((await appendThroughOutage(log, session.sessionId, '0', String(i), 20_000)).id);
      if (i === 100) {
        await server.kill();
        await sleep(300);
        await server.restart();
      }
    }
    const end = await appendThroughOutage(log, session.sessionId, '0', 'end', 20_000);
    appended.push(end.id);
    await log.append(session.sessionId, '0', 'end', new Uint8Array());
    await Promise.race([reader, sleep(15_000)]);
    if (failure === undefined) {
      // Continued: every acknowledged event, in order, nothing else.
      expect(got.slice(0, appended.length).map((e) => e.id)).toEqual(appended);
      expect(got.at(-1)?.kind).toBe('end');
    } else {
      // Ended: explicitly, and what it delivered before was contiguous.
      expect(isSessionLogError(failure)).toBe(true);
      expect(got.map((e) => e.id)).toEqual(appended.slice(0, got.length));
    }
    process.stdout.write(`restart mid-tail: delivered ${got.length}, ${failure === undefined ? 'continued' : `ended with ${(failure as { code: string }).code}`}\n`);
    await log.close();
  });
});
