/**
 * The two-writer property of the chaos checker (part of `checker.ts`): the
 * log itself must never record two writers of one stream.
 */
import type { Violation } from './checker.js';
import type { LogRecord } from './log-tap.js';

/** What the two-writer scan saw: streams scanned, writer changes, and re-claims by a writer that had lost the stream. */
export interface WriterScan {
  streams: number;
  takeovers: number;
  reclaims: number;
  violations: number;
}

/**
 * Never two writers in one stream (design.md, "Why two writers are never
 * both recorded"): walking a stream in log order (per epoch), each change of
 * `Tether-Writer` is a takeover, and the writer it deposed must append
 * nothing after it. A deposed writer may come back only through a claim of
 * its own, which is a `prime` (the gateway claims with an id-only prime; an
 * SDK server's takeover ends the stream, so nothing may follow it). Events
 * without a writer (a session's first GET prime) change nothing. Each
 * offending event is a silent `two_writers` violation. Exported for its test.
 */
export function writerChecks(key: string, records: readonly LogRecord[], scan: WriterScan = { streams: 0, takeovers: 0, reclaims: 0, violations: 0 }): Violation[] {
  const [session = '', stream = ''] = key.split('/');
  const out: Violation[] = [];
  scan.streams += 1;
  const byEpoch = new Map<string, { current: string | undefined; deposed: Set<string> }>();
  for (const r of [...records].sort((a, b) => a.pos - b.pos)) {
    const writer = r.writer ?? '';
    if (writer === '') continue;
    let state = byEpoch.get(r.epoch);
    if (state === undefined) {
      state = { current: undefined, deposed: new Set() };
      byEpoch.set(r.epoch, state);
    }
    if (state.current === undefined) {
      state.current = writer;
      continue;
    }
    if (writer === state.current) continue;
    if (state.deposed.has(writer) && r.kind !== 'prime') {
      out.push({
        kind: 'two_writers',
        client: '-',
        session,
        stream,
        exchange: undefined,
        cursor: undefined,
        eventId: `${r.epoch}-${stream}-${r.seq}-${r.pos}`,
        expected: undefined,
        detail: `writer ${writer.slice(0, 12)} appended ${r.kind} seq ${r.seq} after writer ${state.current.slice(0, 12)} took the stream over from it`,
      });
      continue;
    }
    if (state.deposed.has(writer)) scan.reclaims += 1;
    else scan.takeovers += 1;
    state.deposed.add(state.current);
    state.deposed.delete(writer);
    state.current = writer;
  }
  return out;
}

