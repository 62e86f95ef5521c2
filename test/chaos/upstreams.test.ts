import { describe, expect, it } from 'vitest';
import { check, payloadChecks } from './checker.js';
import type { Opening, StreamGroup } from './checker.js';
import { GATEWAY_TARGET } from './client-context.js';
import type { CallOutcome, DeliveredEvent, Exchange } from './record.js';
import { EVERYTHING_TOOL, KIT_TOOL, numericArgs, V2_TOOL } from './tools.js';
import { parseUpstreamSets, upstreamNamesOf } from './upstreams.js';
import { meaningOf } from './util.js';

// `--upstreams` and what the checker knows of each upstream's tool: a call
// of the reference server's long-running operation is judged by the
// progress and the exact result its own arguments ask for.

describe('--upstreams', () => {
  it('kit alone is the run as before: store, then plain', () => {
    expect(upstreamNamesOf(parseUpstreamSets('kit'))).toEqual(['store', 'plain']);
  });

  it('names every upstream in one order, whatever the order asked', () => {
    expect(upstreamNamesOf(parseUpstreamSets('v2,everything,kit'))).toEqual(['store', 'plain', 'everything', 'v2']);
    expect(upstreamNamesOf(parseUpstreamSets('all'))).toEqual(['store', 'plain', 'everything', 'v2']);
    expect(upstreamNamesOf(parseUpstreamSets('everything'))).toEqual(['everything']);
  });

  it('refuses what it does not know, and nothing at all', () => {
    expect(() => parseUpstreamSets('kit,redis')).toThrow(/unknown upstream "redis"/);
    expect(() => parseUpstreamSets(',')).toThrow(/no upstream named/);
  });

  it('each route has its own tool', () => {
    expect(GATEWAY_TARGET.routes.everything?.tool).toBe(EVERYTHING_TOOL);
    expect(GATEWAY_TARGET.routes.v2?.tool).toBe(V2_TOOL);
    expect(GATEWAY_TARGET.routes.store?.tool).toBe(KIT_TOOL);
  });
});

describe("chaos checker: server-everything's long-running operation", () => {
  const args = EVERYTHING_TOOL.args(5, 3);
  const exchange = { n: 1 } as Exchange;
  const group: StreamGroup = { key: 's/aaaaaaaa', session: 's', stream: 'aaaaaaaa', exchanges: [exchange] };
  const opening: Opening = { exchange, rpcId: '7', tool: EVERYTHING_TOOL.name, count: undefined, args: numericArgs(args), method: 'tools/call' };
  const progress = (i: number): string => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: i, total: 5, progressToken: 'raw1.7' } });
  const result = (text: string): string => JSON.stringify({ jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text }] } });
  const judge = (datas: readonly string[]): string[] => {
    const ordered = datas.map((data, i): { id: string; event: DeliveredEvent; exchange: Exchange } => ({ id: `e-aaaaaaaa-${i + 2}-${i + 2}`, event: { id: `e-aaaaaaaa-${i + 2}-${i + 2}`, hasData: true, digest: String(i), meaning: meaningOf(data) }, exchange }));
    const found: string[] = [];
    payloadChecks(group, opening, ordered, (kind, _ex, _id, expected, detail) => found.push(`${kind} ${expected ?? ''}: ${detail}`), [KIT_TOOL, EVERYTHING_TOOL]);
    return found;
  };

  it('reads its count from steps and its result from duration and steps', () => {
    expect(args).toEqual({ duration: 0.015, steps: 5 });
    expect(EVERYTHING_TOOL.count(args)).toBe(5);
    expect(EVERYTHING_TOOL.resultText(args)).toBe('Long running operation completed. Duration: 0.015 seconds, Steps: 5.');
  });

  it('a whole stream passes', () => {
    expect(judge([1, 2, 3, 4, 5].map(progress).concat(result(EVERYTHING_TOOL.resultText(args))))).toEqual([]);
  });

  it('a result after fewer progress events than steps is incomplete', () => {
    expect(judge([1, 2, 3, 4].map(progress).concat(result(EVERYTHING_TOOL.resultText(args))))).toEqual([`incomplete_result 5: result "${EVERYTHING_TOOL.resultText(args)}" after 4 progress events`]);
  });

  it("a result that is not the one its arguments ask for is incomplete (the kit tool's text would be wrong here)", () => {
    expect(judge([1, 2, 3, 4, 5].map(progress).concat(result('done 5')))).toEqual(['incomplete_result 5: result "done 5" after 5 progress events']);
  });

  it('a repeated progress event is a silent duplicate', () => {
    expect(judge([1, 2, 2, 3, 4, 5].map(progress).concat(result(EVERYTHING_TOOL.resultText(args))))[0]).toMatch(/^payload_duplicate 3: progress 2 after 2/);
  });

  it('what an SDK application saw: progress 1..steps, then the exact text', () => {
    const call = (progressSeen: number[], text: string): CallOutcome => ({ client: 'sdk1-everything', clientKind: 'sdk', tool: EVERYTHING_TOOL.name, count: 5, args, rpcId: '7', sessionId: 's', outcome: 'result', text, progress: progressSeen, slow: false, at: 0 });
    const kinds = (calls: CallOutcome[]): string[] => check({ exchanges: [], calls, guardViolations: [], log: new Map(), pages: new Map(), purged: [new Set()] }).violations.map((v) => `${v.kind} ${v.expected ?? ''}`);
    expect(kinds([call([1, 2, 3, 4, 5], EVERYTHING_TOOL.resultText(args))])).toEqual([]);
    expect(kinds([call([1, 2, 3, 3, 4, 5], EVERYTHING_TOOL.resultText(args))])).toEqual(['sdk_progress 1..5']);
    expect(kinds([call([1, 2, 3, 4, 5], 'Long running operation completed. Duration: 0.015 seconds, Steps: 4.')])).toEqual(['sdk_progress 1..5']);
  });
});

