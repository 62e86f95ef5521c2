import { describe, expect, it } from 'vitest';
import { EventKind } from '@tether/protocol';
import { createFollowStats, START_CURSOR } from '@tether/session-log';
import type { Cursor, LogEvent, SessionRecord } from '@tether/session-log';
import type { LogPort } from '../src/log/log-port.js';
// Internal module (not the package's entry): the feed readers on the writer's instance tap.
import { ACKED_FEED_MAX, AckedFeed } from '../src/streams/acked-feed.js';

const SESSION = { sessionId: 'AAAAAAAAAAAAAAAAAAAAAA', epoch: 'abcdefghij' } as SessionRecord;
const STREAM = 'bcdefghi';
const WRITER = 'writer-1';

/** A log whose `follow` records where it was asked to start and yields `rest`. */
function fakeLog(rest: LogEvent[] = []): { log: LogPort; follows: Cursor[] } {
  const follows: Cursor[] = [];
  const log = {
    follow: async function* (_sessionId: string, _stream: string, from: Cursor) {
      follows.push(from);
      yield* rest;
    },
  } as unknown as LogPort;
  return { log, follows };
}

/** The n-th append of the stream, stored at position 100 + 10 n. */
function store(feed: AckedFeed, n: number, kind: EventKind = EventKind.event, upstream: string | null = `up-${n}`): void {
  const upstreamId = upstream ?? undefined;
  feed.stored({
    kind,
    payload: new TextEncoder().encode(kind === EventKind.event ? `{"n":${n}}` : ''),
    result: { id: `id-${n}`, seq: n, pos: 100 + 10 * n },
    upstreamId,
    endReason: kind === EventKind.end ? 'complete' : undefined,
  });
}

async function collect(events: AsyncIterable<LogEvent>, max = Number.POSITIVE_INFINITY): Promise<LogEvent[]> {
  const out: LogEvent[] = [];
  for await (const e of events) {
    out.push(e);
    if (out.length >= max) break;
  }
  return out;
}

describe('AckedFeed (a reader on the writer\'s instance gets each event as its append is acknowledged)', () => {
  it('yields the acknowledged events in order, chained as the log holds them, and ends after the end marker', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.prime, null);
    feed.tracedBy('00-0123456789abcdef0123456789abcdef-0123456789abcdef-01');
    const { log, follows } = fakeLog();
    const stats = createFollowStats();
    const reading = collect(tap.follow(log, START_CURSOR, new AbortController().signal, stats));
    store(feed, 2);
    store(feed, 3, EventKind.end, null);
    feed.stopped();
    const events = await reading;
    expect(events.map((e) => [e.seq, e.pos, e.prev, e.kind])).toEqual([
      [1, 110, 0, 'prime'],
      [2, 120, 110, 'event'],
      [3, 130, 120, 'end'],
    ]);
    expect(events[0]).toMatchObject({ id: 'id-1', sessionId: SESSION.sessionId, stream: STREAM, epoch: SESSION.epoch, writer: WRITER, traceparent: undefined, upstreamId: undefined });
    expect(events[1]).toMatchObject({ upstreamId: 'up-2', traceparent: '00-0123456789abcdef0123456789abcdef-0123456789abcdef-01', endReason: undefined });
    expect(events[2]!.endReason).toBe('complete');
    expect(follows).toEqual([]);
    expect(stats.fromLive).toBe(3);
  });

  it('an upstream id is given as the log stores it: no CR or LF, trimmed', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.event, ' a\r\nb ');
    const [event] = await collect(tap.follow(fakeLog().log, START_CURSOR, new AbortController().signal, createFollowStats()), 1);
    expect(event!.upstreamId).toBe('a  b');
  });

  it('a pump that stops without the end marker hands the client to the log, after the last event it delivered', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.prime, null);
    store(feed, 2);
    feed.stopped();
    // What another writer appended after taking the stream over.
    const taken = { id: 'by-another-writer', seq: 3, pos: 150, prev: 120, kind: EventKind.event } as LogEvent;
    const { log, follows } = fakeLog([taken]);
    const events = await collect(tap.follow(log, START_CURSOR, new AbortController().signal, createFollowStats()));
    expect(events.map((e) => e.id)).toEqual(['id-1', 'id-2', 'by-another-writer']);
    expect(follows).toEqual([{ seq: 2, pos: 120 }]);
  });

  it('a client more than ACKED_FEED_MAX events behind reads the rest from the log: memory stays bounded', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.prime, null);
    const { log, follows } = fakeLog();
    const events = tap.follow(log, START_CURSOR, new AbortController().signal, createFollowStats());
    const first = await events.next();
    expect(first.value).toMatchObject({ seq: 1 });
    for (let n = 2; n <= ACKED_FEED_MAX + 10; n += 1) store(feed, n);
    const rest = await collect(events);
    expect(rest).toEqual([]);
    expect(follows).toEqual([{ seq: 1, pos: 110 }]);
  });

  it('ends when its signal aborts, even while it waits; a feed nobody reads keeps nothing', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.prime, null);
    const abort = new AbortController();
    const { log, follows } = fakeLog();
    const reading = collect(tap.follow(log, START_CURSOR, abort.signal, createFollowStats()));
    await new Promise((resolve) => setTimeout(resolve, 10));
    abort.abort('client_gone');
    expect((await reading).map((e) => e.seq)).toEqual([1]);
    expect(follows).toEqual([]);
    // Detached: later appends are not held for a reader that is gone.
    store(feed, 2);
    feed.stopped();
    const again = await collect(tap.follow(log, START_CURSOR, new AbortController().signal, createFollowStats()));
    expect(again).toEqual([]);
    expect(follows).toEqual([{ seq: 0, pos: 0 }]);
    // A tap opened once the pump stopped goes to the log at once.
    const late = await collect(feed.tap().follow(log, { seq: 2, pos: 120 }, new AbortController().signal, createFollowStats()));
    expect(late).toEqual([]);
    expect(follows).toEqual([{ seq: 0, pos: 0 }, { seq: 2, pos: 120 }]);
  });
});

