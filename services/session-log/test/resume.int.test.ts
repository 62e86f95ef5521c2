import { sessionTag } from '@tether/telemetry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status } from '@grpc/grpc-js';
import { EndReason, EventKind, readCallFailure, ResumeVerdict } from '@tether/cursor-proto';
import type { CursorServiceClient, ResumeResponse } from '@tether/cursor-proto';
import { bytes, collect, failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

let fx: ServiceFixture;
let service: Awaited<ReturnType<ServiceFixture['start']>>;
let client: CursorServiceClient;
let alice: ReturnType<typeof rpc>;
beforeAll(async () => {
  fx = await startServiceFixture();
});
afterAll(async () => {
  await fx.teardown();
});

async function seeded(count: number, stream = 'abcdefgh', principal = 'user-1') {
  const { session } = await alice.open(principal);
  const ids: string[] = [];
  for (let i = 1; i <= count; i += 1) ids.push((await alice.append({ sessionId: session!.sessionId, stream, payload: bytes(`e${i}`) })).id);
  return { sessionId: session!.sessionId, epoch: session!.epoch, stream, ids };
}

const resume = (sessionId: string, lastEventId: string, principal = 'user-1', c: CursorServiceClient = client, deadlineMs?: number) =>
  c.resume({ sessionId, lastEventId, principal }, new Metadata(), deadlineMs === undefined ? {} : { deadline: Date.now() + deadlineMs });

/** Opens `n` resumes at once and waits until each has its ack or its refusal. */
async function holdStreams(sessionId: string, cursor: string, n: number) {
  const calls = Array.from({ length: n }, () => resume(sessionId, cursor));
  const outcomes = await Promise.all(
    calls.map((call) => new Promise<ResumeResponse | Awaited<ReturnType<typeof failure>>>((resolve) => {
      call.once('data', resolve);
      call.on('error', (err) => resolve(readCallFailure(err)));
    })),
  );
  return {
    acked: outcomes.filter((o) => 'ack' in o && o.ack !== undefined).length,
    refused: outcomes.filter((o): o is Awaited<ReturnType<typeof failure>> => 'code' in o),
    cancel: () => calls.forEach((c) => c.cancel()),
  };
}

const posOf = (id: string): number => Number(id.split('-')[3]);

// Every verdict on the unpartitioned log and on 4 partitions (issue 24).
describe.each([1, 4])('Resume, log on %i partition(s)', (partitions) => {
  beforeAll(async () => {
    // A small per-stream cap makes `truncated` reachable; a small stream limit
    // makes a leaked (never released) stream visible.
    // A namespace each: one NATS server, two layouts of the log.
    service = await fx.start(['--log-max-msgs-per-stream', '40', '--max-streams-per-caller', '3', '--log-partitions', String(partitions), '--namespace', `resume${partitions}`]);
    client = fx.client({ target: service.target });
    alice = rpc(client);
  });

  it('resumed: an ack, then exactly the suffix after the cursor, ending after the end marker', async () => {
    const s = await seeded(6);
    const end = await alice.append({ sessionId: s.sessionId, stream: s.stream, kind: EventKind.END });
    const messages = await collect(resume(s.sessionId, s.ids[2]!));
    expect(messages[0]!.ack).toMatchObject({ verdict: ResumeVerdict.RESUMED, stream: s.stream, cursorSeq: 3, cursorPos: posOf(s.ids[2]!), endedAtCursor: false });
    expect(messages[0]!.ack!.session?.sessionId).toBe(s.sessionId);
    const events = messages.slice(1).map((m) => m.event!);
    expect(events.map((e) => e.id)).toEqual([...s.ids.slice(3), end.id]);
    expect(events.slice(0, 3).map((e) => e.payload.toString())).toEqual(['e4', 'e5', 'e6']);
    expect(events.at(-1)).toMatchObject({ kind: EventKind.END, endReason: EndReason.COMPLETE });
  });

  it('resumed at the end marker: the ack says so and the call ends', async () => {
    const s = await seeded(2);
    const end = await alice.append({ sessionId: s.sessionId, stream: s.stream, kind: EventKind.END });
    const messages = await collect(resume(s.sessionId, end.id));
    expect(messages).toHaveLength(1);
    expect(messages[0]!.ack?.endedAtCursor).toBe(true);
  });

  it('resumed at the head: replay hands over to live events without a seam', async () => {
    const s = await seeded(3, '0');
    const call = resume(s.sessionId, s.ids[1]!);
    call.on('error', () => undefined);
    const received: ResumeResponse[] = [];
    const done = new Promise<void>((resolve) => call.on('data', (m: ResumeResponse) => { received.push(m); if (received.length === 1 + 1 + 5) resolve(); }));
    const live = [];
    for (let i = 1; i <= 5; i += 1) live.push((await alice.append({ sessionId: s.sessionId, stream: '0', payload: bytes(`live${i}`) })).id);
    await done;
    call.cancel();
    expect(received.slice(1).map((m) => m.event!.id)).toEqual([s.ids[2], ...live]);
  });

  it('every refusal is a status with code resume_refused, the verdict and positions', async () => {
    const s = await seeded(3);
    const other = await seeded(3, s.stream);
    const onGet = await alice.append({ sessionId: s.sessionId, stream: '0', payload: bytes('x') });
    const [e, st] = [s.epoch, s.stream];
    const abandonedS = await seeded(2, 'qqqqqqqq');
    await alice.append({ sessionId: abandonedS.sessionId, stream: 'qqqqqqqq', kind: EventKind.END, endReason: EndReason.ABANDONED });
    const longS = await seeded(45, '0');
    const cases: [string, string, string, string, number, ResumeVerdict][] = [
      ['malformed', s.sessionId, 'not-an-id', 'user-1', status.INVALID_ARGUMENT, ResumeVerdict.MALFORMED],
      ['unknown session', 'CCCCCCCCCCCCCCCCCCCCCC', s.ids[0]!, 'user-1', status.NOT_FOUND, ResumeVerdict.UNKNOWN_SESSION],
      ['another principal', s.sessionId, s.ids[0]!, 'user-2', status.NOT_FOUND, ResumeVerdict.UNKNOWN_SESSION],
      ['epoch mismatch', s.sessionId, other.ids[0]!, 'user-1', status.FAILED_PRECONDITION, ResumeVerdict.EPOCH_MISMATCH],
      ['ahead', s.sessionId, `${e}-${st}-4-${posOf(s.ids[2]!) + 1000}`, 'user-1', status.OUT_OF_RANGE, ResumeVerdict.AHEAD],
      ['diverged', s.sessionId, `${e}-${st}-4-${onGet.pos}`, 'user-1', status.FAILED_PRECONDITION, ResumeVerdict.DIVERGED],
      ['truncated', longS.sessionId, longS.ids[1]!, 'user-1', status.OUT_OF_RANGE, ResumeVerdict.TRUNCATED],
      ['abandoned', abandonedS.sessionId, abandonedS.ids[0]!, 'user-1', status.FAILED_PRECONDITION, ResumeVerdict.ABANDONED],
    ];
    for (const [what, sessionId, cursor, principal, code, verdict] of cases) {
      const f = (await collect(resume(sessionId, cursor, principal)).then(
        (msgs) => { throw new Error(`${what}: expected a refusal, got ${msgs.length} messages`); },
        (err: Awaited<ReturnType<typeof failure>> & { received: unknown[] }) => err,
      )) as Awaited<ReturnType<typeof failure>> & { received: unknown[] };
      expect({ what, code: f.code, detail: f.detail?.code, verdict: f.detail?.verdict, received: f.received.length }).toEqual({ what, code, detail: 'resume_refused', verdict, received: 0 });
    }
    const truncated = await collect(resume(longS.sessionId, longS.ids[1]!)).catch((err: Awaited<ReturnType<typeof failure>>) => err);
    expect((truncated as Awaited<ReturnType<typeof failure>>).detail?.log).toMatchObject({ lastSeq: 45 });
    // Another caller with the right principal still sees an unknown session, with no positions.
    const bob = fx.client({ token: TOKENS.bob, target: service.target });
    const hidden = await collect(resume(s.sessionId, `${e}-${st}-4-${posOf(s.ids[2]!) + 1000}`, 'user-1', bob)).catch((err: Awaited<ReturnType<typeof failure>>) => err);
    expect((hidden as Awaited<ReturnType<typeof failure>>).detail).toMatchObject({ code: 'resume_refused', verdict: ResumeVerdict.UNKNOWN_SESSION, log: {} });
  });

  it('cancellation mid-stream and deadlines release the stream on the server', async () => {
    const s = await seeded(30, '0');
    // The caller may hold 3 streams: leaking any of these 6 would show below.
    for (let round = 0; round < 3; round += 1) {
      const got = await collect(resume(s.sessionId, s.ids[0]!), 10);
      expect(got.map((m) => m.event?.seq ?? 0)).toEqual([0, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      const timedOut = await collect(resume(s.sessionId, s.ids[29]!, 'user-1', client, 300)).catch((err: Awaited<ReturnType<typeof failure>>) => err);
      expect((timedOut as Awaited<ReturnType<typeof failure>>).code).toBe(status.DEADLINE_EXCEEDED);
    }
    // The server saw every one of them end as cancelled (its own log says so).
    await expect.poll(() => service.stdoutJson.filter((o) => o['msg'] === 'resume ended' && o['sessionId'] === sessionTag(s.sessionId) && o['cancelled'] === true).length).toBe(6);
    const held = await holdStreams(s.sessionId, s.ids[29]!, 4);
    expect(held.acked).toBe(3);
    expect(held.refused.map((f) => [f.code, f.detail?.code])).toEqual([[status.RESOURCE_EXHAUSTED, 'too_many_streams']]);
    held.cancel();
  });

  it('Follow: from the beginning or a cursor, replay then live, ending after the end marker', async () => {
    const s = await seeded(3);
    const follow = client.follow({ sessionId: s.sessionId, stream: s.stream, afterSeq: 0, afterPos: 0 });
    const all = collect(follow);
    await alice.append({ sessionId: s.sessionId, stream: s.stream, payload: bytes('e4') });
    await alice.append({ sessionId: s.sessionId, stream: s.stream, kind: EventKind.END });
    expect((await all).map((m) => m.event!.seq)).toEqual([1, 2, 3, 4, 5]);
    const fromCursor = await collect(client.follow({ sessionId: s.sessionId, stream: s.stream, afterSeq: 3, afterPos: posOf(s.ids[2]!) }));
    expect(fromCursor.map((m) => m.event!.payload.toString())).toEqual(['e4', '']);
    const bad = await collect(client.follow({ sessionId: s.sessionId, stream: s.stream, afterSeq: 3, afterPos: 0 })).catch((err: Awaited<ReturnType<typeof failure>>) => err);
    expect((bad as Awaited<ReturnType<typeof failure>>).code).toBe(status.INVALID_ARGUMENT);
  });
});
