import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClientDuplexStream, ClientReadableStream } from '@grpc/grpc-js';
import { callUnary, WriterState } from '@tether/cursor-proto';
import type { CursorServiceClient, HoldPresenceRequest, HoldPresenceResponse, WatchAdminResponse } from '@tether/cursor-proto';
import { openInspectAccess, readTask, requestDrain } from '@tether/inspect';
import type { InspectAccess } from '@tether/inspect';
import { newTaskId } from '@tether/session-log';
import { failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

/**
 * Issue 31, item 3: writer ids (HoldPresence, ProbeWriter) and instance ids
 * (WatchAdmin, AnswerAdmin) are the caller's own, as ServeCancels' are.
 * Alice is the victim, Bob another tenant's token naming her ids. Two real
 * service processes on one real nats-server; the operator side is
 * tether-admin's own code (@tether/inspect) on NATS.
 */
let fx: ServiceFixture;
let alice: CursorServiceClient;
let aliceOther: CursorServiceClient;
let bob: CursorServiceClient;
let access: InspectAccess;

beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start();
  const second = await fx.start([], 'session-log-2');
  alice = fx.client();
  aliceOther = fx.client({ target: second.target });
  bob = fx.client({ token: TOKENS.bob });
  access = await openInspectAccess({ servers: fx.nats.url });
}, 60_000);
afterAll(async () => {
  await access?.close();
  await fx?.teardown();
});

/** A HoldPresence call for `writer` answering every question with `writing`; resolves once held. */
async function hold(client: CursorServiceClient, writer: string, writing: boolean) {
  const call: ClientDuplexStream<HoldPresenceRequest, HoldPresenceResponse> = client.holdPresence();
  const asked: string[] = [];
  call.on('error', () => undefined);
  const held = new Promise<void>((resolve) => {
    call.on('data', (m: HoldPresenceResponse) => {
      if (m.question === 0) return resolve();
      asked.push(`${m.sessionId} ${m.stream}`);
      call.write({ question: m.question, writing });
    });
  });
  call.write({ writer, question: 0, writing: false });
  await held;
  return { call, asked };
}

const probe = (client: CursorServiceClient, writer: string, sessionId?: string, stream?: string) =>
  callUnary(client.probeWriter.bind(client), { writer, sessionId, stream, timeoutMs: 500 }).then((r) => r.state);

describe('HoldPresence and ProbeWriter, per caller', () => {
  it("another caller holding the victim's writer id answers none of the victim's probes, nor hears her session ids", async () => {
    const writer = 'victim-writer-0001';
    const sessionId = (await rpc(alice).open()).session!.sessionId;
    const squatter = await hold(bob, writer, true);
    // Alice's writer is gone (it would be taken over), whatever Bob's holder says.
    expect(await probe(alice, writer)).toBe(WriterState.GONE);
    expect(await probe(aliceOther, writer, sessionId, 'abcdefgh')).toBe(WriterState.GONE);
    expect(squatter.asked).toEqual([]);
    // Bob probes his own.
    expect(await probe(bob, writer)).toBe(WriterState.WRITING);
    squatter.call.end();
  });

  it("the owner's probes reach its writer, on any service instance; another caller's probe of the same id finds it gone", async () => {
    const writer = 'victim-writer-0002';
    const sessionId = (await rpc(alice).open()).session!.sessionId;
    const owner = await hold(alice, writer, false);
    expect(await probe(aliceOther, writer)).toBe(WriterState.WRITING);
    expect(await probe(aliceOther, writer, sessionId, 'abcdefgh')).toBe(WriterState.NOT_WRITING);
    expect(owner.asked).toEqual([`${sessionId} abcdefgh`]);
    expect(await probe(bob, writer)).toBe(WriterState.GONE);
    // The operator's view of a task Alice's writer runs (tether-admin tasks): alive.
    const taskId = newTaskId();
    const now = Date.now();
    const record = { v: 1, taskId, principal: 'p', route: '/mcp', tool: 't', status: 'working', createdAtMs: now, updatedAtMs: now, ttlMs: 60_000, pollIntervalMs: 1_000, runner: writer, runnerInstance: 'gw-1', attempts: 1, reruns: 0, rounds: 0, idempotent: false, params: { name: 't' }, callHeaders: {}, usedKeys: [] };
    await callUnary(alice.createTask.bind(alice), { record: Buffer.from(JSON.stringify(record)) });
    expect((await readTask(access, taskId)).runner).toBe('alive');
    owner.call.end();
    await expect.poll(() => probe(alice, writer)).toBe(WriterState.GONE);
    expect((await readTask(access, taskId)).runner).toBe('gone');
  });
});