describe('chaos checker: a 2026-07-28 call on the v2 route (no session, nothing logged)', () => {
  const args = V2_TOOL.args(3, 2);
  const progress = (i: number, token = 'raw8.4'): string => JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: i, total: 3 } });
  const kinds = (datas: readonly string[], text = 'streamed 3'): string[] => {
    const exchange = { n: 9, client: 'raw8-v2', rpc: { method: 'tools/call', id: '4', tool: V2_TOOL.name, count: 3, args, token: 'raw8.4' }, events: datas.map((data) => ({ id: undefined, hasData: true, digest: '', meaning: meaningOf(data) })) } as unknown as Exchange;
    const call: CallOutcome = { client: 'raw8-v2', clientKind: 'raw', tool: V2_TOOL.name, count: 3, args, rpcId: '4', sessionId: undefined, outcome: 'result', text, stateless: true, slow: false, at: 0, postExchange: 9 };
    return check({ exchanges: [exchange], calls: [call], guardViolations: [], log: new Map(), pages: new Map(), purged: [new Set()], tools: [V2_TOOL] }).violations.map((v) => `${v.kind}: ${v.detail}`);
  };
  const result = JSON.stringify({ jsonrpc: '2.0', id: 4, result: { content: [{ type: 'text', text: 'streamed 3' }] } });

  it('progress 1..count on its token, then its result, passes (and is no stream of the log)', () => {
    expect(kinds([progress(1), progress(2), progress(3), result])).toEqual([]);
  });

  it('a lost, repeated or foreign progress event is a silent violation', () => {
    expect(kinds([progress(1), progress(3), result])).toEqual(['stateless_progress: result "streamed 3" after progress [1, 3]']);
    expect(kinds([progress(1), progress(2), progress(2), progress(3), result])).toEqual(['stateless_progress: result "streamed 3" after progress [1..2, 2..3]']);
    expect(kinds([progress(1), progress(2, 'raw8.3'), progress(3), result])).toEqual(['stateless_progress: result "streamed 3" after progress [1..3] (some on another token)']);
  });

  it('another result text is a silent violation', () => {
    expect(kinds([progress(1), progress(2), progress(3), result], 'streamed 2')).toEqual(['stateless_progress: result "streamed 2" after progress [1..3]']);
  });
});
