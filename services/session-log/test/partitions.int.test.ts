import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata } from '@grpc/grpc-js';
import { callUnary } from '@tether/cursor-proto';
import type { CursorServiceClient, ResumeResponse } from '@tether/cursor-proto';
import { createOperatorClient } from '@tether/cursor-proto/operator';
import { partitionOf } from '@tether/session-log';
import { sessionTag } from '@tether/inspect';
import { ServiceProcessStartError } from '@tether/testing';
import { bytes, collect, rpc, startServiceFixture } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

// Two service processes on one log of 4 partitions (`--log-partitions 4`,
// in a namespace): a session opened and appended through one is resumed
// through the other, the operator API lists sessions of every partition,
// and a process with another count refuses to start with the library's message.
const PARTITIONS = 4;
const NAMESPACE = 'parts';
const OPERATOR_TOKEN = 'partitions-operator-token-0123';
const LOG = ['--log-partitions', String(PARTITIONS), '--namespace', NAMESPACE];

let fx: ServiceFixture;
let first: Awaited<ReturnType<ServiceFixture['start']>>;
let one: CursorServiceClient;
let two: CursorServiceClient;
beforeAll(async () => {
  fx = await startServiceFixture();
  first = await fx.start([...LOG, '--operator-token', `ops:${OPERATOR_TOKEN}`], 'session-log-1');
  const second = await fx.start(LOG, 'session-log-2');
  one = fx.client({ target: first.target });
  two = fx.client({ target: second.target });
});
afterAll(async () => {
  await fx?.teardown();
});

const resume = (client: CursorServiceClient, sessionId: string, lastEventId: string) => client.resume({ sessionId, lastEventId, principal: 'user-1' }, new Metadata());
const eventIds = (messages: ResumeResponse[]) => messages.flatMap((m) => (m.event === undefined ? [] : [m.event.id]));

describe(`tether-session-log on a log of ${PARTITIONS} partitions`, () => {
  it('states the partition count in its listening line', () => {
    expect(first.readyJson).toMatchObject({ msg: 'listening', partitions: PARTITIONS });
  });

  it('a session opened and appended through one service is resumed through the other, whichever partition holds it', async () => {
    const held = new Set<number>();
    // 8 sessions over 4 partitions: all in one is 1 in 4^7.
    for (let i = 0; i < 8; i += 1) {
      const { session } = await rpc(one).open('user-1');
      const sessionId = session!.sessionId;
      held.add(partitionOf(sessionId, PARTITIONS));
      const ids: string[] = [];
      for (let n = 1; n <= 4; n += 1) ids.push((await rpc(one).append({ sessionId, stream: '0', payload: bytes(`e${n}`) })).id);
      // The ack, then the three events after the cursor (the call follows on: cut after them).
      const messages = await collect(resume(two, sessionId, ids[0]!), 4);
      expect(messages[0]?.ack).toBeDefined();
      expect(eventIds(messages)).toEqual(ids.slice(1));
      // And the other way round: appended through the second, read through the first.
      const more = (await rpc(two).append({ sessionId, stream: '0', payload: bytes('e5') })).id;
      expect(eventIds(await collect(resume(one, sessionId, ids[3]!), 2))).toEqual([more]);
    }
    expect(held.size).toBeGreaterThan(1);
  });

  it('the operator API lists sessions of every partition', async () => {
    const opened: string[] = [];
    for (let i = 0; i < 4; i += 1) opened.push((await rpc(two).open('user-1')).session!.sessionId);
    const operator = createOperatorClient({ target: first.target, token: OPERATOR_TOKEN });
    try {
      const { sessions } = await callUnary(operator.listSessions.bind(operator), { limit: 1000 });
      const tags = new Set(sessions.map((s) => s.tag));
      for (const sessionId of opened) expect(tags.has(sessionTag(sessionId)), sessionId).toBe(true);
    } finally {
      operator.close();
    }
  });

  it("a service with another count refuses to start with the library's message, naming both counts", async () => {
    let refusal: unknown;
    try {
      await fx.start(['--log-partitions', '2', '--namespace', NAMESPACE], 'session-log-other-count');
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(ServiceProcessStartError);
    const failed = refusal as ServiceProcessStartError;
    expect(failed.exitCode).toBe(1);
    const stderr = failed.stderrTail.join('\n');
    expect(stderr).toMatch(
      new RegExp(`^tether-session-log: SessionLogError: the log of this deployment has ${PARTITIONS} partition\\(s\\) \\(TETHER_LOG-0_${NAMESPACE}, …\\), and this process was started with --log-partitions 2\\. `),
    );
    expect(stderr).toContain(`Start every process with --log-partitions ${PARTITIONS}.`);
    // The message, not a stack trace.
    expect(stderr).not.toMatch(/\n\s+at /);
  });
});
