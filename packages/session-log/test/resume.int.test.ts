import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeEventId } from '@tether/protocol';
import type { SessionLog } from '@tether/session-log';
import { ALICE, MALLORY, bytes, drainResume, sleep, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

let fx: LogFixture;
let log: SessionLog;
beforeAll(async () => {
  fx = await startLogFixture();
});
afterAll(async () => {
  await fx.teardown();
});

async function seeded(count: number, stream = log.newStreamId()) {
  const session = await log.createSession(ALICE);
  const ids: string[] = [];
  for (let i = 1; i <= count; i += 1) ids.push((await log.append(session.sessionId, stream, 'event', bytes(`e${i}`))).id);
  return { session, stream, ids };
}

// Every verdict on the unpartitioned log and on 4 partitions (issue 24): the
// rules are the same, only which stream a session's events are in differs.
describe.each([1, 4])('resume classification (DESIGN section 7), %i partition(s)', (partitions) => {
  beforeAll(async () => {
    log = await fx.open({ partitions });
  });
  it('resumed: yields exactly the suffix after the cursor, then ends after the end marker', async () => {
    const { session, stream, ids } = await seeded(10);
    ids.push((await log.append(session.sessionId, stream, 'end', new Uint8Array())).id);
    const events = await drainResume(await log.resume(session.sessionId, ids[3]!, ALICE));
    expect(events.map((e) => e.id)).toEqual(ids.slice(4));
    expect(events.slice(0, -1).map((e) => text(e.payload))).toEqual(['e5', 'e6', 'e7', 'e8', 'e9', 'e10']);
    expect(events.at(-1)!.kind).toBe('end');
  });

  it('nothingLeft: set only when nothing but the end marker follows the cursor', async () => {
    const { session, stream, ids } = await seeded(3);
    const end = await log.append(session.sessionId, stream, 'end', new Uint8Array());
    const at = async (id: string) => {
      const r = await log.resume(session.sessionId, id, ALICE);
      return r.verdict === 'resumed' ? r.nothingLeft : r.verdict;
    };
    expect(await at(ids[1]!)).toBe(false);
    expect(await at(ids[2]!)).toBe(true);
    expect(await at(end.id)).toBe(true);
    const open = await seeded(2);
    expect(await (async () => {
      const r = await log.resume(open.session.sessionId, open.ids[1]!, ALICE);
      return r.verdict === 'resumed' ? r.nothingLeft : r.verdict;
    })()).toBe(false);
  });

  it('resumed at the end marker itself yields nothing and ends at once', async () => {
    const { session, stream } = await seeded(2);
    const end = await log.append(session.sessionId, stream, 'end', new Uint8Array());
    const result = await log.resume(session.sessionId, end.id, ALICE);
    expect(result.verdict).toBe('resumed');
    expect(await drainResume(result)).toEqual([]);
  });

  it('resumed at the live head waits for the next event', async () => {
    const { session, stream, ids } = await seeded(3);
    const result = await log.resume(session.sessionId, ids[2]!, ALICE);
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const iterator = result.events();
    const next = iterator.next();
    await sleep(100);
    const appended = await log.append(session.sessionId, stream, 'event', bytes('live'));
    expect((await next).value).toMatchObject({ id: appended.id, seq: 4 });
    await iterator.return();
  });

  it('malformed: a Last-Event-ID that does not decode, with the reason', async () => {
    const { session } = await seeded(1);
    for (const bad of ['', 'abc', '1-2-3-4', 'aaaaaaaaaa-0-01-1', 'aaaaaaaaaa-0-1-1-1', 'ä']) {
      const result = await log.resume(session.sessionId, bad, ALICE);
      expect(result.verdict).toBe('malformed');
      expect(result.verdict !== 'resumed' && result.reason).toMatch(/Last-Event-ID is malformed: ./);
    }
  });

  it('unknown_session: another principal, an unknown id, a closed session, all alike', async () => {
    const { session, ids } = await seeded(2);
    const other = await log.resume(session.sessionId, ids[0]!, MALLORY);
    const unknown = await log.resume('CCCCCCCCCCCCCCCCCCCCCC', ids[0]!, ALICE);
    await log.closeSession(session.sessionId);
    const closed = await log.resume(session.sessionId, ids[0]!, ALICE);
    for (const r of [other, unknown, closed]) {
      expect(r.verdict).toBe('unknown_session');
      expect(r.verdict !== 'resumed' && r.reason).toBe('the session is unknown, closed, or not yours');
    }
  });

  it('epoch_mismatch: a cursor from another session (another incarnation) never reads this one', async () => {
    const a = await seeded(3);
    const b = await seeded(3, a.stream);
    const result = await log.resume(b.session.sessionId, a.ids[1]!, ALICE);
    expect(result.verdict).toBe('epoch_mismatch');
  });

  it('ahead: a cursor beyond anything the log holds', async () => {
    const { session, stream, ids } = await seeded(3);
    const last = ids[2]!.split('-');
    const beyond = encodeEventId({ epoch: session.epoch, stream, seq: 4, pos: Number(last[3]) + 1_000 });
    const result = await log.resume(session.sessionId, beyond, ALICE);
    expect(result.verdict).toBe('ahead');
  });

  it('diverged: the position holds another event (another stream, or another seq)', async () => {
    const { session, stream, ids } = await seeded(3);
    const other = await log.append(session.sessionId, '0', 'event', bytes('x'));
    const wrongSubject = encodeEventId({ epoch: session.epoch, stream, seq: 4, pos: other.pos });
    expect((await log.resume(session.sessionId, wrongSubject, ALICE)).verdict).toBe('diverged');
    const pos1 = Number(ids[1]!.split('-')[3]);
    const wrongSeq = encodeEventId({ epoch: session.epoch, stream, seq: 7, pos: pos1 });
    expect((await log.resume(session.sessionId, wrongSeq, ALICE)).verdict).toBe('diverged');
  });

  it('truncated: retention evicted the events right after the cursor', async () => {
    const small = await fx.open({ partitions, maxMsgsPerStream: 5 });
    const session = await small.createSession(ALICE);
    const ids: string[] = [];
    for (let i = 1; i <= 12; i += 1) ids.push((await small.append(session.sessionId, '0', 'event', bytes(`e${i}`))).id);
    const result = await small.resume(session.sessionId, ids[2]!, ALICE);
    expect(result.verdict).toBe('truncated');
    expect(result.verdict !== 'resumed' && result.log).toMatchObject({ lastSeq: 12 });
    // The oldest retained cursor still resumes: retention is a window, not a cliff.
    const ok = await small.resume(session.sessionId, ids[7]!, ALICE);
    expect(ok.verdict).toBe('resumed');
  });

  it('truncated: the whole stream aged out (max age)', async () => {
    const short = await fx.open({ partitions, maxAgeMs: 1_000 });
    const session = await short.createSession(ALICE);
    const first = await short.append(session.sessionId, '0', 'event', bytes('old'));
    await short.append(session.sessionId, '0', 'event', bytes('old2'));
    await sleep(2_500);
    const result = await short.resume(session.sessionId, first.id, ALICE);
    expect(result.verdict).toBe('truncated');
  });

  it('abandoned: the stream ended without its writer finishing it', async () => {
    const { session, stream, ids } = await seeded(3);
    await log.append(session.sessionId, stream, 'end', new Uint8Array(), { endReason: 'abandoned' });
    const result = await log.resume(session.sessionId, ids[0]!, ALICE);
    expect(result.verdict).toBe('abandoned');
  });
});
