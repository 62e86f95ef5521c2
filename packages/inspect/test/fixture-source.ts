import { createHash } from 'node:crypto';
import { principalDigest, principalTag } from '@tether/session-log';
import type { InspectSource } from '../src/inspect-api.js';
import type { SessionFilter } from '../src/sessions.js';
import type { ChainCheck, SessionTimeline } from '../src/model.js';
import { principalMatches } from '../src/tag.js';
import type { TaskFilter, TaskList, TaskSummary } from '../src/task-model.js';

/** The tag as @tether/telemetry computes it (`s_` + 12 base64url of SHA-256). */
export const tagOf = (sessionId: string): string => `s_${createHash('sha256').update(sessionId).digest('base64url').slice(0, 12)}`;

/** Raw ids the fixture is built from: no answer of the inspector may contain them. */
export const RAW_IDS = ['Qm9vbXNlc3Npb25pZDAwMQ', 'c2Vjb25kc2Vzc2lvbmlkMDI'] as const;

/** The principal digests of the two sessions (alice's and bob's): only their tags may be shown, never these. */
export const RAW_PRINCIPALS = [principalDigest('alice-token'), principalDigest('bob-token')] as const;

/**
 * Two sessions: one alive with a GET stream and a POST stream, a takeover, a
 * cross-instance resume and a refused one; one closed after an epoch_mismatch.
 */
export function fixtureTimelines(t0 = Date.now() - 90_000): SessionTimeline[] {
  const a = tagOf(RAW_IDS[0]);
  const b = tagOf(RAW_IDS[1]);
  const ev = (seq: number, pos: number, atMs: number, writer: string, kind = 'event', bytes = 120 + seq * 40) => ({ seq, pos, kind, bytes, atMs, writer });
  return [
    {
      session: { tag: a, principal: principalTag(RAW_PRINCIPALS[0]), route: 'default', state: 'active', createdAtMs: t0, touchedAtMs: t0 + 5_000, streams: 2, verdicts: { resumed: 1, malformed: 1 } },
      lanes: [
        {
          stream: '0',
          events: [ev(1, 3, t0 + 200, 'w-gw1', 'prime', 0), ev(2, 9, t0 + 1_200, 'w-gw1'), ev(3, 14, t0 + 3_000, 'w-gw2'), ev(4, 15, t0 + 3_100, 'w-gw2')],
          writers: [
            { writer: 'w-gw1', fromSeq: 1, toSeq: 2, takeover: false },
            { writer: 'w-gw2', fromSeq: 3, toSeq: 4, takeover: true },
          ],
          ended: false,
        },
        {
          stream: '1',
          events: [ev(1, 4, t0 + 300, 'w-gw1', 'prime', 0), ...[2, 3, 4, 5, 6].map((s) => ev(s, 4 + s, t0 + 300 + s * 10, 'w-gw1')), { ...ev(7, 11, t0 + 400, 'w-gw1', 'end', 310), endReason: 'done' }],
          writers: [{ writer: 'w-gw1', fromSeq: 1, toSeq: 7, takeover: false }],
          ended: true,
        },
      ],
      connections: [
        { atMs: t0, instance: 'gateway-1', kind: 'initialize', stream: undefined, cursor: undefined, verdict: undefined, events: undefined, status: 200 },
        { atMs: t0 + 200, instance: 'gateway-1', kind: 'get', stream: '0', cursor: undefined, verdict: undefined, events: 2, status: 200 },
        { atMs: t0 + 200, instance: 'gateway-1', kind: 'claim', stream: '0', cursor: undefined, verdict: undefined, events: undefined, status: undefined, writer: 'w-gw1' },
        { atMs: t0 + 300, instance: 'gateway-1', kind: 'post', stream: '1', cursor: undefined, verdict: undefined, events: 7, status: 200 },
        { atMs: t0 + 2_000, instance: 'gateway-2', kind: 'resume', stream: '1', cursor: { stream: '1', seq: 3, pos: 7 }, verdict: 'resumed', events: 4, status: 200 },
        { atMs: t0 + 2_900, instance: 'gateway-2', kind: 'takeover', stream: '0', cursor: undefined, verdict: undefined, events: undefined, status: undefined, writer: 'w-gw2', from: 'w-gw1' },
        { atMs: t0 + 4_000, instance: 'gateway-1', kind: 'resume', stream: undefined, cursor: undefined, verdict: 'malformed', events: undefined, status: 400 },
      ],
      endedAtMs: undefined,
    },
    {
      session: { tag: b, principal: principalTag(RAW_PRINCIPALS[1]), route: 'default', state: 'closed', createdAtMs: t0 + 10_000, touchedAtMs: t0 + 12_000, streams: 1, verdicts: { epoch_mismatch: 1 } },
      lanes: [{ stream: '1', events: [ev(1, 2, t0 + 10_100, 'w-gw2', 'prime', 0), ev(2, 3, t0 + 10_110, 'w-gw2')], writers: [{ writer: 'w-gw2', fromSeq: 1, toSeq: 2, takeover: false }], ended: false }],
      connections: [
        { atMs: t0 + 10_050, instance: 'gateway-2', kind: 'post', stream: '1', cursor: undefined, verdict: undefined, events: 2, status: 200, writer: 'w-gw2' },
        { atMs: t0 + 10_000, instance: 'gateway-2', kind: 'initialize', stream: undefined, cursor: undefined, verdict: undefined, events: undefined, status: 200 },
        { atMs: t0 + 12_000, instance: 'gateway-1', kind: 'resume', stream: '1', cursor: { stream: '1', seq: 1, pos: 2 }, verdict: 'epoch_mismatch', events: undefined, status: 404 },
      ],
      endedAtMs: t0 + 12_000,
    },
  ];
}

