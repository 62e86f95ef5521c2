import { describe, expect, it } from 'vitest';
import { partitionOf } from '@tether/session-log';
import { check, payloadChecks } from './checker.js';
import type { StreamGroup } from './checker.js';
import type { LogRecord } from './log-tap.js';
import type { DeliveredEvent, Exchange } from './record.js';
import { digest, meaningOf } from './util.js';

// The payload rules of the chaos checker, on their own: what counts as a
// silent repeat of a logging message on the GET stream.

const exchange = { n: 1 } as Exchange;
const group: StreamGroup = { key: 's/0', session: 's', stream: '0', exchanges: [exchange] };

/** Logging messages as the test upstream sends them: `[seq, call]` each. */
function delivered(messages: readonly [number, string | undefined][]): { id: string; event: DeliveredEvent; exchange: Exchange }[] {
  return messages.map(([seq, call], i) => {
    const data = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: call === undefined ? { seq } : { seq, call } } });
    return { id: `e-0-${i + 1}-${i + 1}`, event: { id: `e-0-${i + 1}-${i + 1}`, hasData: true, digest: String(i), meaning: meaningOf(data) }, exchange };
  });
}

function violations(messages: readonly [number, string | undefined][]): string[] {
  const found: string[] = [];
  payloadChecks(group, undefined, delivered(messages), (kind, _ex, _id, _expected, detail) => found.push(`${kind}: ${detail}`));
  return found;
}

describe('chaos checker: logging messages on the GET stream', () => {
  it('a message repeated within one call is a silent duplicate', () => {
    expect(violations([[1, '7'], [2, '7'], [3, '7'], [2, '7']])).toEqual(['payload_duplicate: logging message 2 after 3 of call 7']);
  });

  it('a new call first seen at any seq (the upstream dropped its start while no GET was open) is not', () => {
    expect(violations([[13, '7'], [14, '7'], [8, '9'], [9, '9']])).toEqual([]);
  });

  it('without call markers, only a restart at 1 counts as a new call', () => {
    expect(violations([[14, undefined], [8, undefined]])).toEqual(['payload_duplicate: logging message 8 after 14']);
    expect(violations([[14, undefined], [1, undefined]])).toEqual([]);
  });
});

describe('chaos checker: chain and power-loss rules', () => {
  const epoch = 'abcdefghij';
  const stream = 'aaaaaaaa';
  const rec = (pos: number, seq: number, prev: number, kind = 'event'): LogRecord => ({ pos, seq, prev, epoch, kind, digest: kind === 'prime' ? digest('') : `d${pos}`, endReason: undefined, upstreamId: undefined, writer: 'w' });
  /** One fresh POST that delivered these events (seq, pos), its prime first. */
  const post = (events: Array<[number, number]>): Exchange =>
    ({
      n: 1,
      client: 'raw1',
      clientKind: 'raw',
      method: 'POST',
      path: '/mcp',
      sessionId: 's',
      cursor: undefined,
      rpc: undefined,
      startedAt: 0,
      endedAt: 1,
      status: 200,
      events: events.map(([seq, pos]) => ({ id: `${epoch}-${stream}-${seq}-${pos}`, hasData: seq !== 1, digest: seq === 1 ? digest('') : `d${pos}`, meaning: meaningOf('') })),
      end: 'closed',
    }) as unknown as Exchange;
  const run = (ex: Exchange, log: LogRecord[], lost?: Map<number, LogRecord>) =>
    check({ exchanges: [ex], calls: [], guardViolations: [], log: new Map([[`s/${stream}`, log]]), pages: new Map(), purged: [new Set()], ...(lost === undefined ? {} : { lost: [lost] }) });

  it('an event whose logged predecessor is not the one the client got is a fork', () => {
    const result = run(post([[1, 10], [2, 11], [3, 13]]), [rec(10, 1, 0, 'prime'), rec(11, 2, 10), rec(13, 3, 12)]);
    expect(result.violations.map((v) => `${v.kind}: ${v.detail}`)).toEqual(["fork: the log chains seq 3 to pos 12, the client's previous event (or cursor) is at pos 11"]);
  });

  it('an event a power loss took after delivery is counted, not judged against what replaced it', () => {
    const lostEvent = rec(11, 2, 10);
    // After the loss the log holds another seq 2 (pos 20) and seq 3 chained to it.
    const log = [rec(10, 1, 0, 'prime'), rec(20, 2, 10), rec(21, 3, 20)];
    const clean = run(post([[1, 10], [2, 11]]), log, new Map([[11, lostEvent]]));
    expect(clean.violations).toEqual([]);
    expect(clean.verification.deliveredThenLost).toBe(1);
    // A client that went on past the lost event without a verdict got a forked continuation.
    const forked = run(post([[1, 10], [2, 11], [3, 21]]), log, new Map([[11, lostEvent]]));
    expect(forked.violations.map((v) => v.kind)).toEqual(['fork']);
  });

  it("on a partitioned log, positions are the partition's own: a purge or loss in another partition excuses nothing", () => {
    const partitions = 4;
    const own = partitionOf('s', partitions);
    const other = (own + 1) % partitions;
    const perPartition = <T>(value: (k: number) => T): T[] => Array.from({ length: partitions }, (_, k) => value(k));
    // seq 3 at pos 12 was delivered; the tap's copy ends at seq 2, and it found pos 12 purged in `where`.
    const log = [rec(10, 1, 0, 'prime'), rec(11, 2, 10)];
    const ex = post([[1, 10], [2, 11], [3, 12]]);
    const purgedIn = (where: number) => check({ exchanges: [ex], calls: [], guardViolations: [], log: new Map([[`s/${stream}`, log]]), pages: new Map(), partitions, purged: perPartition((k) => new Set(k === where ? [12] : [])) });
    expect(purgedIn(own).violations).toEqual([]);
    expect(purgedIn(own).verification.unverifiable).toBe(1);
    expect(purgedIn(other).violations.map((v) => v.kind)).toEqual(['not_in_log']);
    // The same for an event a power loss took.
    const lostIn = (where: number) => check({ exchanges: [ex], calls: [], guardViolations: [], log: new Map([[`s/${stream}`, log]]), pages: new Map(), partitions, purged: perPartition(() => new Set()), lost: perPartition((k) => new Map(k === where ? [[12, rec(12, 3, 11)]] : [])) });
    expect(lostIn(own).verification.deliveredThenLost).toBe(1);
    expect(lostIn(other).violations.map((v) => v.kind)).toEqual(['not_in_log']);
    expect(() => check({ exchanges: [], calls: [], guardViolations: [], log: new Map(), pages: new Map(), partitions, purged: [new Set()] })).toThrow(/one entry per partition/);
  });
});

describe('meaningOf', () => {
  it('reads a tool result with isError as an explicit failure, not a success (MCP reports failed tool calls so)', () => {
    expect(meaningOf(JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'JetStream request failed' }], isError: true } }))).toEqual({
      t: 'response',
      id: '7',
      ok: false,
      toolError: true,
      text: 'JetStream request failed',
    });
    expect(meaningOf(JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'done' }] } }))).toEqual({ t: 'response', id: '7', ok: true, text: 'done' });
  });
});
