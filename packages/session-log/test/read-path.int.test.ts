import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { logPaths, resolveConfig, serverFeatures } from '@tether/session-log';
import type { SessionLog } from '@tether/session-log';
import { ControlFanout } from '../src/control-fanout.js';
import type { LogContext } from '../src/context.js';
import { replay } from '../src/replay.js';
import { createSubjects } from '../src/wire.js';
import { ALICE, bytes, drainResume, isolatedNames, startLogFixture, text } from './fixtures.js';
import type { LogFixture } from './fixtures.js';

// Which path a log takes is decided by the server's version; this file runs
// on whichever server the suite runs on (npm test: the current one, then the
// 2.9 floor) and checks the path that server must get, by counting the
// JetStream API requests the reads make.
let fx: LogFixture;
let log: SessionLog;
let spy: NatsConnection;
const direct = () => serverFeatures(fx.server.version).batchDirectGet;

beforeAll(async () => {
  fx = await startLogFixture();
  log = await fx.open({ readBatch: 16 });
  spy = await fx.raw();
  if (!direct()) console.warn(`[read-path] nats-server ${fx.server.version} has no batch direct get (2.11+): checking the consumer path only`);
});
afterAll(async () => {
  await fx.teardown();
});

/** Counts requests per JetStream API verb (`CONSUMER.CREATE`, `DIRECT.GET`, `STREAM.MSG.GET`) while `run` runs. */
async function countApi<T>(run: () => Promise<T>): Promise<{ result: T; calls: Record<string, number> }> {
  const calls: Record<string, number> = {};
  const sub: Subscription = spy.subscribe('$JS.API.>', {
    callback: (_err, msg) => {
      const verb = msg.subject.split('.').slice(2, 4).join('.');
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

describe('read paths follow the server version', () => {
  it('the log reports the server version from INFO and the paths that version gets', () => {
    expect(log.server.version).toBe(fx.server.version);
    expect(log.server.paths).toEqual(logPaths(serverFeatures(fx.server.version), true));
    expect(log.server.paths.replay).toBe(direct() ? 'direct-batch' : 'consumer');
  });

  it('a resume with a 100-event backlog: batch direct gets and no consumer on 2.11+, a consumer on older servers', async () => {
    const { session, ids } = await seeded(100);
    const { result: events, calls } = await countApi(async () => drainResume(await log.resume(session.sessionId, ids[0]!, ALICE)));
    expect(events.map((e) => e.id)).toEqual(ids.slice(1));
    expect(events.slice(0, 3).map((e) => text(e.payload))).toEqual(['e2', 'e3', 'e4']);
    if (direct()) {
      // 100 events after the cursor, batches growing from readBatch (16):
      // the classification's (cursor + 16) and the head, then 32, then 64
      // asked (52 left), whose end of batch says nothing more.
      expect(calls['CONSUMER.CREATE'] ?? 0).toBe(0);
      expect(calls['STREAM.MSG.GET'] ?? 0).toBe(0);
      expect(calls['DIRECT.GET']).toBe(2 + 2);
    } else {
      expect(calls['CONSUMER.CREATE']).toBe(1);
      expect(calls['DIRECT.GET'] ?? 0).toBe(0);
    }
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

  it('a pass whose direct reads stop short of a position the log is known to hold asks the leader (a consumer) for the rest', async (ctx) => {
    if (!direct()) return ctx.skip(`nats-server ${fx.server.version} has no batch direct get (2.11+)`);
    const { session, stream, ids } = await seeded(5, false);
    const names = isolatedNames();
    const config = resolveConfig({ ...names, streamName: log.config.streamName, subjectPrefix: log.config.subjectPrefix, readBatch: 16 });
    const nc = await connect({ servers: fx.server.url });
    try {
      const subjects = createSubjects(config.subjectPrefix);
      const features = serverFeatures(nc.info?.version);
      const rctx: LogContext = {
        nc,
        js: jetstream(nc),
        jsm: await jetstreamManager(nc),
        config,
        subjects,
        control: new ControlFanout(nc, subjects),
        paths: () => logPaths(features, true),
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
      expect(reached.calls['CONSUMER.CREATE'] ?? 0).toBe(0);
      // A position beyond what the replica answered (as a lagging follower would
      // leave it): the pass falls back to the leader, which decides.
      const short = await countApi(() => read(positions.at(-1)! + 1_000));
      expect(short.result).toEqual(positions);
      expect(short.calls['CONSUMER.CREATE']).toBe(1);
    } finally {
      await nc.close();
    }
  });
});
