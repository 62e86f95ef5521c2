import { describe, expect, it } from 'vitest';
import type { StreamReport } from './checker.js';
import type { LogRecord } from './log-tap.js';
import { compareWindow, missingFromCopy, powerLossReport, unheldGone } from './power-loss.js';
import type { Held, PowerLossAccount } from './power-loss.js';
import type { Exchange } from './record.js';
import { meaningOf } from './util.js';

// Power-loss accounting on handmade windows: what the tap held as
// acknowledged against what the log holds after every node restarted.

const EPOCH = 'abcdefghij';
function rec(pos: number, seq: number, digest: string, kind = 'event'): LogRecord {
  return { pos, seq, prev: 0, epoch: EPOCH, kind, digest, endReason: undefined, upstreamId: undefined, writer: 'w' };
}
/** An event id as clients get them (streams `aaaaaaaa`, `bbbbbbbb`, …). */
const id = (stream: string, seq: number, pos: number): string => `${EPOCH}-${stream.repeat(8)}-${seq}-${pos}`;
const held = (key: string | undefined, r: LogRecord): Held => ({ key, record: r });

describe('power loss: compareWindow', () => {
  it('same stream, seq and bytes at a position survived; another message there, or none, is lost', () => {
    const before = new Map<number, Held>([
      [10, held('s/a', rec(10, 1, 'x'))],
      [11, held('s/a', rec(11, 2, 'y'))],
      [12, held('s/b', rec(12, 1, 'z'))],
      [13, held(undefined, rec(13, 0, 'audit'))],
      [14, held('s/a', rec(14, 3, 'w'))],
    ]);
    const after = new Map<number, Held | null>([
      [10, held('s/a', rec(10, 1, 'x'))],
      [11, held('s/a', rec(11, 2, 'y2'))],
      [12, null],
      [13, null],
    ]);
    const r = compareWindow(before, after);
    expect(r.survived).toBe(1);
    expect(r.lost.map((l) => [l.record.pos, l.how])).toEqual([
      [11, 'overwritten'],
      [12, 'absent'],
    ]);
    // Position 14 was never compared; an audit message (no stream) is not a log event.
    expect(r.unchecked).toBe(1);
  });

  it('every event read that the copy lacks joins it, also one held only as the leader\'s copy', () => {
    const after = new Map<number, Held | null>([
      [10, held('s/a', rec(10, 1, 'x'))],
      [11, held('s/a', rec(11, 2, 'y2'))],
      [12, null],
      [13, held(undefined, rec(13, 0, 'audit'))],
      // Held before the loss only as the leader's republished copy, found again the same: not in the copy.
      [15, held('s/b', rec(15, 2, 'v'))],
    ]);
    const copy = new Set(['s/a@10']);
    const missing = missingFromCopy(after, (key, pos) => copy.has(`${key}@${pos}`));
    expect(missing.map((m) => [m.key, m.record.pos, m.record.digest])).toEqual([
      ['s/a', 11, 'y2'],
      ['s/b', 15, 'v'],
    ]);
  });
});

