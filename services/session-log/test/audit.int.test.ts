import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status } from '@grpc/grpc-js';
import { callUnary } from '@tether/cursor-proto';
import type { CursorServiceClient, RecordAuditRequest } from '@tether/cursor-proto';
import { openInspectAccess, readSessionAudit } from '@tether/inspect';
import type { InspectAccess } from '@tether/inspect';
import type { AuditEvent } from '@tether/session-log';
import { collect, failure, rpc, startServiceFixture, TOKENS } from './fixture.js';
import type { ServiceFixture } from './fixture.js';

/**
 * RecordAudit (the gateway's audit events over gRPC) and the service's own
 * audit events, read back as tether-inspect reads them: a real service
 * process on a real nats-server.
 */
let fx: ServiceFixture;
let aliceClient: CursorServiceClient;
let alice: ReturnType<typeof rpc>;
let bob: ReturnType<typeof rpc>;
let bobClient: CursorServiceClient;
let access: InspectAccess;
beforeAll(async () => {
  fx = await startServiceFixture();
  await fx.start(['--instance-id', 'sl-audit-1']);
  aliceClient = fx.client();
  alice = rpc(aliceClient);
  bobClient = fx.client({ token: TOKENS.bob });
  bob = rpc(bobClient);
  access = await openInspectAccess({ servers: fx.nats.url });
});
afterAll(async () => {
  await access?.close();
  await fx.teardown();
});

const request = (sessionId: string, fields: Partial<RecordAuditRequest> = {}): RecordAuditRequest => ({
  sessionId,
  atMs: Date.now(),
  instance: 'gw-test',
  kind: 'post',
  stream: undefined,
  cursor: undefined,
  verdict: undefined,
  status: undefined,
  events: undefined,
  conn: undefined,
  writer: undefined,
  from: undefined,
  reason: undefined,
  ...fields,
});
const record = (client: CursorServiceClient, req: RecordAuditRequest, metadata?: Metadata) =>
  callUnary(client.recordAudit.bind(client), req, metadata === undefined ? {} : { metadata });

async function auditOf(sessionId: string, atLeast: number): Promise<AuditEvent[]> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    const events = await readSessionAudit(access, sessionId);
    if (events.length >= atLeast || Date.now() > deadline) return events;
    await new Promise((r) => setTimeout(r, 50));
  }
}

const selfAudited = (): Metadata => {
  const m = new Metadata();
  m.set('tether-audit', 'self');
  return m;
};

