import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream, jetstreamManager, AckPolicy, DeliverPolicy } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { LogHeader } from '@tether/protocol';
import { createAudit } from '../../../services/gateway/src/audit.js';
import { decodeAuditEvent, SessionLog } from '@tether/session-log';
import type { AuditEvent } from '@tether/session-log';
import { sessionTag as telemetryTag } from '@tether/telemetry';
import { checkChains, listSessions, openInspectAccess, readTimeline, sessionTag } from '@tether/inspect';
import type { InspectAccess } from '@tether/inspect';
import { runScenario, startAdminStack, until } from './admin-stack.js';
import type { AdminStack, Scenario } from './admin-stack.js';

let stack: AdminStack;
let scenario: Scenario;
let access: InspectAccess;
let nc: NatsConnection;

beforeAll(async () => {
  stack = await startAdminStack(['gw-a', 'gw-b']);
  scenario = await runScenario(stack);
  access = await openInspectAccess({ servers: stack.nats.url, namespace: stack.namespace });
  nc = await connect({ servers: stack.nats.url });
}, 60_000);
afterAll(async () => {
  await access?.close();
  await nc?.close();
  await stack?.teardown();
});

/** The raw audit messages of one session, as stored. */
async function rawAudit(sessionId: string): Promise<{ data: string; event: AuditEvent | undefined }[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.consumers.add(stack.names.streamName, { filter_subject: `${stack.names.subjectPrefix}.audit.${sessionId}`, deliver_policy: DeliverPolicy.All, ack_policy: AckPolicy.None, mem_storage: true });
  const out: { data: string; event: AuditEvent | undefined }[] = [];
  if (info.num_pending === 0) return out;
  const consumer = jetstream(nc).consumers.getConsumerFromInfo(info);
  for await (const msg of await consumer.fetch({ max_messages: info.num_pending, expires: 2_000 })) {
    out.push({ data: msg.string(), event: decodeAuditEvent(msg.data) });
    if (msg.info.pending === 0) break;
  }
  await jsm.consumers.delete(stack.names.streamName, info.name);
  return out;
}

const ALLOWED_KEYS = new Set(['v', 'atMs', 'instance', 'kind', 'stream', 'cursor', 'verdict', 'status', 'events', 'conn', 'writer', 'from', 'reason']);

