import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import type { ClientReadableStream } from '@grpc/grpc-js';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { AdminRequestType, callUnary } from '@tether/cursor-proto';
import type { CursorServiceClient, WatchAdminResponse } from '@tether/cursor-proto';
import { createSubjects, namespaceNames } from '@tether/session-log';
import type { AdminAnswer } from '@tether/session-log';
import { failure, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

/**
 * WatchAdmin / AnswerAdmin: operator requests on `<prefix>.admin.<address>`
 * (the caller's address of its instance, given in the first response)
 * reach a caller without NATS, and its answer goes back to the requester,
 * even through another service instance. Two real service processes on one
 * real nats-server; the requester is a plain NATS client, as tether-admin is
 * (caller-scope.int.test.ts has tether-admin's own drain by name).
 */
let fx: ServiceFixture;
let client: CursorServiceClient;
let other: CursorServiceClient;
let nc: NatsConnection;
const subjects = createSubjects(namespaceNames('').subjectPrefix);

beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start(['--max-streams-per-caller', '3']);
  const second = await fx.start([], 'session-log-2');
  client = fx.client();
  other = fx.client({ target: second.target });
  nc = await connect({ servers: fx.nats.url });
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await fx?.teardown();
});

/** A WatchAdmin call whose requests queue up; `opened` settles on its first (empty) response. */
function watch(instance: string, on: CursorServiceClient = client) {
  const call: ClientReadableStream<WatchAdminResponse> = on.watchAdmin({ instance });
  const requests: WatchAdminResponse[] = [];
  const waiters: ((m: WatchAdminResponse) => void)[] = [];
  const opened = new Promise<WatchAdminResponse>((resolve, reject) => {
    call.once('error', reject);
    call.on('data', (m: WatchAdminResponse) => {
      if (m.requestId === '') return resolve(m);
      const waiter = waiters.shift();
      if (waiter === undefined) requests.push(m);
      else waiter(m);
    });
  });
  call.on('error', () => undefined);
  return {
    call,
    opened,
    next: (): Promise<WatchAdminResponse> => {
      const queued = requests.shift();
      return queued !== undefined ? Promise.resolve(queued) : new Promise((resolve) => waiters.push(resolve));
    },
  };
}

/** A request as tether-admin sends it, to the instance's address. */
const ask = async (address: string, body: unknown = { type: 'drain', from: 'test' }, timeoutMs = 5_000): Promise<AdminAnswer> =>
  (await nc.request(subjects.admin(address), JSON.stringify(body), { timeout: timeoutMs })).json<AdminAnswer>();

const answer = (on: CursorServiceClient, instance: string, requestId: string, ok: boolean, detail: string) => callUnary(on.answerAdmin.bind(on), { instance, requestId, ok, detail });