describe('power loss: how each lost event ended', () => {
  const exchange = (client: string, ids: Array<[string, string]>): Exchange =>
    ({ n: 1, client, clientKind: 'raw', method: 'GET', events: ids.map(([id, digest]) => ({ id, hasData: true, digest, meaning: meaningOf('') })) }) as unknown as Exchange;
  const stream = (key: string, client: string, cls: StreamReport['cls'], reason?: string): StreamReport => ({ key, client, clientKind: 'raw', path: '/mcp', cls, reason, delivered: 1, exchanges: 1 });

  it('explicit, silent, not delivered, and purged with a closed session', () => {
    const account: PowerLossAccount = {
      partition: 0,
      mark: { at: 0, lastPos: 20, fromPos: 10 },
      acked: 5,
      survived: 1,
      lost: [
        { key: 's1/a', record: rec(11, 2, 'y'), how: 'overwritten' },
        { key: 's1/b', record: rec(12, 1, 'z'), how: 'overwritten' },
        { key: 's1/c', record: rec(13, 1, 'q'), how: 'absent' },
        { key: 's2/a', record: rec(14, 1, 'p'), how: 'absent' },
        // Overwritten: lost, whatever became of its session.
        { key: 's2/b', record: rec(15, 2, 'r'), how: 'overwritten' },
        // Absent, but its session was closed only after the re-check looked: the loss took it.
        { key: 's3/a', record: rec(16, 1, 't'), how: 'absent' },
      ],
      unchecked: 0,
      lastPosAfterRestart: 10,
      checkedAt: 5_000,
      absentAt: new Map(),
    };
    const exchanges = [
      exchange('raw1', [[id('a', 2, 11), 'y']]),
      // Got the event now at position 12, not the lost one: not a client of the lost event.
      exchange('raw2', [[id('b', 1, 12), 'other']]),
      exchange('raw3', [[id('c', 1, 13), 'q']]),
    ];
    const streams = [stream('s1/a', 'raw1', 'explicit', 'refused 404 diverged'), stream('s1/b', 'raw2', 'complete'), stream('s1/c', 'raw3', 'violation', 'gap')];
    const closedAt = new Map([
      ['s2', 4_000],
      ['s3', 6_000],
    ]);
    const r = powerLossReport([account], exchanges, streams, closedAt);
    expect(r).toMatchObject({ losses: 1, acked: 5, survived: 1, lost: 5, purged: 1, shorterLogs: 1, silent: 1 });
    expect(r.lostByEnd).toEqual({ 'explicit refused 404 diverged': 1, 'not delivered to any client': 3, 'violation gap': 1 });
    // Without a re-check time nothing absent can be told from a purge: all of it counts as lost.
    expect(powerLossReport([{ ...account, checkedAt: undefined }], exchanges, streams, closedAt)).toMatchObject({ lost: 6, purged: 0 });
    // A partitioned log: one account per partition, one power loss (one mark time).
    expect(powerLossReport([account, { ...account, partition: 1, acked: 0, survived: 0, lost: [] }], exchanges, streams, closedAt)).toMatchObject({ losses: 1, acked: 5 });
    // A position read empty before its session's close was taken by the loss, whenever the re-check ended.
    expect(powerLossReport([{ ...account, absentAt: new Map([[14, 3_000]]) }], exchanges, streams, closedAt)).toMatchObject({ lost: 6, purged: 0 });
  });

  it('events only clients held, at positions a re-read found empty: purged by an earlier close, else lost', () => {
    const account: PowerLossAccount = {
      partition: 1,
      mark: { at: 0, lastPos: 30, fromPos: 20 },
      acked: 1,
      survived: 1,
      lost: [],
      unchecked: 0,
      lastPosAfterRestart: 30,
      checkedAt: 9_000,
      absentAt: new Map([
        [21, 5_000],
        [22, 5_000],
        [23, 5_000],
      ]),
    };
    const exchanges = [
      { ...exchange('raw1', [[id('a', 4, 21), 'd4'], [id('a', 5, 22), 'd5']]), sessionId: 's1' },
      { ...exchange('raw2', [[id('b', 7, 23), 'd7']]), sessionId: 's2' },
      // The tap holds position 25: not judged here.
      { ...exchange('raw3', [[id('c', 1, 25), 'x']]), sessionId: 's3' },
    ] as Exchange[];
    const unheld = unheldGone([account], exchanges, () => 1, (partition, pos) => partition === 1 && pos === 25);
    expect(unheld.map((u) => [u.key, u.record.pos, u.record.seq, u.record.digest, u.readAt])).toEqual([
      ['s1/aaaaaaaa', 21, 4, 'd4', 5_000],
      ['s1/aaaaaaaa', 22, 5, 'd5', 5_000],
      ['s2/bbbbbbbb', 23, 7, 'd7', 5_000],
    ]);
    // Another partition's account names other positions.
    expect(unheldGone([account], exchanges, () => 0, () => false)).toEqual([]);
    // s1 closed before the read (purged), s2 after it (lost).
    const streams = [stream('s1/aaaaaaaa', 'raw1', 'complete'), stream('s2/bbbbbbbb', 'raw2', 'explicit', 'refused 404 ahead')];
    const r = powerLossReport([account], exchanges, streams, new Map([['s1', 4_000], ['s2', 6_000]]), unheld);
    expect(r).toMatchObject({ lost: 1, purged: 2, silent: 0 });
    expect(r.lostByEnd).toEqual({ 'explicit refused 404 ahead': 1 });
    expect(r.examples[0]).toContain('never seen by the tap');
  });
});