describe('audit events', () => {
  it('records each request kind with its instance, cursor and verdict, and the delivered counts', async () => {
    // Fire and forget: the deliveries' ends are recorded once their clients are gone.
    const a = await until('A\'s delivered events', async () => {
      const rows = await rawAudit(scenario.a);
      return rows.filter((r) => r.event?.kind === 'delivered').length >= 4 ? rows : undefined;
    });
    const events = a.map((r) => r.event!);
    expect(events.every((e) => e !== undefined)).toBe(true);
    expect(events.find((e) => e.kind === 'initialize')).toMatchObject({ instance: 'gw-a', status: 200 });
    const call = events.find((e) => e.kind === 'post' && e.stream === scenario.stream);
    expect(call).toMatchObject({ instance: 'gw-a', status: 200 });
    const resumed = events.find((e) => e.kind === 'resume');
    expect(resumed).toMatchObject({ instance: 'gw-b', verdict: 'resumed', status: 200, stream: scenario.stream, cursor: { stream: scenario.stream, seq: scenario.cursor.seq, pos: scenario.cursor.pos } });
    const resumedEnd = events.find((e) => e.kind === 'delivered' && e.conn === resumed!.conn);
    expect(resumedEnd).toMatchObject({ instance: 'gw-b', reason: 'ended' });
    // At least 4 progress notifications and the result came after the client's 2 (the end marker is not counted).
    expect(resumedEnd!.events).toBeGreaterThanOrEqual(5);
    expect(events.find((e) => e.kind === 'delivered' && e.conn === call!.conn)).toMatchObject({ instance: 'gw-a', reason: 'client_gone' });
    expect(events.find((e) => e.kind === 'claim')).toMatchObject({ instance: 'gw-b', stream: '0' });
    expect(events.find((e) => e.kind === 'get')).toMatchObject({ instance: 'gw-b', stream: '0', status: 200 });
    expect(events.some((e) => e.kind === 'post' && e.status === 202)).toBe(true);
  });

  it('records the refused resume and the close it caused', async () => {
    const b = (await until('B\'s close', async () => {
      const rows = await rawAudit(scenario.b);
      return rows.some((r) => r.event?.kind === 'close') ? rows : undefined;
    })).map((r) => r.event!);
    expect(b.find((e) => e.kind === 'resume')).toMatchObject({ instance: 'gw-a', verdict: 'epoch_mismatch', status: 404, cursor: { seq: expect.any(Number), pos: expect.any(Number) } });
    expect(b.find((e) => e.kind === 'close')).toMatchObject({ instance: 'gw-a', reason: 'epoch_mismatch' });
  });

  it('holds metadata only: no payload bytes, no session id, no raw event id, only known fields', async () => {
    for (const id of [scenario.a, scenario.b]) {
      const rows = await rawAudit(id);
      expect(rows.length).toBeGreaterThan(2);
      for (const { data } of rows) {
        expect(data).not.toContain(scenario.a);
        expect(data).not.toContain(scenario.b);
        for (const payload of ['jsonrpc', 'progress', 'done 6', 'notifications', 'stream_progress']) expect(data).not.toContain(payload);
        // An event id is <epoch>-<stream>-<seq>-<pos>: no 10-character epoch in any value.
        expect(data).not.toMatch(/[a-z2-7]{10}-/);
        for (const key of Object.keys(JSON.parse(data) as object)) expect(ALLOWED_KEYS.has(key)).toBe(true);
      }
    }
  });

  it('keeps a closed session\'s audit events after its log is purged', async () => {
    const jsm = await jetstreamManager(nc);
    const info = await jsm.streams.info(stack.names.streamName, { subjects_filter: `${stack.names.subjectPrefix}.>` });
    const subjects = Object.keys(info.state.subjects ?? {});
    expect(subjects.some((s) => s.startsWith(`${stack.names.subjectPrefix}.log.${scenario.b}.`))).toBe(false);
    expect(subjects).toContain(`${stack.names.subjectPrefix}.audit.${scenario.b}`);
  });

  it('records nothing with --audit off', () => {
    const calls: unknown[] = [];
    const fake = { audit: (...args: unknown[]) => calls.push(args) } as unknown as Parameters<typeof createAudit>[0];
    const off = createAudit(fake, 'gw-x', false);
    off.record('S', { kind: 'post' });
    expect(off.open('S', { kind: 'get' })).toBe('');
    expect(calls).toEqual([]);
    const on = createAudit(fake, 'gw-x', true);
    on.record('S', { kind: 'post', status: 202 });
    expect(calls).toEqual([['S', { v: 1, atMs: expect.any(Number), instance: 'gw-x', kind: 'post', status: 202 }]]);
  });

  it('adds the audit subject to a log stream made before it, and changes nothing else', async () => {
    const jsm = await jetstreamManager(nc);
    const prefix = `old${process.pid}`;
    const name = `OLD_${process.pid}`;
    await jsm.streams.add({ name, subjects: [`${prefix}.log.>`], max_age: 60_000 * 1e6, max_msgs_per_subject: 100_000, duplicate_window: 60_000 * 1e6, allow_direct: true, republish: { src: `${prefix}.log.>`, dest: `${prefix}.live.>` } });
    const log = await SessionLog.create({ nc, streamName: name, subjectPrefix: prefix, sessionsBucket: `s_${name}`, leasesBucket: `l_${name}`, principalsBucket: `p_${name}`, maxAgeMs: 60_000 });
    const after = (await jsm.streams.info(name)).config;
    expect(after.subjects).toEqual([`${prefix}.log.>`, `${prefix}.audit.>`]);
    expect(after.max_age).toBe(60_000 * 1e6);
    await log.close();
  });
});

