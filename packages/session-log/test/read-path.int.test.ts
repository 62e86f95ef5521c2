import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { resolveConfig } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ControlFanout } from '../src/control-fanout.js';
import type { LogContext } from '../src/context.js';
import { replay } from '../src/replay.js';
import { createSubjects } from '../src/wire.js';
import { ALICE, MALLORY, bytes, drainResume, isolatedNames, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

// How the log reads: batch direct gets, no consumer ever, and the leader
// only for what a replica's answer leaves out. Checked by counting the
// JetStream API requests the reads make.
let fx: LogFixture;
let log: SessionLog;
let spy: NatsConnection;

beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open({ readBatch: 16 });
  spy = await fx.raw();
});
afterAll(async () => {
  await fx.teardown();
});

/** Counts requests about the log stream per JetStream API verb (`CONSUMER.CREATE`, `DIRECT.GET`, `STREAM.MSG.GET`) while `run` runs. */
async function countApi<T>(run: () => Promise<T>): Promise<{ result: T; calls: Record<string, number> }> {
  const calls: Record<string, number> = {};
  const sub: Subscription = spy.subscribe('$JS.API.>', {
    callback: (_err, msg) => {
      // `$JS.API.<verb…>.<stream>[.…]`: only requests about the log stream count (not the registry's bucket).
      const tokens = msg.subject.split('.');
      const at = tokens.indexOf(log.config.streamName);
      if (at < 0) return;
      const verb = tokens.slice(2, at).join('.');
      calls[verb] = (calls[verb] ?? 0) + 1;
    },
  });
  await spy.flush();
  try {
    const result = await run();
    await spy.flush();
    return { result, calls };
  } finally {
    sub.unsubscribe();
  }
}

async function seeded(count: number, end = true) {
  const session = await log.createSession(ALICE);
  const stream = log.newStreamId();
  const ids: string[] = [];
  for (let i = 1; i <= count; i += 1) ids.push((await log.append(session.sessionId, stream, 'event', bytes(`e${i}`))).id);
  if (end) ids.push((await log.append(session.sessionId, stream, 'end', new Uint8Array())).id);
  return { session, stream, ids };
}

describe('read paths', () => {
  it('the log reports the server version from INFO', () => {
    expect(log.server.version).toBe(fx.server.version);
  });

  it('a resume with a 100-event backlog: batch direct gets, no consumer, no leader get', async () => {
    const { session, ids } = await seeded(100);
    const { result: events, calls } = await countApi(async () => drainResume(await log.resume(session.sessionId, ids[0]!, ALICE)));
    expect(events.map((e) => e.id)).toEqual(ids.slice(1));
    expect(events.slice(0, 3).map((e) => text(e.payload))).toEqual(['e2', 'e3', 'e4']);
    // 100 events after the cursor, batches growing from readBatch (16):
    // the classification's (cursor + 32) and the head, then 64, then 64
    // asked (4 left), whose end of batch says nothing more: the live tail
    // opened before the classification, so no read confirms it.
    expect(calls['CONSUMER.CREATE'] ?? 0).toBe(0);
    expect(calls['STREAM.MSG.GET'] ?? 0).toBe(0);
    expect(calls['DIRECT.GET']).toBe(2 + 2);
  });

  it('a backlog the classification holds whole is one batch direct get (and the head), nothing more', async () => {
    const { session, ids } = await seeded(20);
    const { result: events, calls } = await countApi(async () => drainResume(await log.resume(session.sessionId, ids[0]!, ALICE)));
    expect(events.map((e) => e.id)).toEqual(ids.slice(1));
    expect(calls['DIRECT.GET']).toBe(2);
    expect(calls['STREAM.MSG.GET'] ?? 0).toBe(0);
  });

  it('the live tail a resume opens before classifying is closed at once when the resume is refused or has nothing to follow', async () => {
    const subscriptions = (): number => (log.connection as unknown as { protocol: { subscriptions: { size(): number } } }).protocol.subscriptions.size();
    const before = subscriptions();
    const { session, ids } = await seeded(2);
    expect((await log.resume(session.sessionId, ids[0]!, MALLORY)).verdict).toBe('unknown_session');
    expect(subscriptions()).toBe(before);
    const atEnd = await log.resume(session.sessionId, ids.at(-1)!, ALICE);
    expect(atEnd.verdict === 'resumed' && atEnd.endedAtCursor).toBe(true);
    expect(subscriptions()).toBe(before);
    // Accepted with events to follow: held for events(), which takes it over and closes it when done.
    const accepted = await log.resume(session.sessionId, ids[0]!, ALICE);
    expect(subscriptions()).toBe(before + 1);
    await drainResume(accepted);
    expect(subscriptions()).toBe(before);
  });

  it('a resume at the head of an open stream reads nothing more and follows live', async () => {
    const { session, stream, ids } = await seeded(3, false);
    const accepted = await log.resume(session.sessionId, ids.at(-1)!, ALICE);
    if (accepted.verdict !== 'resumed') throw new Error(accepted.reason);
    const reader = accepted.events();
    const first = reader.next();
    const appended = await log.append(session.sessionId, stream, 'event', bytes('live'));
    expect((await first).value?.id).toBe(appended.id);
    await reader.return(undefined);
  });

  it('a pass whose direct reads stop short of a position the log is known to hold asks the leader for the rest, one get per event', async () => {
    const { session, stream, ids } = await seeded(5, false);
    const names = isolatedNames();
    const config = resolveConfig({ ...names, streamName: log.config.streamName, subjectPrefix: log.config.subjectPrefix, readBatch: 16 });
    const nc = await connect({ servers: fx.server.url });
    try {
      const subjects = createSubjects(config.subjectPrefix);
      const rctx: LogContext = {
        nc,
        js: jetstream(nc),
        jsm: await jetstreamManager(nc),
        config,
        subjects,
        control: new ControlFanout(nc, subjects),
      };
      const subject = subjects.log(session.sessionId, stream);
      const read = async (reach: number) => {
        const seqs: number[] = [];
        for await (const msg of replay(rctx, subject, 0, { reach })) seqs.push(msg.seq);
        return seqs;
      };
      const positions = ids.map((id) => Number(id.split('-')[3]));
      const reached = await countApi(() => read(positions.at(-1)!));
      expect(reached.result).toEqual(positions);
      expect(reached.calls['STREAM.MSG.GET'] ?? 0).toBe(0);
      // A position beyond what the replica answered (as a lagging follower would
      // leave it): the pass asks the leader from its last event on, which
      // decides: one get, answered "no message" (nothing more is stored).
      const short = await countApi(() => read(positions.at(-1)! + 1_000));
      expect(short.result).toEqual(positions);
      expect(short.calls['STREAM.MSG.GET']).toBe(1);
      expect(short.calls['CONSUMER.CREATE'] ?? 0).toBe(0);
      // The leader fills in what a short replica answer left out, in order.
      const fromLeader: number[] = [];
      for await (const msg of replay(rctx, subject, 0, { reach: positions.at(-1)!, first: { messages: [], pending: 0 } })) fromLeader.push(msg.seq);
      expect(fromLeader).toEqual(positions);
    } finally {
      await nc.close();
    }
  });
});