describe('RecordAudit', () => {
  it('stores the event as given, under the session, with the caller\'s instance and time (nothing stamped but v)', async () => {
    const { session } = await alice.open('u', {});
    const id = session!.sessionId;
    const atMs = Date.now() - 1_000;
    await record(aliceClient, request(id, { atMs, kind: 'resume', stream: 'abcdefgh', cursor: { stream: 'abcdefgh', seq: 3, pos: 17 }, verdict: 'truncated', status: 404, conn: 'Xy_9-abc' }));
    await record(aliceClient, request(id, { kind: 'delivered', conn: 'Xy_9-abc', stream: 'abcdefgh', events: 4, reason: 'client_gone' }));
    await record(aliceClient, request(id, { kind: 'takeover', stream: '0', writer: 'aaaaaaaaaaaaaaaa', from: 'bbbbbbbbbbbbbbbb', atMs: 0 }));
    const events = (await auditOf(id, 4)).filter((e) => e.instance === 'gw-test');
    expect(events).toHaveLength(3);
    expect(events[0]).toEqual({ v: 1, atMs, instance: 'gw-test', kind: 'resume', stream: 'abcdefgh', cursor: { stream: 'abcdefgh', seq: 3, pos: 17 }, verdict: 'truncated', status: 404, conn: 'Xy_9-abc' });
    expect(events[1]).toMatchObject({ kind: 'delivered', events: 4, reason: 'client_gone' });
    // at_ms 0: the time of receipt, which the service does know.
    expect(Math.abs(events[2]!.atMs - Date.now())).toBeLessThan(10_000);
    expect(events[2]).toMatchObject({ kind: 'takeover', writer: 'aaaaaaaaaaaaaaaa', from: 'bbbbbbbbbbbbbbbb' });
  });

  it('refuses every bad field with INVALID_ARGUMENT naming it, and stores nothing', async () => {
    const { session } = await alice.open('u', {});
    const id = session!.sessionId;
    const cases: [Partial<RecordAuditRequest>, RegExp][] = [
      [{ kind: 'payload' }, /^kind /],
      [{ kind: '' }, /^kind /],
      [{ instance: '' }, /^instance /],
      [{ instance: 'x'.repeat(129) }, /^instance /],
      [{ instance: 'gw\n1' }, /^instance contains a control character/],
      [{ atMs: -1 }, /^at_ms /],
      [{ atMs: Date.now() + 3_600_000 }, /^at_ms /],
      [{ stream: 'NOT-A-STREAM' }, /^stream /],
      [{ cursor: { stream: 'zz', seq: 1, pos: 1 } }, /^cursor\.stream /],
      [{ verdict: 'fine' }, /^verdict /],
      [{ status: 42 }, /^status /],
      [{ status: 600 }, /^status /],
      [{ conn: 'a'.repeat(33) }, /^conn /],
      [{ conn: 'a b' }, /^conn /],
      [{ writer: 'short' }, /^writer /],
      [{ from: '{"payload":1}' }, /^from /],
      [{ reason: 'r'.repeat(65) }, /^reason /],
    ];
    for (const [fields, message] of cases) {
      const f = await failure(record(aliceClient, request(id, fields)));
      expect({ fields, code: f.code, detail: f.detail?.code }).toEqual({ fields, code: status.INVALID_ARGUMENT, detail: 'invalid_argument' });
      expect(f.message, JSON.stringify(fields)).toMatch(message);
    }
    const bad = await failure(record(aliceClient, request('not-a-session')));
    expect(bad.code).toBe(status.INVALID_ARGUMENT);
    expect(bad.message).toMatch(/^session_id /);
    // Only the service's own `initialize` for the OpenSession.
    expect((await auditOf(id, 1)).map((e) => e.instance)).toEqual(['sl-audit-1']);
  });

  it('refuses another caller\'s session and an unknown one with NOT_FOUND, like every other session RPC', async () => {
    const { session } = await alice.open('u', {});
    const id = session!.sessionId;
    const other = await failure(record(bobClient, request(id)));
    const unknown = await failure(record(bobClient, request('CCCCCCCCCCCCCCCCCCCCCC')));
    for (const f of [other, unknown]) expect({ code: f.code, detail: f.detail?.code }).toEqual({ code: status.NOT_FOUND, detail: 'session_not_found' });
    expect(other.message).toBe(unknown.message);
    expect((await auditOf(id, 1)).filter((e) => e.instance === 'gw-test')).toEqual([]);
    // A closed session is still the caller's: its close and refusals stay recordable.
    await alice.close(id);
    await record(aliceClient, request(id, { kind: 'close', reason: 'epoch_mismatch' }));
    expect((await auditOf(id, 3)).map((e) => `${e.instance}:${e.kind}`)).toEqual(['sl-audit-1:initialize', 'sl-audit-1:close', 'gw-test:close']);
    expect(await bob.touch(id)).toEqual({ touched: false });
  });
});

const recordBatch = (client: CursorServiceClient, events: RecordAuditRequest[]) => callUnary(client.recordAuditBatch.bind(client), { events });

describe('RecordAuditBatch', () => {
  it('stores every event of one call, across the caller\'s sessions, in order', async () => {
    const a = (await alice.open('u', {})).session!.sessionId;
    const b = (await alice.open('u', {})).session!.sessionId;
    const answer = await recordBatch(aliceClient, [request(a, { kind: 'post', status: 200 }), request(b, { kind: 'get', stream: '0' }), request(a, { kind: 'delivered', events: 3, reason: 'ended' })]);
    expect(answer).toEqual({ recorded: 3, refused: [] });
    expect((await auditOf(a, 3)).filter((e) => e.instance === 'gw-test').map((e) => e.kind)).toEqual(['post', 'delivered']);
    expect((await auditOf(b, 2)).filter((e) => e.instance === 'gw-test').map((e) => e.kind)).toEqual(['get']);
    expect(await recordBatch(aliceClient, [])).toEqual({ recorded: 0, refused: [] });
  });

  it("records the valid entries and names each refused one (another caller's or an unknown session, a bad field) by index and code", async () => {
    const a = (await alice.open('u', {})).session!.sessionId;
    const b = (await alice.open('u', {})).session!.sessionId;
    const bobs = (await bob.open('u', {})).session!.sessionId;
    const answer = await recordBatch(aliceClient, [
      request(a, { kind: 'post', status: 200 }),
      request(bobs, { kind: 'get', reason: 'foreign' }),
      request(a, { kind: 'teleport' }),
      request('not-a-session'),
      request('CCCCCCCCCCCCCCCCCCCCCC'),
      request(b, { kind: 'delivered', events: 2 }),
    ]);
    expect(answer.recorded).toBe(2);
    expect(answer.refused.map((r) => [r.index, r.code])).toEqual([
      [1, 'session_not_found'],
      [2, 'invalid_argument'],
      [3, 'invalid_argument'],
      [4, 'session_not_found'],
    ]);
    expect(answer.refused[1]!.message).toMatch(/^kind must be one of/);
    expect(answer.refused[2]!.message).toMatch(/^session_id /);
    // Another caller's session and an unknown one read the same, and neither message holds the id.
    expect(answer.refused[0]!.message).toBe(answer.refused[3]!.message);
    expect(JSON.stringify(answer.refused)).not.toContain(bobs);
    expect((await auditOf(a, 2)).filter((e) => e.instance === 'gw-test').map((e) => e.kind)).toEqual(['post']);
    expect((await auditOf(b, 2)).filter((e) => e.instance === 'gw-test').map((e) => e.kind)).toEqual(['delivered']);
    // Nothing went into Bob's session (a marker of his own, stored after, shows the batch's would have been too).
    await recordBatch(bobClient, [request(bobs, { instance: 'gw-bob', kind: 'close', reason: 'marker' })]);
    expect((await auditOf(bobs, 2)).map((e) => `${e.instance}:${e.kind}`)).toEqual(['sl-audit-1:initialize', 'gw-bob:close']);
    // Only a batch over max-batch-entries fails as a whole, recording none.
    const tooMany = await failure(recordBatch(aliceClient, Array.from({ length: 1001 }, () => request(a))));
    expect({ code: tooMany.code, detail: tooMany.detail?.code }).toEqual({ code: status.INVALID_ARGUMENT, detail: 'invalid_argument' });
    expect(tooMany.message).toMatch(/at most 1000 events, got 1001/);
    expect(await recordBatch(aliceClient, [request(a, { kind: 'close' })])).toEqual({ recorded: 1, refused: [] });
    expect((await auditOf(a, 3)).filter((e) => e.instance === 'gw-test').map((e) => e.kind)).toEqual(['post', 'close']);
  });
});