describe('read model', () => {
  it('lists both sessions by tag with route, state, streams and verdicts', async () => {
    const rows = await listSessions(access);
    const a = rows.find((r) => r.tag === sessionTag(scenario.a));
    const b = rows.find((r) => r.tag === sessionTag(scenario.b));
    expect(a).toMatchObject({ route: '/mcp', state: 'active', verdicts: { resumed: 1 } });
    // Stream 0, initialize's answer (an SSE stream too) and the tool call.
    expect(a!.streams).toBe(3);
    expect(b).toMatchObject({ route: '/mcp', state: 'closed', streams: 0, verdicts: { epoch_mismatch: 1 } });
    expect((await listSessions(access, { verdict: 'epoch_mismatch' })).map((r) => r.tag)).toEqual([b!.tag]);
    expect((await listSessions(access, { state: 'active' })).map((r) => r.tag)).toEqual([a!.tag]);
    expect(await listSessions(access, { route: '/other' })).toEqual([]);
    expect(JSON.stringify(rows)).not.toContain(scenario.a);
  });

  it('tags exactly as the services\' log lines do', () => {
    expect(sessionTag(scenario.a)).toBe(telemetryTag(scenario.a));
  });

  it('draws A as lanes of marks with writers, and its connections across instances', async () => {
    const t = await readTimeline(access, sessionTag(scenario.a));
    expect(t.lanes).toHaveLength(3);
    expect(t.lanes[0]!.stream).toBe('0');
    expect(t.lanes[2]!.stream).toBe(scenario.stream);
    const post = t.lanes[2]!;
    const n = post.events.length;
    expect(n).toBeGreaterThanOrEqual(9); // prime, 6 progress notifications, the result, end
    expect(post.events.map((e) => e.kind)).toEqual(['prime', ...Array.from({ length: n - 2 }, () => 'event'), 'end']);
    expect(post.events.map((e) => e.seq)).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    expect(post.ended).toBe(true);
    expect(post.events[n - 1]!.endReason).toBe('complete');
    // Sizes, not payloads: the 6 notifications and the result have bytes (the upstream's own priming event has none; the prime holds the owed request ids).
    expect(post.events.filter((e) => e.kind === 'event' && e.bytes > 0)).toHaveLength(7);
    expect(post.events.every((e) => !('payload' in e))).toBe(true);
    expect(post.writers).toHaveLength(1);
    expect(post.writers[0]).toMatchObject({ fromSeq: 1, toSeq: n, takeover: false });
    const afterCursor = post.events.filter((e) => e.kind === 'event' && e.seq > scenario.cursor.seq).length;
    // Stream 0: initialize's prime (no writer), then gw-b's listener claim.
    const zero = t.lanes[0]!;
    const claim = t.connections.find((c) => c.kind === 'claim')!;
    expect(zero.writers.map((w) => w.writer)).toEqual([claim.writer]);
    const resume = t.connections.find((c) => c.kind === 'resume')!;
    expect(resume).toMatchObject({ instance: 'gw-b', verdict: 'resumed', stream: scenario.stream, cursor: { stream: scenario.stream, seq: scenario.cursor.seq, pos: scenario.cursor.pos }, events: afterCursor, reason: 'ended' });
    expect(t.connections.map((c) => c.instance)).toEqual(expect.arrayContaining(['gw-a', 'gw-b']));
    expect(t.endedAtMs).toBeUndefined();
    expect(JSON.stringify(t)).not.toContain(scenario.a);
  });

  it('draws B\'s end: closed, no lanes left, the refusal and the close', async () => {
    const t = await readTimeline(access, sessionTag(scenario.b));
    expect(t.session.state).toBe('closed');
    expect(t.lanes).toEqual([]);
    expect(t.endedAtMs).toBeGreaterThan(0);
    expect(t.connections.map((c) => c.kind)).toEqual(expect.arrayContaining(['initialize', 'post', 'resume', 'close']));
  });

  it('refuses a malformed tag and an unknown one by code', async () => {
    await expect(readTimeline(access, scenario.a)).rejects.toMatchObject({ code: 'invalid_argument' });
    await expect(readTimeline(access, 's_AAAAAAAAAAAA')).rejects.toMatchObject({ code: 'session_not_found' });
  });

  it('finds every chain intact, then the hole and the fork injected into a stream, by position', async () => {
    const tag = sessionTag(scenario.a);
    const clean = await checkChains(access, tag);
    expect(clean).toHaveLength(3);
    expect(clean.every((c) => c.ok && c.problems.length === 0 && c.events > 0)).toBe(true);
    const { epoch } = JSON.parse((await access.partitionOf(scenario.a).sessions.get(scenario.a))!.string()) as { epoch: string };
    const js = jetstream(nc);
    const subject = `${stack.names.subjectPrefix}.log.${scenario.a}.bbbbbbbb`;
    const append = async (seq: number, prev: number): Promise<number> => {
      const h = (await import('@nats-io/transport-node')).headers();
      h.set(LogHeader.epoch, epoch);
      h.set(LogHeader.seq, String(seq));
      h.set(LogHeader.prev, String(prev));
      h.set(LogHeader.kind, 'event');
      return (await js.publish(subject, '{}', { headers: h })).seq;
    };
    const p1 = await append(1, 0);
    const p3 = await append(3, p1); // seq 2 never written: a hole
    const p3b = await append(3, p3); // seq 3 again: a fork
    const checks = await checkChains(access, tag);
    const bad = checks.find((c) => c.stream === 'bbbbbbbb')!;
    expect(bad.ok).toBe(false);
    expect(bad.problems.map((p) => [p.kind, p.seq, p.pos])).toEqual([['hole', 3, p3], ['fork', 3, p3b]]);
    expect(checks.filter((c) => c.stream !== 'bbbbbbbb').every((c) => c.ok)).toBe(true);
  });
});
