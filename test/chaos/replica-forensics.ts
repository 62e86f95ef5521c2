/**
 * What each replica holds where a client held an event the log does not
 * (`not_in_log`), read before the cluster is torn down: every node's own
 * stream state (its monitor port) and its own copy of each position.
 *
 * A direct get sent on a connection to one node is answered by that node's
 * replica: the server prefers a local queue subscriber over a routed one,
 * and every node of the 3-node cluster holds every R3 stream. So the reads
 * tell a position every replica lost (an acknowledged write gone) from one
 * that only some replicas lack (replicas that diverged), and `lost` in a
 * replica's state says its store found damaged blocks when it restarted.
 */
import { connect } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { NatsServer } from '@tether/testing';
import { monitorBase } from './faults.js';

export interface ReplicaState {
  readonly node: string;
  /** The node's view of the stream: undefined when its monitor port did not answer. */
  readonly messages?: number | undefined;
  readonly firstSeq?: number | undefined;
  readonly lastSeq?: number | undefined;
  readonly numDeleted?: number | undefined;
  /** What the store lost on a restart (filestore recovery), as the node reports it. */
  readonly lost?: { readonly msgs?: number[]; readonly bytes?: number };
  readonly leader?: string;
  readonly error?: string;
}

export interface PositionView {
  readonly pos: number;
  /** Per node: `<subject> seq <Tether-Seq>`, `absent`, or the error. */
  readonly byNode: Readonly<Record<string, string>>;
}

export interface StreamForensics {
  readonly stream: string;
  readonly replicas: readonly ReplicaState[];
  readonly positions: readonly PositionView[];
}

/** At most this many positions per stream are read (each on every node). */
const MAX_POSITIONS = 60;

/**
 * Reads `positions` of each stream on every node. `positions` maps a stream
 * name to the positions of interest in it.
 */
export async function replicaForensics(servers: readonly NatsServer[], positions: ReadonlyMap<string, readonly number[]>): Promise<StreamForensics[]> {
  const out: StreamForensics[] = [];
  const names = servers.map((_, i) => `nats${i + 1}`);
  const states = await Promise.all(servers.map((s, i) => readStates(s, names[i]!)));
  const conns = await Promise.all(
    servers.map(async (s) => {
      try {
        const nc = await connect({ servers: [s.url], reconnect: false, timeout: 3_000 });
        return { nc, jsm: await jetstreamManager(nc, { timeout: 3_000 }) };
      } catch (err) {
        return { error: (err as Error).message };
      }
    }),
  );
  try {
    for (const [stream, list] of positions) {
      const views: PositionView[] = [];
      for (const pos of [...new Set(list)].sort((a, b) => a - b).slice(0, MAX_POSITIONS)) {
        const byNode: Record<string, string> = {};
        for (const [i, c] of conns.entries()) {
          if ('error' in c) {
            byNode[names[i]!] = `no connection: ${c.error}`;
            continue;
          }
          try {
            const msg = await c.jsm.direct.getMessage(stream, { seq: pos });
            byNode[names[i]!] = msg === null ? 'absent' : `${msg.subject} seq ${msg.header?.get('Tether-Seq') ?? '?'}`;
          } catch (err) {
            byNode[names[i]!] = /no message found|not found/i.test((err as Error).message) ? 'absent' : `error: ${(err as Error).message}`;
          }
        }
        views.push({ pos, byNode });
      }
      out.push({ stream, replicas: states.map((s, i) => s.get(stream) ?? { node: names[i]!, error: 'no state for this stream' }), positions: views });
    }
  } finally {
    for (const c of conns) if ('nc' in c) await c.nc.close().catch(() => undefined);
  }
  return out;
}

/** One node's state of every stream it holds, from `/jsz`. */
async function readStates(server: NatsServer, node: string): Promise<Map<string, ReplicaState>> {
  const states = new Map<string, ReplicaState>();
  try {
    const res = await fetch(`${monitorBase(server)}/jsz?streams=true`, { signal: AbortSignal.timeout(3_000) });
    const jsz = (await res.json()) as {
      account_details?: Array<{
        stream_detail?: Array<{
          name?: string;
          cluster?: { leader?: string };
          state?: { messages?: number; first_seq?: number; last_seq?: number; num_deleted?: number; lost?: { msgs?: number[]; bytes?: number } };
        }>;
      }>;
    };
    for (const account of jsz.account_details ?? []) {
      for (const d of account.stream_detail ?? []) {
        if (d.name === undefined) continue;
        const st = d.state ?? {};
        states.set(d.name, {
          node,
          messages: st.messages,
          firstSeq: st.first_seq,
          lastSeq: st.last_seq,
          numDeleted: st.num_deleted,
          ...(st.lost === undefined ? {} : { lost: st.lost }),
          ...(d.cluster?.leader === undefined ? {} : { leader: d.cluster.leader }),
        });
      }
    }
  } catch (err) {
    states.set('*', { node, error: (err as Error).message });
  }
  return states;
}

/** Lines for the run's output. */
export function describeForensics(all: readonly StreamForensics[]): string[] {
  const lines: string[] = [];
  for (const f of all) {
    lines.push(`replicas of ${f.stream}:`);
    for (const r of f.replicas) {
      lines.push(
        r.error !== undefined
          ? `  ${r.node}: ${r.error}`
          : `  ${r.node}: ${r.messages} messages, seq ${r.firstSeq}-${r.lastSeq}, ${r.numDeleted} deleted${r.lost === undefined ? '' : `, LOST ${r.lost.msgs?.length ?? 0} msgs (${r.lost.bytes ?? 0} B) on recovery`}, leader ${r.leader ?? '?'}`,
      );
    }
    for (const p of f.positions) lines.push(`  pos ${p.pos}: ${Object.entries(p.byNode).map(([n, v]) => `${n} ${v}`).join(' | ')}`);
  }
  return lines;
}
