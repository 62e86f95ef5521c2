/**
 * `tether-admin partitions --rebalance`: spreads the partitions' Raft
 * leaders over the servers, so that every server leads about as many
 * partitions, instead of wherever the elections left them (after a
 * restart, one server often leads everything: it takes every write).
 *
 * Partition k's stream and both its buckets are led by one server, the
 * k-th of the servers hosting the log (sorted by name) modulo their count:
 * a session's appends, registry and lease writes then meet one leader.
 * Each move asks the current leader to step down in favour of that server:
 * `$JS.API.STREAM.LEADER.STEPDOWN.<stream>` with
 * `{"placement":{"preferred":"<server name>"}}` (nats-server 2.11 and later,
 * `getStepDownPreferredPlacement`: the name must be one of the group's
 * peers). The server picks another peer when the preferred one is not
 * healthy, so every move is checked in stream info, and retried.
 */
import type { InspectAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';
import { groupState, listPartitions } from './partitions.js';
import type { PartitionState, RaftGroupState } from './partitions.js';

export type GroupKind = 'log' | 'sessions' | 'leases';

/** One leader tether-admin asked to move. */
export interface LeaderMove {
  readonly index: number;
  readonly group: GroupKind;
  /** The stream stepped down: the partition's log stream or its bucket's `KV_…`. */
  readonly stream: string;
  readonly from: string | null;
  readonly to: string;
  /** `moved`: `to` leads now (read back from stream info); `failed`: it does not, `detail` says why. */
  readonly outcome: 'moved' | 'failed';
  readonly detail?: string;
}

export interface RebalanceResult {
  /** False on R1 (or a server without a cluster): no group has a second server, nothing can move. */
  readonly replicated: boolean;
  /** The servers hosting the log, sorted: partition k goes to `servers[k % servers.length]`. */
  readonly servers: readonly string[];
  readonly moves: readonly LeaderMove[];
  /** Groups already led by the server they were dealt. */
  readonly inPlace: number;
  /** The partitions as they are after the moves. */
  readonly partitions: readonly PartitionState[];
}

export interface RebalanceOptions {
  /** How long one group may take to show its new leader, per attempt. Default 10000 ms. */
  readonly settleTimeoutMs?: number;
  /** Step-down requests per group before it is reported failed. Default 3. */
  readonly attempts?: number;
}

/** Groups moved at once: each is one step-down and a few stream infos. */
const MOVES_PARALLEL = 4;
const POLL_MS = 100;

interface Planned {
  readonly index: number;
  readonly group: GroupKind;
  readonly state: RaftGroupState;
  readonly to: string;
}

/** Moves every partition's leaders to the server it is dealt (see above). */
export async function rebalancePartitions(access: InspectAccess, options: RebalanceOptions = {}): Promise<RebalanceResult> {
  const before = await listPartitions(access);
  const groups = before.flatMap((p) => (['log', 'sessions', 'leases'] as const).map((group) => ({ index: p.index, group, state: p[group] as RaftGroupState })));
  const servers = [...new Set(groups.flatMap(({ state }) => hosts(state)))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  if (!groups.some(({ state }) => state.exists && state.replicas.length > 0)) return { replicated: false, servers, moves: [], inPlace: 0, partitions: before };
  const dealt = new Map<string, number>(servers.map((s) => [s, 0]));
  const plan: Planned[] = [];
  const missing: LeaderMove[] = [];
  let inPlace = 0;
  for (const { index, group, state } of groups) {
    if (!state.exists || state.replicas.length === 0) continue;
    const want = servers[index % servers.length]!;
    // Only a healthy peer can take over; the one dealt this partition when it can.
    const healthy = hosts(state).filter((name) => name === state.leader || state.replicas.some((r) => r.name === name && r.current && !r.offline));
    const to = healthy.includes(want) ? want : healthy.sort((a, b) => (dealt.get(a) ?? 0) - (dealt.get(b) ?? 0) || servers.indexOf(a) - servers.indexOf(b))[0];
    if (to === undefined) {
      missing.push({ index, group, stream: state.stream, from: state.leader, to: want, outcome: 'failed', detail: 'no healthy server holds it' });
      continue;
    }
    dealt.set(to, (dealt.get(to) ?? 0) + 1);
    if (state.leader === to) inPlace += 1;
    else plan.push({ index, group, state, to });
  }
  const moves = new Array<LeaderMove>(plan.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    for (let i = next++; i < plan.length; i = next++) moves[i] = await moveLeader(access, plan[i]!, options);
  };
  await Promise.all(Array.from({ length: Math.min(MOVES_PARALLEL, plan.length) }, worker));
  return { replicated: true, servers, moves: [...moves, ...missing], inPlace, partitions: await listPartitions(access) };
}

function hosts(state: RaftGroupState): string[] {
  return [...(state.leader === null ? [] : [state.leader]), ...state.replicas.map((r) => r.name)];
}

async function moveLeader(access: InspectAccess, planned: Planned, options: RebalanceOptions): Promise<LeaderMove> {
  const { index, group, state, to } = planned;
  const settleMs = options.settleTimeoutMs ?? 10_000;
  const attempts = options.attempts ?? 3;
  const result = (outcome: 'moved' | 'failed', detail?: string): LeaderMove => ({ index, group, stream: state.stream, from: state.leader, to, outcome, ...(detail === undefined ? {} : { detail }) });
  let leader = state.leader;
  let detail = 'not tried';
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    const answer = await stepDown(access, state.stream, to);
    if (answer === 'already') return result('moved');
    if (answer !== 'ok') detail = answer;
    // The old leader stepped down at once; wait for the group to elect.
    const deadline = Date.now() + settleMs;
    for (;;) {
      await sleep(POLL_MS);
      const now = await groupState(access.jsm, state.stream).then((s) => s.group.leader, () => null);
      if (now === to) return result('moved');
      if (answer === 'ok' && now !== null && now !== leader) {
        // The server chose another peer (the preferred one was not healthy to it): ask again.
        detail = `${now} took over instead`;
        leader = now;
        break;
      }
      if (answer !== 'ok' && now !== null) {
        leader = now;
        break;
      }
      if (Date.now() > deadline) {
        detail = `no leader change within ${settleMs} ms`;
        break;
      }
    }
  }
  return result('failed', detail);
}

/**
 * One step-down request: `ok`, `already` (the preferred server leads), or
 * why it was refused. Only the group's leader answers, so a request during
 * an election times out: that is a refusal to retry, not an error.
 */
async function stepDown(access: InspectAccess, stream: string, preferred: string): Promise<string> {
  const prefix = access.jsm.getOptions().apiPrefix ?? '$JS.API';
  let reply;
  try {
    reply = await access.nc.request(`${prefix}.STREAM.LEADER.STEPDOWN.${stream}`, JSON.stringify({ placement: { preferred } }), { timeout: access.timeoutMs });
  } catch (err) {
    const text = String(err);
    if (/timeout|no responders/i.test(text) || (err as { code?: string }).code === '503') return `no answer to the step-down request (${/timeout/i.test(text) ? 'timeout' : 'no responders'})`;
    throw new InspectError(InspectErrorCode.unavailable, `step-down of ${stream} failed: ${text}`, { cause: err });
  }
  let body: { success?: boolean; error?: { code?: number; err_code?: number; description?: string } };
  try {
    body = JSON.parse(reply.string()) as typeof body;
  } catch {
    return 'the step-down answer was not JSON';
  }
  if (body.error === undefined) return body.success === true ? 'ok' : 'the step-down answer was neither success nor error';
  const description = body.error.description ?? `error ${String(body.error.err_code ?? body.error.code)}`;
  if (/is already leader/.test(description)) return 'already';
  return `refused: ${description}`;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
