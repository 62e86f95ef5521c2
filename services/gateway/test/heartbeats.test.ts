import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { LogEvent } from '@tether/session-log';
import { deliver } from '../src/streams/deliver.js';
import { HEARTBEAT, Heartbeats } from '../src/streams/heartbeats.js';

/** Enough of a `ServerResponse` for the ticker and for `deliver()`: it records what is written. */
class FakeResponse extends EventEmitter {
  readonly written: string[] = [];
  writableEnded = false;
  destroyed = false;
  writableNeedDrain = false;
  headersSent = false;
  writeHead(): this {
    this.headersSent = true;
    return this;
  }
  flushHeaders(): void {}
  write(chunk: string): boolean {
    if (this.writableEnded) throw new Error('write after end');
    this.written.push(chunk);
    return true;
  }
  end(): this {
    this.writableEnded = true;
    this.emit('close');
    return this;
  }
  heartbeats(): number {
    return this.written.filter((c) => c === HEARTBEAT).length;
  }
}

/** A log iterator that yields nothing until `signal` aborts: an idle stream. */
async function* idleUntil(signal: AbortSignal): AsyncGenerator<LogEvent> {
  if (signal.aborted) return;
  await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Heartbeats', () => {
  it('writes `: keepalive` to a stream idle for heartbeatMs, and not before', () => {
    const hb = new Heartbeats();
    const res = new FakeResponse();
    hb.add(res, 1_000);
    vi.advanceTimersByTime(999);
    expect(res.heartbeats()).toBe(0);
    vi.advanceTimersByTime(501);
    expect(res.written).toEqual([': keepalive\n\n']);
    // The heartbeat itself counts as a write: the next one is a full interval later.
    vi.advanceTimersByTime(1_000);
    expect(res.heartbeats()).toBe(2);
  });

  it('skips streams that wrote recently, ended, were destroyed, or wait for a drain', () => {
    const hb = new Heartbeats();
    const busy = new FakeResponse();
    const ended = new FakeResponse();
    const destroyed = new FakeResponse();
    const backedUp = new FakeResponse();
    const busyHandle = hb.add(busy, 1_000);
    for (const r of [ended, destroyed, backedUp]) hb.add(r, 1_000);
    ended.writableEnded = true;
    destroyed.destroyed = true;
    backedUp.writableNeedDrain = true;
    for (let t = 0; t < 5_000; t += 400) {
      busyHandle.touch();
      vi.advanceTimersByTime(400);
    }
    expect([busy, ended, destroyed, backedUp].map((r) => r.heartbeats())).toEqual([0, 0, 0, 0]);
  });

  it('runs one timer for any number of streams, from the first registration to the last removal', () => {
    const hb = new Heartbeats();
    expect(vi.getTimerCount()).toBe(0);
    const handles = Array.from({ length: 500 }, () => hb.add(new FakeResponse(), 15_000));
    expect(vi.getTimerCount()).toBe(1);
    expect(hb).toMatchObject({ size: 500, running: true });
    for (const h of handles.slice(1)) h.remove();
    expect(vi.getTimerCount()).toBe(1);
    handles[0]?.remove();
    handles[0]?.remove(); // idempotent
    expect(vi.getTimerCount()).toBe(0);
    expect(hb).toMatchObject({ size: 0, running: false });
  });

  it('ticks often enough for the shortest interval registered', () => {
    const hb = new Heartbeats();
    const slow = new FakeResponse();
    const fast = new FakeResponse();
    hb.add(slow, 10_000);
    hb.add(fast, 200);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(300);
    expect(fast.heartbeats()).toBe(1);
    expect(slow.heartbeats()).toBe(0);
  });

  it('keeps beating for the others when one socket throws', () => {
    const hb = new Heartbeats();
    const broken = new FakeResponse();
    broken.write = () => {
      throw new Error('EPIPE');
    };
    const fine = new FakeResponse();
    hb.add(broken, 100);
    hb.add(fine, 100);
    vi.advanceTimersByTime(150);
    expect(fine.heartbeats()).toBe(1);
  });
});

describe('deliver() and the ticker', () => {
  it('idle deliveries share the instance ticker: one timer for all, none once they ended, nothing written after the end', async () => {
    const hb = new Heartbeats();
    const streams = Array.from({ length: 50 }, () => ({ res: new FakeResponse(), abort: new AbortController() }));
    const done = streams.map(({ res, abort }) =>
      deliver(res as unknown as ServerResponse, idleUntil(abort.signal), { headers: {}, priming: false, retryMs: 1_000, heartbeatMs: 1_000, heartbeats: hb, signal: abort.signal }),
    );
    await vi.advanceTimersByTimeAsync(0);
    // A timer per delivered stream would make this 50.
    expect(vi.getTimerCount()).toBe(1);
    expect(hb.size).toBe(50);
    await vi.advanceTimersByTimeAsync(2_600);
    for (const { res } of streams) expect(res.heartbeats()).toBeGreaterThanOrEqual(2);
    for (const { abort } of streams) abort.abort('client_gone');
    const results = await Promise.all(done);
    expect(results.every((r) => r.end === 'aborted')).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(hb.running).toBe(false);
    for (const { res } of streams) res.end();
    const before = streams.map(({ res }) => res.written.length);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(streams.map(({ res }) => res.written.length)).toEqual(before);
  });

  it('a delivery that writes events gets no heartbeat while it is busy', async () => {
    const hb = new Heartbeats();
    const res = new FakeResponse();
    const abort = new AbortController();
    async function* ticking(): AsyncGenerator<LogEvent> {
      for (let seq = 1; seq <= 10; seq++) {
        await new Promise((resolve) => setTimeout(resolve, 400));
        yield { id: `abcdefgh23-0-${seq}-${seq}`, kind: 'event', payload: new TextEncoder().encode('{}') } as LogEvent;
      }
    }
    const done = deliver(res as unknown as ServerResponse, ticking(), { headers: {}, priming: false, retryMs: 1_000, heartbeatMs: 1_000, heartbeats: hb, signal: abort.signal });
    await vi.advanceTimersByTimeAsync(4_100);
    await done;
    expect(res.written.filter((c) => c.startsWith('id: '))).toHaveLength(10);
    expect(res.heartbeats()).toBe(0);
    expect(hb.size).toBe(0);
  });

  it('opens a served resume with the acknowledgment frame, and a fresh stream with its priming event', async () => {
    const hb = new Heartbeats();
    const cursor = 'abcdefgh23-qrstuvwx-5-77';
    const resumed = new FakeResponse();
    const fresh = new FakeResponse();
    const abort = new AbortController();
    const common = { headers: {}, priming: true, retryMs: 1_000, heartbeatMs: 1_000, heartbeats: hb, signal: abort.signal };
    const a = deliver(resumed as unknown as ServerResponse, idleUntil(abort.signal), { ...common, resumeAck: { cursor, stream: 'qrstuvwx', nextSeq: 6 } });
    const b = deliver(fresh as unknown as ServerResponse, idleUntil(abort.signal), { ...common, primeId: 'abcdefgh23-0-1-1' });
    await vi.advanceTimersByTimeAsync(0);
    abort.abort('client_gone');
    await Promise.all([a, b]);
    expect(resumed.written[0]).toBe(`id: ${cursor}\nevent: resume\nretry: 1000\ndata: {"verdict":"resumed","stream":"qrstuvwx","next_seq":6}\n\n`);
    expect(fresh.written[0]).toBe('id: abcdefgh23-0-1-1\nretry: 1000\ndata:\n\n');
  });
});