describe('the service\'s own audit events', () => {
  it('records OpenSession, Resume (verdict and cursor) and CloseSession with its --instance-id', async () => {
    const { session } = await alice.open('u', {});
    const id = session!.sessionId;
    const appended = await alice.append({ sessionId: id, stream: 'abcdefgh', payload: Buffer.from('x') });
    await alice.append({ sessionId: id, stream: 'abcdefgh', payload: Buffer.from('y') });
    const messages = await collect(aliceClient.resume({ sessionId: id, lastEventId: appended.id, principal: 'u' }), 2);
    expect(messages[0]?.ack?.cursorSeq).toBe(1);
    const epochOff = appended.id.replace(/^[a-z2-7]+/, 'aaaaaaaaaa');
    await failure(collect(aliceClient.resume({ sessionId: id, lastEventId: epochOff, principal: 'u' })));
    await alice.close(id);
    const events = await auditOf(id, 4);
    expect(events.every((e) => e.instance === 'sl-audit-1')).toBe(true);
    expect(events.map((e) => ({ kind: e.kind, verdict: e.verdict, cursor: e.cursor, stream: e.stream }))).toEqual([
      { kind: 'initialize', verdict: undefined, cursor: undefined, stream: undefined },
      { kind: 'resume', verdict: 'resumed', cursor: { stream: 'abcdefgh', seq: 1, pos: appended.pos }, stream: 'abcdefgh' },
      { kind: 'resume', verdict: 'epoch_mismatch', cursor: { stream: 'abcdefgh', seq: 1, pos: appended.pos }, stream: 'abcdefgh' },
      { kind: 'close', verdict: undefined, cursor: undefined, stream: undefined },
    ]);
    // Never a raw id in an audit event.
    expect(JSON.stringify(events)).not.toContain(id);
    expect(JSON.stringify(events)).not.toContain(appended.id);
  });

  it('records nothing of its own for a caller that records its own (tether-audit: self), nor into another caller\'s session', async () => {
    const opened = await callUnary(aliceClient.openSession.bind(aliceClient), { principal: 'u', meta: {} }, { metadata: selfAudited() });
    const id = opened.session!.sessionId;
    const appended = await alice.append({ sessionId: id, stream: 'abcdefgh', payload: Buffer.from('x') });
    await collect(aliceClient.resume({ sessionId: id, lastEventId: appended.id, principal: 'u' }, selfAudited()), 1);
    // Bob's resume of Alice's session is unknown_session to him, and leaves no trace in her session.
    await failure(collect(bobClient.resume({ sessionId: id, lastEventId: appended.id, principal: 'u' })));
    await callUnary(aliceClient.closeSession.bind(aliceClient), { sessionId: id, from: 'gw' }, { metadata: selfAudited() });
    // A marker after the calls: everything before it has been stored when it is.
    await record(aliceClient, request(id, { kind: 'close', reason: 'marker' }));
    const events = await auditOf(id, 1);
    expect(events.map((e) => `${e.instance}:${e.kind}`)).toEqual(['gw-test:close']);
  });
});
