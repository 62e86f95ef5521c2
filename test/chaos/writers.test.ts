import { describe, expect, it } from 'vitest';
import { writerChecks } from './writers.js';
import type { WriterScan } from './writers.js';
import type { LogRecord } from './log-tap.js';

// The two-writer property on handmade logs: after writer B takes a stream
// over from writer A, no event of A may follow in that stream and epoch.

function rec(pos: number, seq: number, writer: string, kind = 'event', epoch = 'e1'): LogRecord {
  return { pos, seq, prev: 0, epoch, kind, digest: `d${pos}`, endReason: undefined, upstreamId: undefined, writer };
}

function scan(records: LogRecord[]): { kinds: string[]; details: string[]; stats: WriterScan } {
  const stats: WriterScan = { streams: 0, takeovers: 0, reclaims: 0, violations: 0 };
  const found = writerChecks('s1/abc', records, stats);
  return { kinds: found.map((v) => v.kind), details: found.map((v) => v.detail), stats };
}

describe('chaos checker: never two writers in one stream', () => {
  it('one writer, then a takeover by B that A respects: clean', () => {
    const r = scan([rec(1, 1, 'A', 'prime'), rec(5, 2, 'A'), rec(9, 3, 'B', 'prime'), rec(12, 4, 'B'), rec(13, 5, 'B', 'end')]);
    expect(r.kinds).toEqual([]);
    expect(r.stats).toMatchObject({ streams: 1, takeovers: 1, reclaims: 0 });
  });

  it('an event of A after B took over is a two_writers violation', () => {
    const r = scan([rec(1, 1, 'A', 'prime'), rec(5, 2, 'A'), rec(9, 3, 'B', 'prime'), rec(10, 4, 'A'), rec(12, 5, 'B')]);
    expect(r.kinds).toEqual(['two_writers']);
    expect(r.details[0]).toContain('appended event seq 4 after writer B took the stream over');
  });

  it("A's end marker after B's claim counts too; so does one after an SDK takeover's error event", () => {
    expect(scan([rec(1, 1, 'A', 'prime'), rec(3, 2, 'B'), rec(4, 3, 'A', 'end')]).kinds).toEqual(['two_writers']);
  });

  it("a deposed writer back through a claim of its own (a prime) is a re-claim, and then B is the deposed one", () => {
    const r = scan([rec(1, 1, 'A', 'prime'), rec(3, 2, 'B', 'prime'), rec(4, 3, 'B'), rec(7, 4, 'A', 'prime'), rec(8, 5, 'A'), rec(9, 6, 'B')]);
    expect(r.kinds).toEqual(['two_writers']);
    expect(r.stats).toMatchObject({ takeovers: 1, reclaims: 1 });
  });

  it('events without a writer (a session\'s first GET prime) change nothing; the scan goes by position, per epoch', () => {
    expect(scan([rec(1, 1, '', 'prime'), rec(4, 3, 'B'), rec(2, 2, 'A')]).kinds).toEqual([]);
    // Another epoch is another stream as far as writers go.
    expect(scan([rec(1, 1, 'A'), rec(2, 2, 'B'), rec(3, 1, 'A', 'prime', 'e2'), rec(4, 2, 'A', 'event', 'e2')]).kinds).toEqual([]);
  });
});
