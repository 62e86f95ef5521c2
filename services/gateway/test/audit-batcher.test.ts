import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import type { RecordAuditRequest } from '@tether/cursor-proto';
import { AuditBatcher } from '../src/log/audit-batcher.js';

const event = (i: number): RecordAuditRequest => ({ sessionId: `s${i}`, atMs: i, instance: 'gw', kind: 'post' }) as RecordAuditRequest;

describe('AuditBatcher', () => {
  it('sends what gathered within delayMs as one batch, in order', async () => {
    const batches: number[][] = [];
    const b = new AuditBatcher(async (events) => void batches.push(events.map((e) => e.atMs)), { delayMs: 20 });
    for (let i = 0; i < 5; i += 1) b.add(event(i));
    expect(batches).toEqual([]);
    await new Promise((r) => setTimeout(r, 60));
    expect(batches).toEqual([[0, 1, 2, 3, 4]]);
  });

  it('sends at once at maxEvents, and flush() sends the rest and waits for every batch in flight', async () => {
    const batches: number[][] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    const b = new AuditBatcher(async (events) => {
      await gate;
      batches.push(events.map((e) => e.atMs));
    }, { maxEvents: 3, delayMs: 10_000 });
    for (let i = 0; i < 7; i += 1) b.add(event(i));
    let flushed = false;
    const flushing = b.flush().then(() => (flushed = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(flushed).toBe(false);
    release();
    await flushing;
    expect(batches).toEqual([[0, 1, 2], [3, 4, 5], [6]]);
    await b.flush();
    expect(batches).toHaveLength(3);
  });

  it('logs refused events as counts by code, at most one line per logEveryMs, and what is left on flush()', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'warn' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    // The service's answer: every event whose atMs is odd refused, as not the caller's.
    const b = new AuditBatcher(async (events) => ({ refused: events.filter((e) => e.atMs % 2 === 1).map(() => ({ code: 'session_not_found' })) }), { maxEvents: 2, delayMs: 10_000, logger, logEveryMs: 200 });
    const counts = (): unknown[] => lines.map((l) => [l['msg'], l['refused'], l['byCode']]);
    for (let i = 0; i < 2; i += 1) b.add(event(i));
    await new Promise((r) => setTimeout(r, 20));
    expect(counts()).toEqual([['audit events refused by the session-log service', 1, { session_not_found: 1 }]]);
    // Within the next 200 ms: counted, not yet logged; then one line for both batches.
    for (let i = 2; i < 6; i += 1) b.add(event(i));
    await new Promise((r) => setTimeout(r, 20));
    expect(lines).toHaveLength(1);
    await expect.poll(() => counts(), { timeout: 2_000 }).toEqual([counts()[0], ['audit events refused by the session-log service', 2, { session_not_found: 2 }]]);
    // Within 200 ms of that line again: flush() logs what is counted at once.
    b.add(event(6));
    b.add(event(7));
    await b.flush();
    expect(counts()).toHaveLength(3);
    expect(counts()[2]).toEqual(['audit events refused by the session-log service', 1, { session_not_found: 1 }]);
    // Never an event or a session id in a line.
    expect(JSON.stringify(lines)).not.toMatch(/"s\d/);
  });
});
