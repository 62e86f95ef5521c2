/**
 * Where each partition of the log lives (`tether-admin partitions`): its
 * stream's size, and the Raft leader and replicas of its stream and its two
 * buckets (registry and leases), from JetStream stream info. Read-only.
 */
import type { ClusterInfo, JetStreamManager } from '@nats-io/jetstream';
import { JsErrCode, jsErrorCode } from '@tether/session-log';
import type { InspectAccess } from './access.js';
import { InspectError, InspectErrorCode } from './errors.js';
import { eachPartition } from './read.js';

/** A follower of a Raft group, as its leader reports it. */
export interface ReplicaState {
  readonly name: string;
  /** Caught up with the leader. */
  readonly current: boolean;
  readonly offline: boolean;
}

/** One Raft group of a partition: its stream, or a bucket's (`KV_<bucket>`). */
export interface RaftGroupState {
  /** The JetStream stream: `TETHER_LOG-3`, `KV_tether_sessions-3`. */
  readonly stream: string;
  /** False when the stream does not exist (nothing else is then known). */
  readonly exists: boolean;
  /** The server leading it; null while it has none (an election), or when it does not exist. */
  readonly leader: string | null;
  /** The other servers holding it; none on R1. */
  readonly replicas: readonly ReplicaState[];
}

export interface PartitionState {
  readonly index: number;
  /** The partition's log stream, with its size. */
  readonly log: RaftGroupState & { readonly messages: number; readonly bytes: number };
  /** Its registry bucket (`tether_sessions[-<index>]`). */
  readonly sessions: RaftGroupState & { readonly bucket: string };
  /** Its lease bucket (`tether_leases[-<index>]`). */
  readonly leases: RaftGroupState & { readonly bucket: string };
}

/** Every partition of the log, by index. `unavailable` when JetStream does not answer. */
export async function listPartitions(access: InspectAccess): Promise<PartitionState[]> {
  return eachPartition(access, async (p) => {
    const [log, sessions, leases] = await Promise.all([groupState(access.jsm, p.streamName), groupState(access.jsm, bucketStream(p.sessionsBucket)), groupState(access.jsm, bucketStream(p.leasesBucket))]);
    return {
      index: p.index,
      log: { ...log.group, messages: log.messages, bytes: log.bytes },
      sessions: { ...sessions.group, bucket: p.sessionsBucket },
      leases: { ...leases.group, bucket: p.leasesBucket },
    };
  });
}

/** The stream behind a KV bucket. */
export function bucketStream(bucket: string): string {
  return `KV_${bucket}`;
}

/** A stream's Raft group now, with its size. */
export async function groupState(jsm: JetStreamManager, stream: string): Promise<{ group: RaftGroupState; messages: number; bytes: number }> {
  let info;
  try {
    info = await jsm.streams.info(stream);
  } catch (err) {
    if (jsErrorCode(err) === JsErrCode.streamNotFound || /stream not found/i.test(String(err))) return { group: { stream, exists: false, leader: null, replicas: [] }, messages: 0, bytes: 0 };
    throw new InspectError(InspectErrorCode.unavailable, `cannot read stream ${stream}: ${String(err)}`, { cause: err });
  }
  return { group: { stream, exists: true, ...raftOf(info.cluster) }, messages: info.state.messages, bytes: info.state.bytes };
}

function raftOf(cluster: ClusterInfo | undefined): { leader: string | null; replicas: ReplicaState[] } {
  const leader = cluster?.leader === undefined || cluster.leader === '' ? null : cluster.leader;
  return { leader, replicas: (cluster?.replicas ?? []).map((r) => ({ name: r.name, current: r.current === true, offline: r.offline === true })) };
}