describe('AckedFeed when the chain it holds is not the log', () => {
  it('an acknowledged seq that does not follow the last one (another writer stored in between) sends the client to the log', async () => {
    const feed = new AckedFeed(SESSION, STREAM, WRITER);
    const tap = feed.tap();
    store(feed, 1, EventKind.prime, null);
    store(feed, 2);
    // seq 3 is someone else's; this pump's next append landed at seq 4.
    store(feed, 4);
    store(feed, 5, EventKind.end, null);
    const { log, follows } = fakeLog();
    const events = await collect(tap.follow(log, START_CURSOR, new AbortController().signal, createFollowStats()));
    expect(events.map((e) => e.seq)).toEqual([1, 2]);
    expect(follows).toEqual([{ seq: 2, pos: 120 }]);
  });
});

describe('AckedFeed taps opened on a running stream (a GET client of the listener here)', () => {
  it('a tap opened before its cursor is read skips what the cursor covers, then goes on live', async () => {
    const feed = new AckedFeed(SESSION, '0', WRITER, { seq: 1, pos: 110 });
    store(feed, 2);
    const tap = feed.tap();
    // Stored after the tap opened, before the head was read: the head is seq 3.
    store(feed, 3);
    const { log, follows } = fakeLog();
    const reading = collect(tap.follow(log, { seq: 3, pos: 130 }, new AbortController().signal, createFollowStats()), 2);
    store(feed, 4);
    store(feed, 5);
    expect((await reading).map((e) => [e.seq, e.prev])).toEqual([
      [4, 130],
      [5, 140],
    ]);
    expect(follows).toEqual([]);
  });

  it('a first event that does not follow the cursor (a head read behind the writer) sends the reader to the log from its cursor', async () => {
    const feed = new AckedFeed(SESSION, '0', WRITER, { seq: 1, pos: 110 });
    const tap = feed.tap();
    store(feed, 2);
    store(feed, 3);
    const { log, follows } = fakeLog();
    // The reader's cursor is seq 1 of another chain position (a fork, or a stale read): not the feed's.
    const events = await collect(tap.follow(log, { seq: 1, pos: 105 }, new AbortController().signal, createFollowStats()));
    expect(events).toEqual([]);
    expect(follows).toEqual([{ seq: 1, pos: 105 }]);
  });

  it('every tap gets every event; one reader that falls behind goes to the log alone', async () => {
    const feed = new AckedFeed(SESSION, '0', WRITER, { seq: 1, pos: 110 });
    const fast = feed.tap();
    const slow = feed.tap();
    const { log, follows } = fakeLog();
    const fastEvents = fast.follow(log, { seq: 1, pos: 110 }, new AbortController().signal, createFollowStats());
    const got: number[] = [];
    for (let n = 2; n <= ACKED_FEED_MAX + 10; n += 1) {
      store(feed, n);
      got.push(((await fastEvents.next()).value as LogEvent).seq);
    }
    expect(got).toHaveLength(ACKED_FEED_MAX + 9);
    expect(got.at(-1)).toBe(ACKED_FEED_MAX + 10);
    expect(await collect(slow.follow(log, { seq: 1, pos: 110 }, new AbortController().signal, createFollowStats()))).toEqual([]);
    expect(follows).toEqual([{ seq: 1, pos: 110 }]);
  });
});
