import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jetstream } from '@nats-io/jetstream';
import { connect, headers } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { Kvm } from '@nats-io/kv';
import { LogHeader } from '@tether/protocol';
import { principalTag } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { sessionTag } from '@tether/inspect';
import type { ChainCheck, SessionSummary, SessionTimeline } from '@tether/inspect';
import { admin, post, readEvents, runScenario, startAdminStack, until, VERSION } from './admin-stack.js';
import type { AdminStack, Scenario } from './admin-stack.js';

let stack: AdminStack;
let scenario: Scenario;
let nc: NatsConnection;
let base: string[];

beforeAll(async () => {
  stack = await startAdminStack(['gw-a', 'gw-b', 'gw-c']);
  scenario = await runScenario(stack);
  nc = await connect({ servers: stack.nats.url });
  base = ['--nats', stack.nats.url, '--namespace', stack.namespace];
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await stack?.teardown();
});

const json = async <T>(args: string[], status = 0): Promise<T> => {
  const run = await admin([...args, ...base, '--json']);
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status, stderr: status === 0 ? '' : expect.any(String) });
  return JSON.parse(run.stdout) as T;
};

describe('tether-admin', () => {
  it('--help lists every command and flag', async () => {
    const run = await admin(['--help']);
    expect(run.status).toBe(0);
    for (const word of ['sessions', 'show <tag>', 'verify <tag>', 'close <tag>', 'drain <instance>', '--verdict', '--state', '--route', '--principal', '--limit', '--json', '--nats', '--namespace', '--timeout', 'partitions', '--rebalance', '--log-partitions N']) expect(run.stdout).toContain(word);
  });

  it('refuses bad input with a message naming the problem (exit 2)', async () => {
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /unknown command "frobnicate"/],
      [['show', scenario.a], /that is a raw session id; sessions are named by tag/],
      [['verify', 'abc'], /not a session tag: "abc"/],
      [['show'], /show needs a session tag/],
      [['sessions', '--limit', '0'], /invalid --limit "0"/],
      [['sessions', '--state', 'open'], /invalid --state "open"/],
      [['sessions', '--bogus', '1'], /unknown flag --bogus/],
      [['verify', 's_AAAAAAAAAAAA', '--limit', '3'], /--limit does not apply to verify/],
      [['sessions', '--namespace', 'Bad!'], /invalid namespace/],
      [['sessions', '--principal', 'eyJhbGciOiJIUzI1NiJ9.e30.secret'], /invalid --principal \(not shown\); allowed: a principal tag/],
      [['sessions', '--principal', 'A'.repeat(44)], /invalid --principal/],
      [['show', 's_AAAAAAAAAAAA', '--principal', 'abc'], /--principal does not apply to show/],
    ];
    for (const [args, message] of cases) {
      const run = await admin([...args, '--nats', stack.nats.url]);
      expect({ args, status: run.status }).toEqual({ args, status: 2 });
      expect(run.stderr).toMatch(message);
      expect(run.stdout + run.stderr).not.toContain(scenario.a);
      expect(run.stdout + run.stderr).not.toContain('secret');
    }
    const asJson = await admin(['show', 'nope', '--json']);
    expect(JSON.parse(asJson.stdout)).toMatchObject({ error: { code: 'invalid_argument' } });
  });

  it('sessions lists by tag, filtered by verdict, state, route and limit', async () => {
    const all = await json<SessionSummary[]>(['sessions']);
    const tags = all.map((s) => s.tag);
    expect(tags).toEqual(expect.arrayContaining([sessionTag(scenario.a), sessionTag(scenario.b)]));
    expect((await json<SessionSummary[]>(['sessions', '--verdict', 'epoch_mismatch'])).map((s) => s.tag)).toEqual([sessionTag(scenario.b)]);
    expect((await json<SessionSummary[]>(['sessions', '--state', 'closed'])).map((s) => s.tag)).toEqual([sessionTag(scenario.b)]);
    expect(await json<SessionSummary[]>(['sessions', '--route', '/elsewhere'])).toEqual([]);
    expect(await json<SessionSummary[]>(['sessions', '--limit', '1'])).toHaveLength(1);
    const text = await admin(['sessions', ...base]);
    expect(text.stdout).toMatch(/^TAG\s+PRINCIPAL\s+ROUTE\s+STATE\s+AGE\s+IDLE\s+STREAMS\s+VERDICTS$/m);
    expect(text.stdout).toContain('epoch_mismatch=1');
    expect(text.stdout).not.toContain(scenario.a);
  });

  it("names each session's principal by its tag, never by its digest, and lists one principal's sessions", async () => {
    const kv = await new Kvm(nc).open(stack.names.sessionsBucket);
    const recordOf = async (id: string): Promise<SessionRecord> => JSON.parse((await kv.get(id))!.string()) as SessionRecord;
    const [recordA, recordB] = [await recordOf(scenario.a), await recordOf(scenario.b)];
    const principal = principalTag(recordA.principal);
    // These gateways run without --auth: every caller is the anonymous principal, one digest.
    expect(recordA.principal).toHaveLength(43);
    expect(recordB.principal).toBe(recordA.principal);
    const outputs: string[] = [];
    const run = async (args: string[]): Promise<string> => {
      const r = await admin([...args, ...base]);
      expect({ args, status: r.status, stderr: r.stderr }).toEqual({ args, status: 0, stderr: '' });
      outputs.push(r.stdout);
      return r.stdout;
    };
    const rows = JSON.parse(await run(['sessions', '--json'])) as SessionSummary[];
    expect(rows.find((s) => s.tag === sessionTag(scenario.a))?.principal).toBe(principal);
    expect(rows.find((s) => s.tag === sessionTag(scenario.b))?.principal).toBe(principal);
    const table = await run(['sessions']);
    expect(table).toMatch(new RegExp(`^${sessionTag(scenario.a)}\\s+${principal}\\s+/mcp\\s`, 'm'));
    for (const filter of [principal, principal.slice(0, 5), recordA.principal]) {
      const listed = JSON.parse(await run(['sessions', '--principal', filter, '--json'])) as SessionSummary[];
      expect(listed.map((s) => s.tag).sort()).toEqual([sessionTag(scenario.a), sessionTag(scenario.b)].sort());
    }
    const other = principal[0] === 'A' ? 'B' : 'A';
    expect(JSON.parse(await run(['sessions', '--principal', other, '--json']))).toEqual([]);
    expect(await run(['sessions', '--principal', other])).toBe('no sessions\n');
    const shown = JSON.parse(await run(['show', sessionTag(scenario.a), '--json'])) as SessionTimeline;
    expect(shown.session.principal).toBe(principal);
    expect(await run(['show', sessionTag(scenario.a)])).toMatch(new RegExp(`^session ${sessionTag(scenario.a)}  principal ${principal}  route /mcp`, 'm'));
    for (const out of outputs) {
      expect(out).not.toContain(recordA.principal);
      expect(out).not.toContain(scenario.a);
    }
  });

  it('show draws the timeline as JSON and as text', async () => {
    const t = await json<SessionTimeline>(['show', sessionTag(scenario.a)]);
    expect(t.session.tag).toBe(sessionTag(scenario.a));
    expect(t.lanes.map((l) => l.stream)).toContain(scenario.stream);
    expect(t.connections.find((c) => c.kind === 'resume')).toMatchObject({ instance: 'gw-b', verdict: 'resumed' });
    const text = await admin(['show', sessionTag(scenario.a), ...base]);
    expect(text.status).toBe(0);
    expect(text.stdout).toContain(`stream ${scenario.stream}: `);
    expect(text.stdout).toMatch(new RegExp(`gw-b  resume  stream ${scenario.stream}  cursor ${scenario.stream}/${scenario.cursor.seq}@${scenario.cursor.pos}  verdict resumed`));
    expect(text.stdout).not.toContain(scenario.a);
    const unknown = await admin(['show', 's_AAAAAAAAAAAA', ...base]);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toMatch(/no session with tag s_AAAAAAAAAAAA/);
  });

  it('verify passes intact chains and fails (exit 1) on an injected hole, by position', async () => {
    const tag = sessionTag(scenario.a);
    const ok = await json<{ ok: boolean; streams: ChainCheck[] }>(['verify', tag]);
    expect(ok.ok).toBe(true);
    const record = await until('A\'s record', async () => (await (await import('@nats-io/kv')).Kvm.prototype.open.call(new (await import('@nats-io/kv')).Kvm(nc), stack.names.sessionsBucket)).get(scenario.a).then((e) => e ?? undefined));
    const { epoch } = JSON.parse(record.string()) as { epoch: string };
    const js = jetstream(nc);
    const subject = `${stack.names.subjectPrefix}.log.${scenario.a}.cccccccc`;
    const h = (seq: number, prev: number) => {
      const m = headers();
      m.set(LogHeader.epoch, epoch);
      m.set(LogHeader.seq, String(seq));
      m.set(LogHeader.prev, String(prev));
      m.set(LogHeader.kind, 'event');
      return m;
    };
    const p1 = (await js.publish(subject, '{}', { headers: h(1, 0) })).seq;
    const p4 = (await js.publish(subject, '{}', { headers: h(4, p1) })).seq;
    const broken = await json<{ ok: boolean; streams: ChainCheck[] }>(['verify', tag], 1);
    expect(broken.ok).toBe(false);
    expect(broken.streams.find((c) => c.stream === 'cccccccc')!.problems).toEqual([{ kind: 'hole', seq: 4, pos: p4, detail: expect.stringContaining('expected seq 2') }]);
    const text = await admin(['verify', tag, ...base]);
    expect(text.status).toBe(1);
    expect(text.stdout).toContain(`hole at seq 4, pos ${p4}`);
  });

  it('close ends the session on every instance: a GET open on another instance ends, requests get 404', async () => {
    const tag = sessionTag(scenario.a);
    const get = await fetch(stack.urls.get('gw-b')!, { headers: { accept: 'text/event-stream', 'mcp-session-id': scenario.a, 'mcp-protocol-version': VERSION } });
    expect(get.status).toBe(200);
    const ended = readEvents(get).then(() => 'ended');
    const outcome = await json<{ tag: string; closed: boolean }>(['close', tag]);
    expect(outcome).toEqual({ tag, closed: true });
    expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r('still open'), 5_000))])).toBe('ended');
    const after = await post(stack.urls.get('gw-c')!, scenario.a, { jsonrpc: '2.0', id: 9, method: 'tools/list' });
    expect(after.status).toBe(404);
    const t = await json<SessionTimeline>(['show', tag]);
    expect(t.session.state).toBe('closed');
    expect(t.lanes).toEqual([]);
    expect(t.connections.at(-1)).toMatchObject({ kind: 'close', instance: 'tether-admin', reason: 'admin' });
  });

  it('drain drains the named instance only', async () => {
    const ready = async (id: string) => {
      const origin = new URL(stack.urls.get(id)!).origin;
      return fetch(`${origin}/readyz`).then((r) => r.status, () => 'down');
    };
    expect(await ready('gw-c')).toBe(200);
    const answer = await json<{ ok: boolean; instance: string }>(['drain', 'gw-c']);
    expect(answer).toMatchObject({ ok: true, instance: 'gw-c' });
    await Promise.race([stack.gateways.get('gw-c')!.drained, new Promise((_, reject) => setTimeout(() => reject(new Error('gw-c did not drain')), 10_000))]);
    expect(await ready('gw-c')).toBe('down');
    expect(await ready('gw-a')).toBe(200);
    expect(await ready('gw-b')).toBe(200);
    const nobody = await admin(['drain', 'gw-nobody', ...base, '--timeout', '500', '--json']);
    expect(nobody.status).toBe(1);
    expect(JSON.parse(nobody.stdout)).toMatchObject({ error: { code: 'instance_not_found' } });
  });
});
