import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeEventId, encodeEventId } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { UpstreamTools } from '@tether/testing';
import { callTool, initialize, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

let stack: Stack;

async function collect(messages: AsyncGenerator<SseMessage>, limit = Number.POSITIVE_INFINITY): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const m of messages) {
    out.push(m);
    if (out.length >= limit) break;
  }
  return out;
}

/** Runs a streaming tool call to completion and returns the ids of its events. */
async function streamedIds(sessionId: string, count: number): Promise<string[]> {
  const post = await request(stack.url, { method: 'POST', sessionId, body: callTool(1, UpstreamTools.StreamProgress, { count, delayMs: 0 }) });
  expect(post.status).toBe(200);
  return (await collect(post.messages)).map((m) => m.id).filter((id): id is string => id !== undefined);
}

/**
 * The session answers 404 on every instance. The one that closed it knows at
 * once; the other learns it from the close's control message and until then
 * answers from its session cache (docs/design.md, "Session cache"): seen
 * under a loaded CI run, a POST right after the refusal got 200 there. So
 * the 404 is waited for, up to 2 s, not demanded on the first request.
 */
async function expectSessionGone(sessionId: string): Promise<void> {
  const statuses: number[] = [];
  for (const started = Date.now(); Date.now() - started < 2_000; await new Promise((resolve) => setTimeout(resolve, 50))) {
    const after = await request(stack.url, { method: 'POST', sessionId, body: callTool(9, UpstreamTools.Echo, { text: 'x' }) });
    statuses.push(after.status);
    after.cancel();
    if (after.status === 404) return;
  }
  expect(statuses.at(-1), `statuses after the close: ${statuses.join(', ')}`).toBe(404);
}

