import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import type { NatsConnection } from '@nats-io/transport-node';
import { partitionOf } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { natsOperator, openInspectAccess, sessionTag } from '@tether/inspect';
import type { ChainCheck, InspectAccess, PartitionState, RebalanceResult, SessionSummary, SessionTimeline, TaskList } from '@tether/inspect';
import { runAdmin } from '../src/admin-cli.js';
import { startInspectServer } from '../src/inspect-server.js';
import type { InspectServer } from '../src/inspect-server.js';
import { admin, initialize, post, readEvents, runScenario, startAdminStack, VERSION } from './admin-stack.js';
import type { AdminStack, Scenario } from './admin-stack.js';

/**
 * tether-admin and the inspector on a log of 4 partitions, written by real
 * gateways: sessions of several partitions listed, one read and closed
 * through its own partition, the count read from the deployment (or
 * refused when given wrong), and `tether-admin partitions`.
 */
const PARTITIONS = 4;
const TOKEN = 'partitions-inspect-token-0123456789';

let stack: AdminStack;
let scenario: Scenario;
let nc: NatsConnection;
let access: InspectAccess;
let page: InspectServer;
let base: string[];
/** Every session made here, A and B of the scenario first. */
const sessions: string[] = [];

beforeAll(async () => {
  stack = await startAdminStack(['gw-a', 'gw-b', 'gw-c'], [], { partitions: PARTITIONS });
  scenario = await runScenario(stack);
  sessions.push(scenario.a, scenario.b);
  // More sessions until three partitions hold some (ids are random).
  const used = () => new Set(sessions.map((id) => partitionOf(id, PARTITIONS))).size;
  while (sessions.length < 6 || (used() < 3 && sessions.length < 40)) sessions.push(await initialize(stack.urls.get('gw-c')!));
  nc = await connect({ servers: stack.nats.url });
  access = await openInspectAccess({ servers: stack.nats.url, namespace: stack.namespace });
  page = await startInspectServer({ source: natsOperator(access), tokens: [TOKEN] });
  base = ['--nats', stack.nats.url, '--namespace', stack.namespace];
}, 90_000);
afterAll(async () => {
  await page?.close();
  await access?.close();
  await nc?.close();
  await stack?.teardown();
});

const json = async <T>(args: string[], status = 0, env: Record<string, string> = {}): Promise<T> => {
  const run = await admin([...args, ...base, '--json'], env);
  expect({ args, status: run.status, stderr: run.stderr }).toEqual({ args, status, stderr: status === 0 ? '' : expect.any(String) });
  return JSON.parse(run.stdout) as T;
};
const streamOf = (k: number): string => `TETHER_LOG-${k}_${stack.namespace}`;