/** Three tasks as the read model shows them (already without payloads): alice's running one with a live runner, her failed one, bob's waiting for input with its runner gone. */
export function fixtureTasks(t0 = Date.now() - 60_000): TaskSummary[] {
  const base = { route: '/mcp', attempts: 1, reruns: 0, rounds: 0, idempotent: false, ttlMs: 3_600_000, pendingInputs: 0, inputResponses: 0, statusMessage: null, errorCode: null, isError: null, bytes: { record: 900, params: 120, result: 0, error: 0 }, replica: null };
  const at = (ms: number) => ({ createdAtMs: ms, updatedAtMs: ms + 1_000, expiresAtMs: ms + 3_600_000 });
  return [
    { ...base, ...at(t0 + 30_000), tag: 'Tk1abc…', status: 'working', tool: 'slow_report', principal: principalTag(RAW_PRINCIPALS[0]), runnerInstance: 'gateway-1', runner: 'alive' },
    { ...base, ...at(t0 + 20_000), tag: 'Tk2def…', status: 'failed', tool: 'slow_report', principal: principalTag(RAW_PRINCIPALS[0]), runnerInstance: 'gateway-2', runner: 'none', attempts: 2, reruns: 1, statusMessage: 'the upstream answered HTTP 502', errorCode: -32603, bytes: { record: 1000, params: 120, result: 0, error: 80 } },
    { ...base, ...at(t0), tag: 'Tk3ghi…', status: 'input_required', tool: 'book_trip', principal: principalTag(RAW_PRINCIPALS[1]), runnerInstance: 'gateway-2', runner: 'gone', rounds: 1, pendingInputs: 2 },
  ];
}

/** An InspectSource over fixture data: what the page is tested against before (and beside) the real read model. */
export function createFixtureSource(timelines: readonly SessionTimeline[] = fixtureTimelines(), tasks: readonly TaskSummary[] = fixtureTasks()): InspectSource & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async listSessions(filter: SessionFilter) {
      calls.push(`list:${filter.verdict ?? ''}:${filter.principal ?? ''}`);
      return timelines
        .map((t) => t.session)
        .filter((s) => filter.verdict === undefined || (s.verdicts[filter.verdict] ?? 0) > 0)
        .filter((s) => filter.principal === undefined || principalMatches(s.principal, filter.principal));
    },
    async readTimeline(tag: string) {
      calls.push(`timeline:${tag}`);
      return timelines.find((t) => t.session.tag === tag);
    },
    async checkChains(tag: string): Promise<ChainCheck[]> {
      calls.push(`chains:${tag}`);
      const t = timelines.find((x) => x.session.tag === tag);
      if (t === undefined) throw Object.assign(new Error('no session with this tag'), { code: 'session_not_found' });
      return t.lanes.map((l) => ({ stream: l.stream, ok: true, events: l.events.length, problems: [] }));
    },
    async listTasks(filter: TaskFilter): Promise<TaskList> {
      calls.push(`tasks:${filter.status ?? ''}:${filter.principal ?? ''}`);
      const listed = tasks.filter((t) => (filter.status === undefined || t.status === filter.status) && (filter.principal === undefined || principalMatches(t.principal, filter.principal)));
      return { stream: 'TETHER_EDGE_TASKS', streamExists: true, tasks: listed.slice(0, filter.limit ?? 50) };
    },
  };
}
