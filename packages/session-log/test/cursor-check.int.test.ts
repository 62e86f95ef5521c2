import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isSessionLogError } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ALICE, bytes, startLogFixture } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

// A cursor whose position holds nothing any more (another session's
// message, purged) is the client's mistake, not the log's: it is refused as
// an invalid argument, never reported as the log breaking its chain (found
// by `npm run fuzz`: Follow answered DATA_LOSS stream_diverged).

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open();
});
afterAll(async () => {
  await fx.teardown();
});

describe('a cursor at a position that holds nothing', () => {
  it('follow and readPage refuse it with invalid_argument when the stream does not go on from there', async () => {
    const gone = await log.createSession(ALICE);
    const purged = await log.append(gone.sessionId, '0', 'event', bytes('another session'), { opensStream: gone });
    await log.closeSession(gone.sessionId);
    const s = await log.createSession(ALICE);
    const first = await log.append(s.sessionId, '0', 'event', bytes('one'), { opensStream: s });
    await log.append(s.sessionId, '0', 'event', bytes('two'));
    expect(first.pos).toBeGreaterThan(purged.pos);

    const cursor = { seq: 1, pos: purged.pos };
    const page = await log.readPage(s.sessionId, '0', cursor.seq, 10, cursor.pos).catch((e: unknown) => e);
    expect(isSessionLogError(page, 'invalid_argument')).toBe(true);
    const follow = await (async () => {
      for await (const _ of log.follow(s.sessionId, '0', cursor)) void _;
    })().catch((e: unknown) => e);
    expect(isSessionLogError(follow, 'invalid_argument')).toBe(true);
    expect((follow as Error).message).toMatch(/no event of this stream is at that position/);

    // The real cursor of seq 1 still reads on.
    const good = await log.readPage(s.sessionId, '0', 1, 10, first.pos);
    expect(good.map((e) => e.seq)).toEqual([2]);
  });
});