// Every verdict on the unpartitioned log and on 4 partitions (issue 24).
describe.each([1, 4])('explicit resume verdicts, log on %i partition(s)', (partitions) => {
  beforeAll(async () => {
    // A small per-stream cap, so retention eviction is easy to force.
    stack = await startStack({ gateways: 2, eventStore: true, logSettings: ['--log-max-msgs-per-stream', '20', '--log-partitions', String(partitions)] });
  });
  afterAll(async () => {
    await stack?.teardown();
  });

  it('resumed: the rest of the stream, on another instance, with Tether-Resume: resumed', async () => {
    const sessionId = await initialize(stack.url);
    const ids = await streamedIds(sessionId, 10);
    const resumed = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids[4]! });
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get('tether-resume')).toBe('resumed');
    const all = await collect(resumed.messages);
    // Opened with the resume acknowledgment, whose id is the cursor itself, so a client that is cut again at once keeps its place.
    const cursor = decodeEventId(ids[4]!);
    if (!cursor.ok) throw new Error(cursor.reason);
    expect(all[0]).toMatchObject({ id: ids[4], event: 'resume', retryMs: 1000 });
    expect(JSON.parse(all[0]!.data)).toEqual({ verdict: 'resumed', stream: cursor.value.stream, next_seq: cursor.value.seq + 1 });
    const rest = all.filter((m) => m.id !== undefined && m.event !== 'resume' && m.data !== '');
    expect(rest.map((m) => m.id)).toEqual(ids.slice(5));
    expect(all.filter((m) => m.event === 'resume')).toHaveLength(1);
  });

  it('resumed at the last message of a completed stream: 204, no body, so clients stop reconnecting', async () => {
    const sessionId = await initialize(stack.url);
    const ids = await streamedIds(sessionId, 4);
    const done = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids.at(-1)! });
    expect(done.status).toBe(204);
    expect(done.headers.get('tether-resume')).toBe('resumed');
    // One message before the end still streams it.
    const one = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids.at(-2)! });
    expect(one.status).toBe(200);
    expect((await collect(one.messages)).filter((m) => m.event !== 'resume' && m.data !== '').map((m) => m.id)).toEqual([ids.at(-1)]);
  });

  it('truncated: retention evicted the cursor; 404, the session is gone, a new initialize works', async () => {
    const sessionId = await initialize(stack.url);
    const ids = await streamedIds(sessionId, 60);
    expect(ids.length).toBeGreaterThan(20);
    const res = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids[2]! });
    expect(res.status).toBe(404);
    expect(res.headers.get('tether-resume')).toBe('truncated');
    expect(await res.json()).toMatchObject({ error: { code: -32001, data: { verdict: 'truncated' } } });
    await expectSessionGone(sessionId);
    const fresh = await initialize(stack.url);
    expect(fresh).not.toBe(sessionId);
  });

  it('epoch_mismatch: a cursor from another session is refused and never reads it', async () => {
    const a = await initialize(stack.url);
    const b = await initialize(stack.url);
    const idsA = await streamedIds(a, 3);
    const res = await request(stack.url, { method: 'GET', sessionId: b, lastEventId: idsA[1]! });
    expect(res.status).toBe(404);
    expect(res.headers.get('tether-resume')).toBe('epoch_mismatch');
    await expectSessionGone(b);
  });

  it('ahead: a cursor beyond anything the log holds', async () => {
    const sessionId = await initialize(stack.url);
    const ids = await streamedIds(sessionId, 3);
    const last = decodeEventId(ids.at(-1)!);
    if (!last.ok) throw new Error(last.reason);
    const beyond = encodeEventId({ ...last.value, seq: last.value.seq + 5, pos: last.value.pos + 1_000_000 });
    const res = await request(stack.url, { method: 'GET', sessionId, lastEventId: beyond });
    expect(res.status).toBe(404);
    expect(res.headers.get('tether-resume')).toBe('ahead');
  });

  it('diverged: a cursor whose position holds a different event', async () => {
    const sessionId = await initialize(stack.url);
    const ids = await streamedIds(sessionId, 5);
    const third = decodeEventId(ids[2]!);
    if (!third.ok) throw new Error(third.reason);
    const forged = encodeEventId({ ...third.value, seq: third.value.seq + 1 });
    const res = await request(stack.url, { method: 'GET', sessionId, lastEventId: forged });
    expect(res.status).toBe(404);
    expect(res.headers.get('tether-resume')).toBe('diverged');
  });

  it('malformed: 400 naming the problem; the session survives', async () => {
    const sessionId = await initialize(stack.url);
    for (const bad of ['garbage', '0-0-0-0', 'aaaaaaaaaa-0-01-1', '../../etc']) {
      const res = await request(stack.url, { method: 'GET', sessionId, lastEventId: bad });
      expect(res.status).toBe(400);
      expect(res.headers.get('tether-resume')).toBe('malformed');
      expect(await res.json()).toMatchObject({ error: { message: expect.stringMatching(/Last-Event-ID is malformed: ./) } });
    }
    const ok = await request(stack.url, { method: 'POST', sessionId, body: callTool(2, UpstreamTools.Echo, { text: 'still here' }) });
    expect(ok.status).toBe(200);
    ok.cancel();
  });

  it('unknown_session: another principal gets exactly what an unknown session gets', async () => {
    const sessionId = await initialize(stack.url, { authorization: 'Bearer alice' });
    const ids = await streamedIdsAs(sessionId, 'Bearer alice');
    const mallory = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids[0]!, headers: { authorization: 'Bearer mallory' } });
    const unknown = await request(stack.url, { method: 'GET', sessionId: 'AAAAAAAAAAAAAAAAAAAAAA', lastEventId: ids[0]!, headers: { authorization: 'Bearer alice' } });
    expect(mallory.status).toBe(404);
    expect(unknown.status).toBe(404);
    expect(await mallory.json()).toEqual(await unknown.json());
    // Alice's session is untouched by Mallory's attempt.
    const alice = await request(stack.url, { method: 'GET', sessionId, lastEventId: ids[0]!, headers: { authorization: 'Bearer alice' } });
    expect(alice.status).toBe(200);
    alice.cancel();
  });
});

async function streamedIdsAs(sessionId: string, authorization: string): Promise<string[]> {
  const post = await request(stack.url, { method: 'POST', sessionId, headers: { authorization }, body: callTool(1, UpstreamTools.StreamProgress, { count: 3, delayMs: 0 }) });
  expect(post.status).toBe(200);
  return (await collect(post.messages)).map((m) => m.id).filter((id): id is string => id !== undefined);
}