describe('WatchAdmin and AnswerAdmin', () => {
  it('forwards a drain request and replies on NATS with the answer, given on another service instance', async () => {
    const w = watch('gw-x.1');
    const { address } = await w.opened;
    expect(await w.opened).toMatchObject({ requestId: '', type: AdminRequestType.UNSPECIFIED, address: expect.stringMatching(/^grpc\.[A-Za-z0-9_-]{22}\.gw-x\.1$/) });
    const asked = ask(address!);
    const request = await w.next();
    expect(request).toMatchObject({ type: AdminRequestType.DRAIN, from: 'test' });
    expect(request.requestId).toMatch(/^[0-9a-f]{32}$/);
    await answer(other, 'gw-x.1', request.requestId, true, 'draining');
    expect(await asked).toEqual({ ok: true, instance: 'gw-x.1', detail: 'draining' });
    // A malformed request is answered by the service, never forwarded.
    expect(await ask(address!, { type: 'reboot' })).toEqual({ ok: false, instance: 'gw-x.1', detail: 'not an admin request' });
    w.call.cancel();
  });

  it('answers ok: false when the caller does not answer in time; a caller whose stream ended may still answer', async () => {
    const w = watch('gw-silent');
    const { address } = await w.opened;
    const started = Date.now();
    const late = await ask(address!);
    expect(late).toEqual({ ok: false, instance: 'gw-silent', detail: 'instance gw-silent (a gateway on the session-log service) did not answer within 2000 ms' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_900);
    // An answer after the timeout is accepted and dropped.
    await answer(client, 'gw-silent', (await w.next()).requestId, true, 'too late');
    // A caller that ends its stream may still answer what it was asked (a gateway answers, then drains).
    const answered = ask(address!);
    const asked = await w.next();
    w.call.cancel();
    await new Promise((r) => setTimeout(r, 200));
    await answer(other, 'gw-silent', asked.requestId, true, 'draining');
    expect(await answered).toEqual({ ok: true, instance: 'gw-silent', detail: 'draining' });
    // One that does not is timed out all the same, saying the stream ended.
    const w2 = watch('gw-silent');
    expect((await w2.opened).address).toBe(address);
    const unanswered = ask(address!);
    await w2.next();
    w2.call.cancel();
    expect(await unanswered).toEqual({ ok: false, instance: 'gw-silent', detail: 'instance gw-silent (a gateway on the session-log service) did not answer within 2000 ms; its admin stream ended' });
    // Nobody listens now: NATS says so (tether-admin's instance_not_found).
    await expect(ask(address!, undefined, 500)).rejects.toThrow(/503|no responders/i);
  });

  it('refuses bad instance ids and request ids by name', async () => {
    for (const bad of ['', 'bad id', 'a..b', '.lead', 'trail.', 'star*', 'gt>', 'x'.repeat(129)]) {
      const f = await new Promise<ReturnType<typeof failure> extends Promise<infer F> ? F : never>((resolve) => {
        const call = client.watchAdmin({ instance: bad });
        call.on('data', () => undefined);
        void failure(new Promise((_, reject) => call.once('error', reject))).then(resolve);
      });
      expect({ bad, code: f.code, detail: f.detail?.code }).toEqual({ bad, code: status.INVALID_ARGUMENT, detail: 'invalid_argument' });
      expect(f.message).toMatch(/^instance is not an instance id/);
      const a = await failure(answer(client, bad, '0'.repeat(32), true, ''));
      expect({ bad, code: a.code, message: a.message }).toEqual({ bad, code: status.INVALID_ARGUMENT, message: expect.stringMatching(/^instance is not an instance id/) });
    }
    const id = await failure(answer(client, 'gw-x', 'not-an-id', true, ''));
    expect([id.code, id.message]).toEqual([status.INVALID_ARGUMENT, expect.stringMatching(/^request_id /)]);
    const detail = await failure(answer(client, 'gw-x', '0'.repeat(32), true, 'x'.repeat(300)));
    expect([detail.code, detail.message]).toEqual([status.INVALID_ARGUMENT, 'detail is longer than 256 bytes']);
  });

  it('counts watchers in the per-caller stream limit (3 here), per caller', async () => {
    const held = [watch('gw-l1'), watch('gw-l2'), watch('gw-l3')];
    await Promise.all(held.map((w) => w.opened));
    const refused = await failure(watch('gw-l4').opened);
    expect([refused.code, refused.detail?.code]).toEqual([status.RESOURCE_EXHAUSTED, 'too_many_streams']);
    // Another caller has its own count.
    const bob = watch('gw-l4', fx.client({ token: TOKENS.bob }));
    await bob.opened;
    // A watcher that ends frees its place.
    held[0]!.call.cancel();
    await expect.poll(async () => {
      const w = watch('gw-l5');
      const ok = await w.opened.then(() => true, () => false);
      if (ok) held.push(w);
      return ok;
    }).toBe(true);
    for (const w of [...held, bob]) w.call.cancel();
  });
});
