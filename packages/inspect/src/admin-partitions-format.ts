import { table } from './admin-format.js';
import type { PartitionState, RaftGroupState } from './partitions.js';
import type { RebalanceResult } from './rebalance.js';

/** Text views of `tether-admin partitions`: names of streams, buckets and servers, counts and sizes. */

export function formatPartitions(partitions: readonly PartitionState[]): string {
  return table([
    ['PARTITION', 'STREAM', 'MESSAGES', 'BYTES', 'LEADER', 'REPLICAS', 'SESSIONS LEADER', 'LEASES LEADER'],
    ...partitions.map((p) => [
      String(p.index),
      p.log.stream,
      p.log.exists ? String(p.log.messages) : '-',
      p.log.exists ? size(p.log.bytes) : '-',
      leaderOf(p.log),
      p.log.exists ? replicasOf(p.log) : '-',
      leaderOf(p.sessions),
      leaderOf(p.leases),
    ]),
  ]);
}

export function formatRebalance(result: RebalanceResult): string {
  if (!result.replicated) {
    return 'the log is not replicated (R1): each partition\'s stream and buckets live on one server, so there is no leader to move\n';
  }
  const lines = [`servers hosting the log: ${result.servers.join(', ')} (partition k is led by server k mod ${result.servers.length})`];
  for (const m of result.moves) {
    const what = m.group === 'log' ? `stream ${m.stream}` : `bucket ${m.stream.replace(/^KV_/, '')}`;
    lines.push(`partition ${m.index}  ${what}  ${m.from ?? '(none)'} -> ${m.to}  ${m.outcome === 'moved' ? 'moved' : `FAILED: ${m.detail ?? 'unknown'}`}`);
  }
  const moved = result.moves.filter((m) => m.outcome === 'moved').length;
  const failed = result.moves.length - moved;
  lines.push(`moved ${moved} leader(s)${failed === 0 ? '' : `, ${failed} failed`}; ${result.inPlace} already in place`);
  return `${lines.join('\n')}\n`;
}

/** The leader's name; `(none)` during an election, `(missing)` when the stream or bucket does not exist. */
function leaderOf(group: RaftGroupState): string {
  if (!group.exists) return '(missing)';
  return group.leader ?? '(none)';
}

/** Followers by name, marked when they are not caught up (`*behind`) or gone (`*offline`); `-` on R1. */
function replicasOf(group: RaftGroupState): string {
  if (group.replicas.length === 0) return '-';
  return group.replicas.map((r) => `${r.name}${r.offline ? '*offline' : r.current ? '' : '*behind'}`).join(',');
}

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
