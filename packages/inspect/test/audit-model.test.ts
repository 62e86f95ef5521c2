import { describe, expect, it } from 'vitest';
import { checkChain, connections, writerSpans } from '@tether/inspect';
import type { EventMark, RawEvent } from '@tether/inspect';

const ev = (seq: number, pos: number, prev: number, kind = 'event', epoch = 'e'): RawEvent => ({ stream: 's', seq, pos, prev, kind, epoch, atMs: pos, bytes: 1, writer: undefined, endReason: undefined });

describe('checkChain', () => {
  it('passes a contiguous chain, and one whose oldest events aged out', () => {
    expect(checkChain('s', [ev(1, 10, 0), ev(2, 12, 10), ev(3, 20, 12, 'end')], 'e')).toMatchObject({ ok: true, events: 3, problems: [] });
    expect(checkChain('s', [ev(5, 30, 22), ev(6, 31, 30)], 'e').ok).toBe(true);
  });

  it('names every hole, fork, foreign epoch, event after the end and malformed header by position', () => {
    const check = checkChain('s', [
      ev(1, 10, 0),
      ev(3, 12, 10), // hole: seq 2 missing
      ev(3, 13, 12), // fork: seq 3 again
      ev(4, 14, 99), // fork: prev names another event
      ev(5, 15, 14, 'event', 'x'), // another epoch
      ev(6, 16, 15, 'end'),
      ev(7, 17, 16), // after the end
      { ...ev(8, 18, 17), seq: undefined },
    ], 'e');
    expect(check.ok).toBe(false);
    expect(check.problems.map((p) => [p.kind, p.seq, p.pos])).toEqual([
      ['hole', 3, 12],
      ['fork', 3, 13],
      ['fork', 4, 14],
      ['epoch', 5, 15],
      ['after_end', 7, 17],
      ['malformed', 0, 18],
    ]);
  });
});

describe('timeline parts', () => {
  it('marks a change of writer as a takeover and skips events without a writer', () => {
    const mark = (seq: number, writer: string | undefined): EventMark => ({ seq, pos: seq, kind: 'event', bytes: 0, atMs: 0, writer });
    expect(writerSpans([mark(1, undefined), mark(2, 'w1'), mark(3, 'w1'), mark(4, 'w2'), mark(5, 'w2')])).toEqual([
      { writer: 'w1', fromSeq: 2, toSeq: 3, takeover: false },
      { writer: 'w2', fromSeq: 4, toSeq: 5, takeover: true },
    ]);
  });

  it('joins a delivery to its end by conn', () => {
    const rows = connections([
      { v: 1, atMs: 1, instance: 'a', kind: 'resume', stream: 's', cursor: { stream: 's', seq: 2, pos: 9 }, verdict: 'resumed', status: 200, conn: 'c1' },
      { v: 1, atMs: 2, instance: 'a', kind: 'takeover', stream: 's', writer: 'w2', from: 'w1', reason: 'resumed_upstream' },
      { v: 1, atMs: 3, instance: 'a', kind: 'delivered', conn: 'c1', stream: 's', events: 4, reason: 'ended' },
    ]);
    expect(rows).toEqual([
      { atMs: 1, instance: 'a', kind: 'resume', stream: 's', cursor: { stream: 's', seq: 2, pos: 9 }, verdict: 'resumed', events: 4, status: 200, endedAtMs: 3, reason: 'ended' },
      { atMs: 2, instance: 'a', kind: 'takeover', stream: 's', cursor: undefined, verdict: undefined, events: undefined, status: undefined, reason: 'resumed_upstream', writer: 'w2', from: 'w1' },
    ]);
  });
});
