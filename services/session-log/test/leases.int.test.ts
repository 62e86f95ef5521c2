import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { status } from '@grpc/grpc-js';
import { callUnary, ControlType } from '@tether/cursor-proto';
import type { CursorServiceClient, Lease, WatchControlResponse } from '@tether/cursor-proto';
import { failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

let fx: ServiceFixture;
let client: CursorServiceClient;
let second: CursorServiceClient;
beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start();
  const other = await fx.start();
  client = fx.client();
  second = fx.client({ target: other.target });
});
afterAll(async () => {
  await fx.teardown();
});

const acquire = (c: CursorServiceClient, sessionId: string, stream: string, owner: string, ttlMs = 5_000) =>
  callUnary(c.acquireLease.bind(c), { sessionId, stream, owner, ttlMs }).then((r) => r.lease!);
const renew = (c: CursorServiceClient, lease: Lease, ttlMs = 5_000) => callUnary(c.renewLease.bind(c), { lease, ttlMs }).then((r) => r.lease!);
const release = (c: CursorServiceClient, lease: Lease) => callUnary(c.releaseLease.bind(c), { lease });
const holder = (c: CursorServiceClient, sessionId: string, stream: string) => callUnary(c.getLeaseHolder.bind(c), { sessionId, stream }).then((r) => r.lease);

describe('writer leases', () => {
  it('acquire, renew, release; a second owner is refused with the holder until the lease is free', async () => {
    const { session } = await rpc(client).open();
    const id = session!.sessionId;
    const a = await acquire(client, id, '0', 'gw-a');
    expect(a).toMatchObject({ sessionId: id, stream: '0', owner: 'gw-a' });
    expect(a.token).not.toBe('');
    const held = await failure(acquire(second, id, '0', 'gw-b'));
    expect([held.code, held.detail?.code, held.detail?.holder]).toEqual([status.FAILED_PRECONDITION, 'lease_held', 'gw-a']);
    expect(held.detail?.holderExpiresAtMs).toBe(a.expiresAtMs);
    const renewed = await renew(second, a, 10_000);
    expect(renewed.revision).toBeGreaterThan(a.revision);
    expect(renewed.expiresAtMs).toBeGreaterThan(a.expiresAtMs);
    expect(await holder(second, id, '0')).toMatchObject({ owner: 'gw-a', token: a.token, revision: 0 });
    // A stale revision is a lost lease.
    const lost = await failure(renew(client, a));
    expect([lost.code, lost.detail?.code]).toEqual([status.ABORTED, 'lease_lost']);
    await release(client, renewed);
    expect(await holder(client, id, '0')).toBeUndefined();
    const b = await acquire(second, id, '0', 'gw-b');
    expect(b.owner).toBe('gw-b');
    await release(client, renewed); // releasing a lease that is no longer ours is a no-op
    expect((await holder(client, id, '0'))?.owner).toBe('gw-b');
  });

  it('an expired lease is free; leases validate their input and their session', async () => {
    const { session } = await rpc(client).open();
    const id = session!.sessionId;
    await acquire(client, id, 'abcdefgh', 'gw-a', 1_000);
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await holder(client, id, 'abcdefgh')).toBeUndefined();
    expect((await acquire(second, id, 'abcdefgh', 'gw-b')).owner).toBe('gw-b');
    expect((await failure(acquire(client, id, 'abcdefgh', 'gw-a', 10))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(acquire(client, id, 'NOPE', 'gw-a'))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(acquire(client, id, '0', ''))).code).toBe(status.INVALID_ARGUMENT);
    const bob = fx.client({ token: TOKENS.bob });
    expect((await failure(acquire(bob, id, '0', 'gw-x'))).code).toBe(status.NOT_FOUND);
    // A lease sent back is bounded like a new one: its owner is named in refusals (trailers).
    const big = { ...(await acquire(client, id, 'bbbbbbbb', 'gw-a')), owner: '\u{10FFFF}'.repeat(200) };
    expect((await failure(renew(client, big))).code).toBe(status.INVALID_ARGUMENT);
    expect((await failure(callUnary(client.releaseLease.bind(client), { lease: { ...big, owner: 'gw-a', token: 't'.repeat(100) } }))).code).toBe(status.INVALID_ARGUMENT);
    // A holder's view has no revision: not a lease one can renew (it used to answer UNAVAILABLE from the KV client).
    const seen = (await holder(client, id, 'bbbbbbbb'))!;
    expect((await failure(renew(client, seen))).code).toBe(status.INVALID_ARGUMENT);
  });
});

describe('control messages', () => {
  it('WatchControl opens with an empty message, then carries what any instance publishes, including CloseSession', async () => {
    const { session } = await rpc(client).open();
    const id = session!.sessionId;
    const watch = second.watchControl({ sessionId: id });
    const received: WatchControlResponse[] = [];
    watch.on('error', () => undefined);
    const opened = new Promise<void>((resolve) => watch.once('data', () => resolve()));
    watch.on('data', (m: WatchControlResponse) => received.push(m));
    await opened;
    await callUnary(client.publishControl.bind(client), { message: { type: ControlType.SUPERSEDED, sessionId: id, stream: '0', from: 'gw-a' } });
    await callUnary(client.publishControl.bind(client), { message: { type: ControlType.DRAIN, sessionId: id, stream: undefined, from: undefined } });
    await rpc(client).close(id, 'gw-a');
    await expect.poll(() => received.length).toBe(4);
    watch.cancel();
    expect(received[0]!.message).toBeUndefined();
    expect(received.slice(1).map((m) => m.message)).toEqual([
      { type: ControlType.SUPERSEDED, sessionId: id, stream: '0', from: 'gw-a' },
      { type: ControlType.DRAIN, sessionId: id, stream: undefined, from: undefined },
      { type: ControlType.CLOSED, sessionId: id, stream: undefined, from: 'gw-a' },
    ]);
  });

  it('publishing and watching need the session to be the caller’s, and a valid type', async () => {
    const { session } = await rpc(client).open();
    const bob = fx.client({ token: TOKENS.bob });
    const f = await failure(callUnary(bob.publishControl.bind(bob), { message: { type: ControlType.DRAIN, sessionId: session!.sessionId, stream: undefined, from: undefined } }));
    expect(f.code).toBe(status.NOT_FOUND);
    const bad = await failure(callUnary(client.publishControl.bind(client), { message: { type: ControlType.UNSPECIFIED, sessionId: session!.sessionId, stream: undefined, from: undefined } }));
    expect(bad.code).toBe(status.INVALID_ARGUMENT);
    const watch = bob.watchControl({ sessionId: session!.sessionId });
    const refused = await new Promise<{ code?: number }>((resolve) => watch.on('error', resolve));
    expect(refused.code).toBe(status.NOT_FOUND);
  });
});
