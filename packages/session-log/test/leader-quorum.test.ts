import { describe, expect, it } from 'vitest';
import type { ClusterInfo, PeerInfo, StreamInfo } from '@nats-io/jetstream';
import { absenceDoubt, leadersDoubt, quorumDoubt } from '@tether/session-log';

const ms = 1_000_000;
const peer = (name: string, activeMs: number): PeerInfo => ({ name, current: true, offline: false, active: activeMs * ms, lag: 0 }) as PeerInfo;
const led = (leader: string, replicas: PeerInfo[]): ClusterInfo => ({ name: 'c', leader, replicas }) as ClusterInfo;

describe('quorumDoubt', () => {
  it('believes a single server, and a leader that heard a majority within 3 s', () => {
    expect(quorumDoubt(undefined)).toBeUndefined();
    expect(quorumDoubt(led('a', []))).toBeUndefined();
    expect(quorumDoubt(led('a', [peer('b', 900), peer('c', 8_000)]))).toBeUndefined();
    expect(quorumDoubt(led('a', [peer('b', 2_999), peer('c', 2_999)]))).toBeUndefined();
    expect(quorumDoubt(led('a', [peer('b', 100), peer('c', 200), peer('d', 9_000), peer('e', 9_000)]))).toBeUndefined();
  });

  it('doubts a leader that heard no majority lately, never heard a peer, or no leader at all', () => {
    expect(quorumDoubt(led('a', [peer('b', 3_001), peer('c', 7_939)]))).toMatch(/stream leader a heard from 0 of 2 peers in the last 3000 ms \(b 3001 ms ago, c 7939 ms ago\)/);
    // `active` 0: never heard since the leader started.
    expect(quorumDoubt(led('a', [peer('b', 0), peer('c', 0)]))).toMatch(/b never, c never/);
    expect(quorumDoubt(led('a', [peer('b', 100), peer('c', 9_000), peer('d', 9_000), peer('e', 9_000)]))).toMatch(/heard from 1 of 4/);
    expect(quorumDoubt({ name: 'c', leader: '', replicas: [] } as unknown as ClusterInfo)).toBe('the stream has no leader');
  });
});

describe('leadersDoubt', () => {
  const answer = (cluster: ClusterInfo): StreamInfo => ({ cluster }) as StreamInfo;
  it('believes one leader with a quorum, and one answer per leader', () => {
    expect(leadersDoubt([answer(led('a', [peer('b', 100), peer('c', 100)]))])).toBeUndefined();
  });

  it('doubts two servers answering as leader (a deposed one not yet told), no answer, or a leader without a quorum', () => {
    // Right after a heal: the old leader hears its peers again (fresh `active`) an instant before it learns of the new term.
    const old = answer(led('a', [peer('b', 50), peer('c', 50)]));
    const elected = answer(led('b', [peer('a', 50), peer('c', 50)]));
    expect(leadersDoubt([old, elected])).toMatch(/2 servers answered as the stream leader \(a, b\)/);
    expect(leadersDoubt([])).toBe('no server answered as the stream leader');
    expect(leadersDoubt([answer(led('a', [peer('b', 9_000), peer('c', 9_000)]))])).toMatch(/heard from 0 of 2/);
  });
});

describe('absenceDoubt (finding 18)', () => {
  it('believes "no message" only when it is the one leader\'s one answer', () => {
    expect(absenceDoubt([{ t: 'absent' }])).toBeUndefined();
  });

  it('doubts it when another leader holds the message, when two answered, when none did, or on an error', () => {
    // The old leader of a healed cut answers first from its stale store; the new one holds the task.
    expect(absenceDoubt([{ t: 'absent' }, { t: 'found' }])).toMatch(/a leader holds the message another answered absent/);
    expect(absenceDoubt([{ t: 'found' }])).toMatch(/holds the message/);
    expect(absenceDoubt([{ t: 'absent' }, { t: 'absent' }])).toMatch(/got 2 answers \(absent, absent\)/);
    expect(absenceDoubt([])).toBe('no server answered the read as the stream leader');
    expect(absenceDoubt([{ t: 'error', why: 'JetStream system temporarily unavailable' }])).toMatch(/temporarily unavailable/);
  });
});