describe('tether-admin on a log of 4 partitions', () => {
  it('reads the partition count from the deployment', () => {
    expect(access.partitions.map((p) => p.streamName)).toEqual([0, 1, 2, 3].map(streamOf));
    expect(access.partitions.map((p) => p.sessionsBucket)).toEqual([0, 1, 2, 3].map((k) => `tether_sessions-${k}_${stack.namespace}`));
    expect(access.logName).toBe(`${streamOf(0)} … ${streamOf(3)} (4 partitions)`);
  });

  it('sessions lists the sessions of every partition', async () => {
    expect(new Set(sessions.map((id) => partitionOf(id, PARTITIONS))).size).toBeGreaterThanOrEqual(3);
    const rows = await json<SessionSummary[]>(['sessions', '--limit', '100']);
    expect(rows.map((r) => r.tag).sort()).toEqual(sessions.map(sessionTag).sort());
    expect(rows.find((r) => r.tag === sessionTag(scenario.b))).toMatchObject({ state: 'closed', verdicts: { epoch_mismatch: 1 } });
    expect((await json<SessionSummary[]>(['sessions', '--verdict', 'epoch_mismatch'])).map((r) => r.tag)).toEqual([sessionTag(scenario.b)]);
    // Given, the same count is accepted, from the flag or the environment.
    expect((await json<SessionSummary[]>(['sessions', '--limit', '100', '--log-partitions', '4'])).length).toBe(sessions.length);
    expect((await json<SessionSummary[]>(['sessions', '--limit', '100'], 0, { TETHER_LOG_PARTITIONS: '4' })).length).toBe(sessions.length);
  });

  it('refuses another partition count, naming both, and a count out of range', async () => {
    const cases: [given: string, args: string[], env: Record<string, string>][] = [['2', ['--log-partitions', '2'], {}], ['1', ['--log-partitions', '1'], {}], ['8', [], { TETHER_LOG_PARTITIONS: '8' }]];
    for (const [given, args, env] of cases) {
      const run = await admin(['sessions', ...base, ...args], env);
      expect({ given, status: run.status }).toEqual({ given, status: 2 });
      expect(run.stderr).toMatch(new RegExp(`--log-partitions ${given} disagrees with the deployment, whose log has 4 partition\\(s\\)`));
      expect(run.stderr).toContain(streamOf(0));
      expect(run.stdout).toBe('');
    }
    for (const value of ['0', '257', 'four', '-1']) {
      const run = await admin(['sessions', ...base, `--log-partitions=${value}`]);
      expect({ value, status: run.status }).toEqual({ value, status: 2 });
      expect(run.stderr).toMatch(/invalid --log-partitions .*allowed: an integer from 1 to 256/);
    }
    const env = await admin(['sessions', ...base], { TETHER_LOG_PARTITIONS: 'x' });
    expect(env.status).toBe(2);
    expect(env.stderr).toMatch(/invalid TETHER_LOG_PARTITIONS "x"/);
    const grpc = await admin(['sessions', '--log', 'grpc://127.0.0.1:1', '--log-token', 'op-token', '--log-partitions', '4']);
    expect(grpc.status).toBe(2);
    expect(grpc.stderr).toMatch(/--log-partitions do not apply with --log/);
  });

  it('show reads one session from its partition, verify checks its chains', async () => {
    const t = await json<SessionTimeline>(['show', sessionTag(scenario.a)]);
    expect(t.lanes.map((l) => l.stream)).toContain(scenario.stream);
    expect(t.lanes.find((l) => l.stream === scenario.stream)!.events.length).toBeGreaterThanOrEqual(3);
    expect(t.connections.find((c) => c.kind === 'resume')).toMatchObject({ instance: 'gw-b', verdict: 'resumed', cursor: { stream: scenario.stream, seq: scenario.cursor.seq, pos: scenario.cursor.pos } });
    const text = await admin(['show', sessionTag(scenario.a), ...base]);
    expect(text.stdout).toMatch(new RegExp(`gw-b  resume  stream ${scenario.stream}  cursor ${scenario.stream}/${scenario.cursor.seq}@${scenario.cursor.pos}  verdict resumed`));
    expect(text.stdout).not.toContain(scenario.a);
    const checks = await json<{ ok: boolean; streams: ChainCheck[] }>(['verify', sessionTag(scenario.a)]);
    expect(checks.ok).toBe(true);
    expect(checks.streams.map((c) => c.stream)).toContain(scenario.stream);
    // The event positions are the partition stream's own.
    const events = t.lanes.flatMap((l) => l.events);
    const info = await access.jsm.streams.info(streamOf(partitionOf(scenario.a, PARTITIONS)));
    expect(Math.max(...events.map((e) => e.pos))).toBeLessThanOrEqual(info.state.last_seq);
  });

  it('the inspector lists, draws and lists tasks on the partitioned log', async () => {
    const get = async <T>(path: string): Promise<T> => {
      const res = await fetch(`${page.url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      return (await res.json()) as T;
    };
    expect((await get<{ sessions: SessionSummary[] }>('/api/sessions?limit=100')).sessions.map((r) => r.tag).sort()).toEqual(sessions.map(sessionTag).sort());
    const other = sessions.find((id) => partitionOf(id, PARTITIONS) !== partitionOf(scenario.a, PARTITIONS))!;
    for (const id of [scenario.a, other]) expect((await get<SessionTimeline>(`/api/sessions/${sessionTag(id)}`)).session.tag).toBe(sessionTag(id));
    expect(await get<TaskList>('/api/tasks')).toMatchObject({ tasks: [] });
  });

  it('partitions prints one line per partition: stream, size, leaders', async () => {
    const rows = await json<PartitionState[]>(['partitions']);
    expect(rows.map((p) => p.index)).toEqual([0, 1, 2, 3]);
    for (const p of rows) {
      expect(p.log).toMatchObject({ stream: streamOf(p.index), exists: true, replicas: [] });
      expect(p.sessions).toMatchObject({ bucket: `tether_sessions-${p.index}_${stack.namespace}`, stream: `KV_tether_sessions-${p.index}_${stack.namespace}`, exists: true });
      expect(p.leases).toMatchObject({ bucket: `tether_leases-${p.index}_${stack.namespace}`, exists: true });
      // One server: it leads everything.
      expect([p.sessions.leader, p.leases.leader]).toEqual([p.log.leader, p.log.leader]);
      expect(typeof p.log.leader).toBe('string');
      const holds = sessions.some((id) => partitionOf(id, PARTITIONS) === p.index);
      expect({ index: p.index, holds, hasMessages: p.log.messages > 0 }).toEqual({ index: p.index, holds, hasMessages: holds });
    }
    const text = await admin(['partitions', ...base]);
    expect(text.status).toBe(0);
    const lines = text.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^PARTITION\s+STREAM\s+MESSAGES\s+BYTES\s+LEADER\s+REPLICAS\s+SESSIONS LEADER\s+LEASES LEADER$/);
    expect(lines).toHaveLength(5);
    for (const p of rows) {
      expect(lines[p.index + 1]).toMatch(new RegExp(`^${p.index}\\s+${streamOf(p.index)}\\s+${p.log.messages}\\s+[0-9.]+ (B|KiB|MiB)\\s+${p.log.leader!}\\s+-\\s+${p.log.leader!}\\s+${p.log.leader!}$`));
    }
  });

  it('partitions --rebalance on one server (R1) says there is nothing to move', async () => {
    const result = await json<RebalanceResult>(['partitions', '--rebalance']);
    expect(result).toMatchObject({ replicated: false, moves: [] });
    const text = await admin(['partitions', '--rebalance', ...base]);
    expect(text).toMatchObject({ status: 0, stderr: '' });
    expect(text.stdout).toMatch(/^the log is not replicated \(R1\).*no leader to move\n$/);
    const misplaced = await admin(['sessions', '--rebalance', ...base]);
    expect(misplaced.status).toBe(2);
    expect(misplaced.stderr).toMatch(/--rebalance does not apply to sessions/);
  });

  it('says plainly that the operator API (--log grpc://) serves no partitions', async () => {
    for (const extra of [[], ['--rebalance']]) {
      let stderr = '';
      const status = await runAdmin(['partitions', ...extra, '--log', 'grpc://127.0.0.1:9', '--log-token', 'operator-token-0123456789'], { stdout: () => undefined, stderr: (t) => void (stderr += t), env: {} });
      expect({ extra, status }).toEqual({ extra, status: 1 });
      expect(stderr).toMatch(/does not serve partitions \(no partition RPCs in tether\.operator\.v1\): read and rebalance them with --nats/);
    }
  });

  it('close ends a session through its partition: registry, purge, control message', async () => {
    const tag = sessionTag(scenario.a);
    const k = partitionOf(scenario.a, PARTITIONS);
    const get = await fetch(stack.urls.get('gw-b')!, { headers: { accept: 'text/event-stream', 'mcp-session-id': scenario.a, 'mcp-protocol-version': VERSION } });
    expect(get.status).toBe(200);
    const ended = readEvents(get).then(() => 'ended');
    expect(await json<{ tag: string; closed: boolean }>(['close', tag])).toEqual({ tag, closed: true });
    expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r('still open'), 5_000))])).toBe('ended');
    const after = await post(stack.urls.get('gw-c')!, scenario.a, { jsonrpc: '2.0', id: 9, method: 'tools/list' });
    expect(after.status).toBe(404);
    const record = await (await new Kvm(nc).open(`tether_sessions-${k}_${stack.namespace}`)).get(scenario.a);
    expect((JSON.parse(record!.string()) as SessionRecord).state).toBe('closed');
    const info = await access.jsm.streams.info(streamOf(k), { subjects_filter: `${stack.names.subjectPrefix}.log.${k}.${scenario.a}.>` });
    expect(Object.keys(info.state.subjects ?? {})).toEqual([]);
    const t = await json<SessionTimeline>(['show', tag]);
    expect(t.session.state).toBe('closed');
    expect(t.lanes).toEqual([]);
    expect(t.connections.at(-1)).toMatchObject({ kind: 'close', instance: 'tether-admin', reason: 'admin' });
    // Another partition's session is untouched.
    const other = sessions.find((id) => id !== scenario.b && partitionOf(id, PARTITIONS) !== k)!;
    expect((await json<SessionTimeline>(['show', sessionTag(other)])).session.state).toBe('active');
  });
});

describe('finding the partition count when the deployment cannot say it alone', () => {
  const open = (namespace: string, partitions?: number) => openInspectAccess({ nc, namespace, ...(partitions === undefined ? {} : { partitions }) });
  const refusal = (namespace: string, partitions?: number) => open(namespace, partitions).then(() => 'opened', (err: { code: string; message: string }) => `${err.code}: ${err.message}`);
  /** A stream of the partitioned layout's name, made by hand (subjects outside the deployments' own). */
  const addStream = (name: string, metadata?: Record<string, string>) => access.jsm.streams.add({ name, subjects: [`hand.${name}.>`], ...(metadata === undefined ? {} : { metadata }) });

  it('no log at all: log_not_found naming both layouts', async () => {
    expect(await refusal('nolog')).toBe('log_not_found: no log stream TETHER_LOG_nolog or TETHER_LOG-0_nolog on this NATS account (namespace nolog): check --namespace and --nats');
    expect(await refusal('nolog', 4)).toMatch(/^log_not_found: no log stream TETHER_LOG-0_nolog /);
  });

  it('both layouts exist: the operator chooses with --log-partitions', async () => {
    await addStream('TETHER_LOG_both');
    await addStream('TETHER_LOG-0_both', { tether_partitions: '2' });
    expect(await refusal('both')).toMatch(/^invalid_argument: both TETHER_LOG_both \(an unpartitioned log\) and TETHER_LOG-0_both \(a log of 2 partitions\) exist on this NATS account: give --log-partitions/);
    expect(await refusal('both', 3)).toMatch(/^invalid_argument: --log-partitions 3 disagrees with the deployment, whose log has 2 partition\(s\) \(TETHER_LOG-0_both has metadata tether_partitions=2\)/);
    for (const n of [1, 2]) {
      const chosen = await open('both', n);
      expect(chosen.partitions.map((p) => p.streamName)).toEqual(n === 1 ? ['TETHER_LOG_both'] : ['TETHER_LOG-0_both', 'TETHER_LOG-1_both']);
      await chosen.close();
    }
  });

  it('partition 0 without its metadata: the count must be given', async () => {
    await addStream('TETHER_LOG-0_bare');
    expect(await refusal('bare')).toBe('invalid_argument: TETHER_LOG-0_bare has no metadata tether_partitions, so the partition count cannot be read from the deployment: give --log-partitions (the gateways\' count)');
    expect(await refusal('bare', 1)).toMatch(/give --log-partitions \(the gateways' count\), not 1: there is no TETHER_LOG_bare$/);
    const given = await open('bare', 3);
    expect(given.partitions).toHaveLength(3);
    await given.close();
  });
});
