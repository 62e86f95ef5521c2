import { describe, expect, it } from 'vitest';
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
});