/** A WatchAdmin call whose requests queue up; `opened` settles on its first (empty) response. */
function watch(client: CursorServiceClient, instance: string) {
  const call: ClientReadableStream<WatchAdminResponse> = client.watchAdmin({ instance });
  const requests: WatchAdminResponse[] = [];
  const opened = new Promise<WatchAdminResponse>((resolve, reject) => {
    call.once('error', reject);
    call.on('data', (m: WatchAdminResponse) => (m.requestId === '' ? resolve(m) : void requests.push(m)));
  });
  call.on('error', () => undefined);
  return { call, opened, requests };
}

/** How many WatchAdmin calls answer tether-admin's question for `instance`'s address. */
async function addressesAnswering(instance: string): Promise<number> {
  let n = 0;
  try {
    for await (const _ of await access.nc.requestMany(access.subjects.adminWhere(instance), '', { strategy: 'stall', stall: 100, maxWait: 500 })) n += 1;
  } catch {
    // No responders.
  }
  return n;
}

const answer = (client: CursorServiceClient, instance: string, requestId: string, ok: boolean, detail: string) =>
  callUnary(client.answerAdmin.bind(client), { instance, requestId, ok, detail });

describe('WatchAdmin and AnswerAdmin, per caller', () => {
  it("another caller watching the victim's instance id never gets its requests, and cannot answer them", async () => {
    const instance = 'gw-victim';
    const victim = watch(alice, instance);
    const squatter = watch(bob, instance);
    const [mine, theirs] = [(await victim.opened).address!, (await squatter.opened).address!];
    expect(mine).toMatch(/^grpc\.[A-Za-z0-9_-]{22}\.gw-victim$/);
    expect(theirs).not.toBe(mine);
    // The operator drains Alice's address (tether-admin's own request).
    const drained = requestDrain(access, mine);
    await expect.poll(() => victim.requests.length).toBe(1);
    const { requestId } = victim.requests[0]!;
    // Bob, even knowing the request id, answers into his own address only.
    await answer(bob, instance, requestId, false, 'hijacked');
    await new Promise((r) => setTimeout(r, 200));
    await answer(aliceOther, instance, requestId, true, 'draining');
    expect(await drained).toEqual({ ok: true, instance, detail: 'draining' });
    expect(squatter.requests).toEqual([]);
    // By name, two callers' gateways named so: the operator is told both addresses, and nobody is asked.
    const ambiguous = await requestDrain(access, instance).then(() => undefined, (err: unknown) => err as { code: string; message: string });
    expect(ambiguous?.code).toBe('invalid_argument');
    expect(ambiguous?.message).toContain(mine);
    expect(ambiguous?.message).toContain(theirs);
    expect([victim.requests.length, squatter.requests.length]).toEqual([1, 0]);
    squatter.call.cancel();
    // One gateway of that name left: the name reaches it, and only it.
    await expect.poll(() => addressesAnswering(instance)).toBe(1);
    const byName = requestDrain(access, instance);
    await expect.poll(() => victim.requests.length).toBe(2);
    await answer(alice, instance, victim.requests[1]!.requestId, true, 'by name');
    expect(await byName).toEqual({ ok: true, instance, detail: 'by name' });
    // The plain name's own subject is an in-process gateway's: nobody there.
    await expect(access.nc.request(access.subjects.admin(instance), JSON.stringify({ type: 'drain' }), { timeout: 500 })).rejects.toThrow(/503|no responders/i);
    victim.call.cancel();
  });

  it('refuses an instance id whose address would not fit in 128 characters', async () => {
    const f = await failure(watch(alice, 'x'.repeat(101)).opened);
    expect(f.message).toMatch(/^instance is longer than 100 characters/);
    const ok = watch(alice, 'x'.repeat(100));
    expect((await ok.opened).address).toHaveLength(128);
    ok.call.cancel();
  });
});
