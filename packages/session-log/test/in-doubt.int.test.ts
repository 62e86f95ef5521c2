import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SessionLog } from '@tether/session-log';
import { ALICE, bytes, isolatedNames, sleep, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

// This file freezes its own server (SIGSTOP), so it has one to itself.
let fx: LogFixture;
let log: SessionLog;
/** The log's names: a second instance on the same log (another writer) opens with them. */
const names = isolatedNames();
beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open({ requestTimeoutMs: 300, ...names });
});
afterAll(async () => {
  await fx.teardown();
});

/**
 * An append whose every attempt lost its ack, although the server stored it:
 * the server is frozen while the writer publishes (its bytes wait in the
 * socket), then thawed once the append has failed `log_unavailable`.
 */
async function appendThatLandsUnacknowledged(sessionId: string, payload: string): Promise<void> {
  await fx.server.freeze();
  try {
    await expect(log.append(sessionId, '0', 'event', bytes(payload))).rejects.toMatchObject({ code: 'log_unavailable' });
  } finally {
    await fx.server.thaw();
  }
  // Let the thawed server store what waited in its socket.
  await sleep(300);
}

describe('an append with an unknown outcome', () => {
  it('a retry that says so gets the landed event back, not a second copy', async () => {
    const s = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('one'));
    await appendThatLandsUnacknowledged(s.sessionId, 'notifications/tools/list_changed');
    const retried = await log.append(s.sessionId, '0', 'event', bytes('notifications/tools/list_changed'), { retry: true });
    expect(retried.seq).toBe(2);
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => text(e.payload))).toEqual(['one', 'notifications/tools/list_changed']);
    expect(page[1]!.id).toBe(retried.id);
  });

  it('an equal event that is not a retry is appended: two list_changed stay two (never silently taken for the lost one)', async () => {
    const s = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('one'));
    await appendThatLandsUnacknowledged(s.sessionId, 'notifications/tools/list_changed');
    const next = await log.append(s.sessionId, '0', 'event', bytes('notifications/tools/list_changed'));
    expect(next.seq).toBe(3);
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => [e.seq, text(e.payload)])).toEqual([
      [1, 'one'],
      [2, 'notifications/tools/list_changed'],
      [3, 'notifications/tools/list_changed'],
    ]);
  });
});

describe('a retry of an append in doubt that fails too', () => {
  it('keeps the doubt: the next retry still gets the landed event back', async () => {
    const s = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('one'));
    await appendThatLandsUnacknowledged(s.sessionId, 'progress 1');
    // The first retry meets a frozen server: its outcome is as unknown as the append's.
    await fx.server.freeze();
    try {
      await expect(log.append(s.sessionId, '0', 'event', bytes('progress 1'), { retry: true })).rejects.toMatchObject({ code: 'log_unavailable' });
    } finally {
      await fx.server.thaw();
    }
    const retried = await log.append(s.sessionId, '0', 'event', bytes('progress 1'), { retry: true });
    expect(retried.seq).toBe(2);
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => text(e.payload))).toEqual(['one', 'progress 1']);
  });
});

describe('a writer whose append was in doubt while another writer took the stream over (chaos finding 15)', () => {
  /** An append of writer `A` that fails `log_unavailable` on a frozen server; it lands once the server thaws. */
  async function appendOfAInDoubt(sessionId: string, payload: string): Promise<void> {
    await fx.server.freeze();
    try {
      await expect(log.append(sessionId, '0', 'event', bytes(payload), { writer: 'A' })).rejects.toMatchObject({ code: 'log_unavailable' });
    } finally {
      await fx.server.thaw();
    }
    await sleep(300);
  }

  it('stops with writer_conflict, also on later appends, instead of continuing the other writer\'s chain; a claim takes the stream back', async () => {
    const s = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('a1'), { writer: 'A' });
    await appendOfAInDoubt(s.sessionId, 'a2');
    // B finds the stream orphaned and takes it over: a claim after the head it read, then its events.
    const other = await fx.open(names);
    const head = (await other.readPage(s.sessionId, '0', 0, 10)).at(-1)!;
    await other.append(s.sessionId, '0', 'prime', new Uint8Array(), { writer: 'B', claim: { afterSeq: head.seq } });
    await other.append(s.sessionId, '0', 'event', bytes('b1'), { writer: 'B' });
    await expect(log.append(s.sessionId, '0', 'event', bytes('a3'), { writer: 'A' })).rejects.toMatchObject({ code: 'writer_conflict' });
    await expect(log.append(s.sessionId, '0', 'event', bytes('a3'), { writer: 'A', retry: true })).rejects.toMatchObject({ code: 'writer_conflict' });
    let page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => [text(e.payload), e.writer])).toEqual([
      ['a1', 'A'],
      ['a2', 'A'],
      ['', 'B'],
      ['b1', 'B'],
    ]);
    // Taking it back is a claim of its own, after the head it found.
    await log.append(s.sessionId, '0', 'prime', new Uint8Array(), { writer: 'A', claim: { afterSeq: page.at(-1)!.seq } });
    await log.append(s.sessionId, '0', 'event', bytes('a3'), { writer: 'A' });
    page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => e.writer)).toEqual(['A', 'A', 'B', 'B', 'A', 'A']);
  });

  it('a shared stream (several writers by design) goes on after the other writer\'s events', async () => {
    const s = await log.createSession(ALICE);
    await log.append(s.sessionId, '0', 'event', bytes('a1'), { writer: 'A', shared: true });
    await fx.server.freeze();
    try {
      await expect(log.append(s.sessionId, '0', 'event', bytes('a2'), { writer: 'A', shared: true })).rejects.toMatchObject({ code: 'log_unavailable' });
    } finally {
      await fx.server.thaw();
    }
    await sleep(300);
    const other = await fx.open(names);
    await other.append(s.sessionId, '0', 'event', bytes('b1'), { writer: 'B', shared: true });
    await log.append(s.sessionId, '0', 'event', bytes('a3'), { writer: 'A', shared: true });
    const page = await log.readPage(s.sessionId, '0', 0, 10);
    expect(page.map((e) => text(e.payload))).toEqual(['a1', 'a2', 'b1', 'a3']);
  });
});
