/**
 * The checker: from every client's recorded wire history and the log (the
 * tap's copy, cross-checked with `SessionLog.readPage`), classify each
 * stream a client touched as
 *
 * - `complete`: the client got the whole stream, contiguous, and its response;
 * - `explicit`: it ended with an explicit verdict (a `Tether-Resume` refusal,
 *   a JSON-RPC `-32001` abandoned/deadline error, the guard passing on a refusal);
 * - `violation`: something silent went wrong (gap, duplicate, reorder, fork,
 *   an event the log does not hold, a resume the guard had to stop, ...);
 * - `open`: the standalone GET stream (it never completes), contiguous so far;
 * - `unfinished`: the client stopped first (the run ended, its patience ran out).
 *
 * Rules for one response (DESIGN sections 1, 5, 7, 8): a fresh POST starts at
 * seq 1 (its `prime`); a resume opens with its acknowledgment (`event:
 * resume`, the cursor as id, `next_seq` = cursor seq + 1), then must
 * deliver seq cursor+1, cursor+2, ... of the same epoch and stream; a fresh GET starts with the head's id (priming) and goes
 * on from there. Every delivered id must name the log's event at that seq
 * (same pos, same epoch) with the same payload.
 */
import { decodeEventId } from '@tether/protocol';
import type { EventId } from '@tether/protocol';
import { partitionOf } from '@tether/session-log';
import type { LogRecord } from './log-tap.js';
import type { CallOutcome, DeliveredEvent, Exchange, GuardViolation } from './record.js';
import { bump } from './util.js';
import type { Meaning } from './util.js';
import { cursorLosses } from './cursor-loss.js';
import { PATIENCE_ERROR } from './record.js';
import { ALL_TOOLS } from './tools.js';
import type { NumericArgs, ProgressTool } from './tools.js';
import { writerChecks } from './writers.js';
import type { WriterScan } from './writers.js';

export type StreamClass = 'complete' | 'explicit' | 'violation' | 'open' | 'unfinished';

export interface Violation {
  readonly kind: string;
  readonly client: string;
  readonly session: string;
  readonly stream: string;
  /** Exchange number (order of requests in the run). */
  readonly exchange: number | undefined;
  readonly cursor: string | undefined;
  readonly eventId: string | undefined;
  readonly expected: string | undefined;
  readonly detail: string;
}

export interface StreamReport {
  readonly key: string;
  readonly client: string;
  readonly clientKind: string;
  readonly path: string;
  readonly cls: StreamClass;
  /** For `explicit`: the verdict's kind; for `unfinished`: why. */
  readonly reason: string | undefined;
  readonly delivered: number;
  readonly exchanges: number;
}

export interface CheckInput {
  readonly exchanges: readonly Exchange[];
  readonly calls: readonly CallOutcome[];
  readonly guardViolations: readonly GuardViolation[];
  readonly log: ReadonlyMap<string, readonly LogRecord[]>;
  /** The log as `readPage` reads it now, for streams of sessions still alive (key `<session>/<stream>`). */
  readonly pages: ReadonlyMap<string, readonly LogRecord[]>;
  /**
   * The log's partition count: each partition stream numbers its own
   * positions, so `purged` and `lost` hold one entry per partition, and a
   * session's is at `partitionOf(session, partitions)`. Default 1.
   */
  readonly partitions?: number;
  /** Per partition: log positions the tap missed and that were purged before it could read them. */
  readonly purged: readonly ReadonlySet<number>[];
  /** Per partition: acknowledged events a power loss took from the log, by position (`power-loss.ts`): a client that had one is not judged against what replaced it. */
  readonly lost?: readonly ReadonlyMap<number, LogRecord>[];
  /**
   * The streaming tools the clients call (`tools.ts`): a call's progress
   * count and result text, from its recorded arguments. Default every
   * known tool (`ALL_TOOLS`); a call of a tool not listed gets no payload
   * verdict of its own (its stream is still judged against the log).
   */
  readonly tools?: readonly ProgressTool[];
  /** When the run's hard stop aborted every request, if it had to. */
  readonly hardStopAt?: number | undefined;
}

/** The description of `name` among `tools`, if any. */
function toolNamed(tools: readonly ProgressTool[], name: string | undefined): ProgressTool | undefined {
  return name === undefined ? undefined : tools.find((t) => t.name === name);
}

export interface CheckResult {
  readonly streams: StreamReport[];
  readonly violations: Violation[];
  /** Findings about the log itself (chain breaks the readers would refuse): not silent, but reported. */
  readonly logAnomalies: Violation[];
  /** Resumed responses whose cursor the SDK client never got (see `cursorLosses`), by what followed. */
  readonly cursorLosses: Record<string, number>;
  readonly verification: {
    /** Delivered events compared with the log's event at their seq. */
    readonly eventsMatched: number;
    /** Found by `readPage` only (the tap missed them). */
    readonly foundByReadPage: number;
    /** Delivered ids neither the tap nor readPage could show (their session was purged first). */
    readonly unverifiable: number;
    readonly readPageStreams: number;
    /** readPage and the tap disagree about an event (should be 0). */
    readonly readPageMismatches: number;
    /** Holes in the tap's copy of a stream whose session was purged before the tap could fill them. */
    readonly tapGaps: number;
    /** Delivered events a later power loss took from the log (see `CheckInput.lost`). */
    readonly deliveredThenLost: number;
  };
  /** The two-writer scan of every stream in the log (`writerChecks`). */
  readonly writers: WriterScan;
}


export interface StreamGroup {
  readonly key: string;
  readonly session: string;
  readonly stream: string;
  readonly exchanges: Exchange[];
}

/** A tool call's stream: the fresh POST that opened it names the request. */
export interface Opening {
  readonly exchange: Exchange;
  readonly rpcId: string | undefined;
  readonly tool: string | undefined;
  readonly count: number | undefined;
  readonly args: NumericArgs | undefined;
  readonly method: string | undefined;
}

export function check(input: CheckInput): CheckResult {
  const violations: Violation[] = [];
  const logAnomalies: Violation[] = [];
  const streams: StreamReport[] = [];
  const verification = { eventsMatched: 0, foundByReadPage: 0, unverifiable: 0, readPageStreams: input.pages.size, readPageMismatches: 0, tapGaps: 0, deliveredThenLost: 0 };
  const tools = input.tools ?? ALL_TOOLS;
  const writers: WriterScan = { streams: 0, takeovers: 0, reclaims: 0, violations: 0 };
  const partitions = input.partitions ?? 1;
  if (input.purged.length !== partitions || (input.lost !== undefined && input.lost.length !== partitions)) {
    throw new Error(`check: purged and lost need one entry per partition (${partitions}), got ${input.purged.length} and ${input.lost?.length ?? 'none'}`);
  }
  const nothing: ReadonlySet<number> = new Set();
  /** The positions of `session`'s partition the tap found purged. */
  const purgedOf = (session: string): ReadonlySet<number> => input.purged[partitionOf(session, partitions)] ?? nothing;

  // The tap against readPage: the same events, wherever both hold one.
  for (const [key, page] of input.pages) {
    const tapped = new Map((input.log.get(key) ?? []).map((r) => [r.seq, r]));
    for (const r of page) {
      const t = tapped.get(r.seq);
      if (t !== undefined && (t.pos !== r.pos || t.digest !== r.digest || t.epoch !== r.epoch)) {
        verification.readPageMismatches += 1;
        const [session = '', stream = ''] = key.split('/');
        logAnomalies.push({ kind: 'tap_readpage_mismatch', client: '-', session, stream, exchange: undefined, cursor: undefined, eventId: undefined, expected: undefined, detail: `seq ${r.seq}: tap pos ${t.pos}, readPage pos ${r.pos}` });
      }
    }
  }

  for (const [key, records] of input.log) logChecks(key, records, logAnomalies, purgedOf(key.split('/')[0] ?? ''), verification);
  // Never two writers recorded in one stream: after a takeover the deposed writer appends nothing.
  for (const [key, records] of input.log) {
    const found = writerChecks(key, records, writers);
    writers.violations += found.length;
    violations.push(...found);
  }
  // Two responses to one request in the log: the source of truth says the request both
  // succeeded and failed (e.g. a takeover that ignored the response the dead writer recorded).
  for (const [key, records] of input.log) {
    const [session = '', stream = ''] = key.split('/');
    const seen = new Map<string, LogRecord>();
    for (const r of records) {
      if (r.response === undefined) continue;
      const first = seen.get(r.response.id);
      if (first === undefined) {
        seen.set(r.response.id, r);
        continue;
      }
      violations.push({
        kind: 'double_response_in_log',
        client: '-',
        session,
        stream,
        exchange: undefined,
        cursor: undefined,
        eventId: `${r.epoch}-${stream}-${r.seq}-${r.pos}`,
        expected: undefined,
        detail: `request ${r.response.id}: ${first.response?.ok === true ? 'result' : 'error'} at seq ${first.seq} (pos ${first.pos}), then ${r.response.ok ? 'result' : 'error'} at seq ${r.seq} (pos ${r.pos}), stream end ${records.at(-1)?.kind === 'end' ? (records.at(-1)?.endReason ?? '?') : 'none'}`,
      });
    }
  }

  const groups = groupByStream(input.exchanges, violations);
  const losses = cursorLosses(input.exchanges, groups, input.log);
  const callsByExchange = new Map<number, CallOutcome>();
  for (const call of input.calls) if (call.postExchange !== undefined) callsByExchange.set(call.postExchange, call);

  for (const group of groups.values()) {
    const found: Violation[] = [];
    const bySeq = logIndex(input.log.get(group.key), input.pages.get(group.key));
    const union = new Map<number, { id: string; event: DeliveredEvent; exchange: Exchange }>();
    let epoch: string | undefined = bySeq.values().next().value?.epoch;
    let opening: Opening | undefined;
    const first = group.exchanges[0]!;
    const v = (kind: string, ex: Exchange | undefined, eventId: string | undefined, expected: string | undefined, detail: string): void => {
      found.push({ kind, client: first.client, session: group.session, stream: group.stream, exchange: ex?.n, cursor: ex?.cursor, eventId, expected, detail });
    };

    for (const ex of group.exchanges) {
      const cursor = ex.cursor === undefined ? undefined : decodeEventId(ex.cursor);
      let expected: number | undefined;
      let lastPos: number | undefined;
      if (cursor?.ok === true) {
        expected = cursor.value.seq + 1;
        lastPos = cursor.value.pos;
      } else if (ex.method === 'POST') {
        expected = 1;
        lastPos = 0;
      }
      if (ex.method === 'POST' && ex.rpc !== undefined) opening = { exchange: ex, rpcId: ex.rpc.id, tool: ex.rpc.tool, count: ex.rpc.count, args: ex.rpc.args, method: ex.rpc.method };
      const seenHere = new Set<number>();
      for (const [i, event] of ex.events.entries()) {
        if (event.id === undefined) {
          if (event.hasData) v('silent_fallback', ex, undefined, undefined, 'an event with data but no id');
          continue;
        }
        const decoded = decodeEventId(event.id);
        if (!decoded.ok) {
          v('malformed_id', ex, event.id, undefined, decoded.reason);
          continue;
        }
        const id: EventId = decoded.value;
        if (id.stream !== group.stream || (epoch !== undefined && id.epoch !== epoch)) {
          v('fork', ex, event.id, undefined, `epoch/stream ${id.epoch}/${id.stream}, the stream is ${epoch ?? '?'}/${group.stream}`);
          continue;
        }
        epoch ??= id.epoch;
        // A resume's acknowledgment repeats the cursor as its id: the client keeps its place.
        if (event.ack !== undefined) {
          const want = cursor?.ok === true ? { verdict: 'resumed', stream: cursor.value.stream, next_seq: cursor.value.seq + 1 } : undefined;
          if (i !== 0 || event.id !== ex.cursor) v('bad_resume_ack', ex, event.id, ex.cursor, 'a resume acknowledgment that does not open a resume of its cursor');
          else if (!event.ack.ok) v('bad_resume_ack', ex, event.id, undefined, event.ack.reason);
          else if (JSON.stringify(event.ack.value) !== JSON.stringify(want)) v('bad_resume_ack', ex, event.id, JSON.stringify(want), `the acknowledgment says ${JSON.stringify(event.ack.value)}`);
          continue;
        }
        if (expected === undefined) {
          // A fresh GET starts after the stream's head: its priming event carries the
          // head's id with empty data, a cursor, not a delivery of that event.
          const head = bySeq.get(id.seq);
          if (head !== undefined && (head.record.pos !== id.pos || head.record.epoch !== id.epoch)) v('fork', ex, event.id, `pos ${head.record.pos}`, `the fresh GET's priming id is not the log's event at seq ${id.seq}`);
          expected = id.seq + 1;
          lastPos = id.pos;
          if (event.meaning.t === 'empty') continue;
          v('fork', ex, event.id, undefined, 'a fresh GET began with a non-empty event instead of priming');
        }
        const expectedBefore = expected;
        const chainedFrom = lastPos;
        if (id.seq > expected) v('gap', ex, event.id, String(expected), `seq ${id.seq} delivered where ${expected} was due`);
        else if (id.seq < expected) v(seenHere.has(id.seq) ? 'duplicate' : 'reorder', ex, event.id, String(expected), `seq ${id.seq} delivered again where ${expected} was due`);
        else if (lastPos !== undefined && id.pos <= lastPos && lastPos !== 0) v('reorder', ex, event.id, undefined, `pos ${id.pos} not after ${lastPos}`);
        seenHere.add(id.seq);
        expected = id.seq + 1;
        lastPos = id.pos;

        const lostRecord = input.lost?.[partitionOf(group.session, partitions)]?.get(id.pos);
        const logged = bySeq.get(id.seq);
        if (lostRecord !== undefined && lostRecord.seq === id.seq && lostRecord.epoch === id.epoch && (lostRecord.kind === 'prime' ? event.meaning.t === 'empty' : lostRecord.digest === event.digest)) {
          // Delivered, then lost from the log by a power loss: what the client does next is
          // judged (a resume past it must be refused), not this event against what replaced it.
          verification.deliveredThenLost += 1;
        } else if (logged === undefined) {
          const known = input.log.has(group.key) || input.pages.has(group.key);
          if (known && !purgedOf(group.session).has(id.pos)) v('not_in_log', ex, event.id, undefined, 'the log holds no event at this seq');
          else verification.unverifiable += 1;
        } else {
          if (logged.source === 'page') verification.foundByReadPage += 1;
          if (logged.record.pos !== id.pos || logged.record.epoch !== id.epoch) v('fork', ex, event.id, `pos ${logged.record.pos}`, `the log's event at seq ${id.seq} is at pos ${logged.record.pos}`);
          else if (id.seq === expectedBefore && chainedFrom !== undefined && logged.record.prev !== chainedFrom) v('fork', ex, event.id, `prev ${chainedFrom}`, `the log chains seq ${id.seq} to pos ${logged.record.prev}, the client's previous event (or cursor) is at pos ${chainedFrom}`);
          else if (logged.record.kind === 'end') v('end_delivered', ex, event.id, undefined, 'an end marker reached a client');
          else if (logged.record.kind === 'prime' ? event.meaning.t !== 'empty' : logged.record.digest !== event.digest) v('fork', ex, event.id, undefined, "payload differs from the log's");
          else verification.eventsMatched += 1;
        }
        const earlier = union.get(id.seq);
        if (earlier !== undefined && (earlier.id !== event.id || earlier.event.digest !== event.digest)) v('fork', ex, event.id, earlier.id, 'the same seq delivered with another id or payload');
        if (earlier === undefined) union.set(id.seq, { id: event.id, event, exchange: ex });
      }
    }

    for (const loss of losses.byStream.get(group.key) ?? []) v(loss.kind, loss.exchange, loss.exchange.cursor, undefined, loss.detail);

    // Payload level: what the application reads, in log order.
    const ordered = [...union.entries()].sort((a, b) => a[0] - b[0]).map(([, e]) => e);
    payloadChecks(group, opening, ordered, v, tools);

    const call = opening === undefined ? undefined : callsByExchange.get(opening.exchange.n);
    const outcome = classify(group, opening, ordered, call, found, input.hardStopAt);
    violations.push(...found);
    streams.push({ key: group.key, client: first.client, clientKind: first.clientKind, path: first.path, cls: outcome.cls, reason: outcome.reason, delivered: union.size, exchanges: group.exchanges.length });
  }

  // What the SDK application saw: a result means progress 1, 2, …, count, each once, in order.
  for (const call of input.calls) {
    const tool = toolNamed(tools, call.tool);
    if (call.clientKind !== 'sdk' || call.outcome !== 'result' || tool === undefined || call.progress === undefined) continue;
    const args = call.args ?? { count: call.count };
    const count = tool.count(args) ?? call.count;
    const exact = call.progress.length === count && call.progress.every((p, i) => p === i + 1);
    if (exact && call.text === tool.resultText(args)) continue;
    violations.push({
      kind: 'sdk_progress',
      client: call.client,
      session: call.sessionId ?? '',
      stream: '',
      exchange: call.postExchange,
      cursor: undefined,
      eventId: undefined,
      expected: `1..${count}`,
      detail: `result "${call.text ?? ''}" after progress ${summarize(call.progress)}`,
    });
  }

  // A 2026-07-28 call (no session, nothing logged, read whole): its one response delivered
  // progress 1, 2, …, count on its own token, each once, in order, then exactly its result.
  const exchangeByN = input.calls.some((c) => c.stateless === true) ? new Map(input.exchanges.map((ex) => [ex.n, ex])) : new Map<number, Exchange>();
  for (const call of input.calls) {
    const tool = toolNamed(tools, call.tool);
    const ex = call.postExchange === undefined ? undefined : exchangeByN.get(call.postExchange);
    if (call.stateless !== true || call.outcome !== 'result' || tool === undefined || ex === undefined) continue;
    const args = call.args ?? { count: call.count };
    const count = tool.count(args) ?? call.count;
    const progress = ex.events.flatMap((e) => (e.meaning.t === 'progress' ? [e.meaning] : []));
    const exact = progress.length === count && progress.every((p, i) => p.progress === i + 1 && p.token === ex.rpc?.token);
    if (exact && call.text === tool.resultText(args)) continue;
    violations.push({
      kind: 'stateless_progress',
      client: call.client,
      session: '',
      stream: '',
      exchange: call.postExchange,
      cursor: undefined,
      eventId: undefined,
      expected: `1..${count}`,
      detail: `result "${call.text ?? ''}" after progress ${summarize(progress.map((p) => p.progress))}${progress.some((p) => p.token !== ex.rpc?.token) ? ' (some on another token)' : ''}`,
    });
  }

  // Calls the guard failed with a violation (not a refusal): each one is a silent failure it caught.
  for (const g of input.guardViolations) {
    if (g.code === 'explicit_refusal') continue;
    violations.push({ kind: `guard_${g.code}`, client: g.client, session: '', stream: '', exchange: undefined, cursor: g.lastEventId, eventId: g.eventId, expected: g.expectedEventId, detail: g.message });
  }
  return { streams, violations, logAnomalies, cursorLosses: losses.counts, verification, writers };
}

/** Exchanges by the stream they carried (from the cursor, or the first decodable id). */
export function groupByStream(exchanges: readonly Exchange[], violations: Violation[] = []): Map<string, StreamGroup> {
  const groups = new Map<string, StreamGroup>();
  for (const ex of exchanges) {
    const session = ex.sessionId ?? ex.answeredSession;
    if (session === undefined) continue;
    let stream: string | undefined;
    if (ex.cursor !== undefined) {
      const c = decodeEventId(ex.cursor);
      if (c.ok) stream = c.value.stream;
    }
    if (stream === undefined) {
      for (const e of ex.events) {
        const d = e.id === undefined ? undefined : decodeEventId(e.id);
        if (d?.ok === true) {
          stream = d.value.stream;
          break;
        }
      }
    }
    if (stream === undefined) {
      if (ex.events.some((e) => e.hasData && e.id === undefined)) {
        violations.push({ kind: 'silent_fallback', client: ex.client, session, stream: '?', exchange: ex.n, cursor: ex.cursor, eventId: undefined, expected: undefined, detail: 'an SSE answer whose events carry no ids' });
      }
      continue;
    }
    const key = `${session}/${stream}`;
    let group = groups.get(key);
    if (group === undefined) {
      group = { key, session, stream, exchanges: [] };
      groups.set(key, group);
    }
    group.exchanges.push(ex);
  }
  return groups;
}

function logIndex(tapped: readonly LogRecord[] | undefined, page: readonly LogRecord[] | undefined): Map<number, { record: LogRecord; source: 'tap' | 'page'; epoch: string }> {
  const out = new Map<number, { record: LogRecord; source: 'tap' | 'page'; epoch: string }>();
  for (const record of tapped ?? []) if (!out.has(record.seq)) out.set(record.seq, { record, source: 'tap', epoch: record.epoch });
  for (const record of page ?? []) if (!out.has(record.seq)) out.set(record.seq, { record, source: 'page', epoch: record.epoch });
  return out;
}

/** The log's own invariants per stream: seq 1, 2, 3… with prev = the previous pos, one epoch, the end last. */
function logChecks(key: string, records: readonly LogRecord[], out: Violation[], purged: ReadonlySet<number>, verification: { tapGaps: number }): void {
  const [session = '', stream = ''] = key.split('/');
  const anomaly = (kind: string, r: LogRecord, detail: string): void => {
    out.push({ kind, client: '-', session, stream, exchange: undefined, cursor: undefined, eventId: `${r.epoch}-${stream}-${r.seq}-${r.pos}`, expected: undefined, detail });
  };
  let prev: LogRecord | undefined;
  for (const r of records) {
    if (prev === undefined) {
      // A first event the tap missed and could not look up any more (purged): a hole in its copy only.
      if (r.seq > 1 && purged.has(r.prev)) verification.tapGaps += 1;
      else if (r.seq !== 1 || r.prev !== 0) anomaly('log_chain', r, `the first stored event is seq ${r.seq} prev ${r.prev}`);
    } else if (r.seq > prev.seq + 1 && r.prev !== prev.pos && purged.has(r.prev)) {
      // The tap missed the event at r.prev (a delivery lost while it reconnected)
      // and the session was purged before it could look it up: its copy has a
      // hole, the log had none (the event chains exactly to the missing one).
      verification.tapGaps += 1;
    } else {
      if (r.seq !== prev.seq + 1) anomaly(r.seq <= prev.seq ? 'log_fork' : 'log_gap', r, `seq ${r.seq} stored after seq ${prev.seq}`);
      if (r.prev !== prev.pos) anomaly('log_chain', r, `prev ${r.prev}, the previous event is at ${prev.pos}`);
      if (r.epoch !== prev.epoch) anomaly('log_fork', r, `epoch ${r.epoch} after ${prev.epoch}`);
      if (prev.kind === 'end') anomaly('log_after_end', r, 'an event stored after the end marker');
    }
    prev = r;
  }
}

type Report = (kind: string, ex: Exchange | undefined, eventId: string | undefined, expected: string | undefined, detail: string) => void;

/** Progress 1, 2, 3… without repeats or holes; one response per request (exported for its own test). */
export function payloadChecks(group: StreamGroup, opening: Opening | undefined, ordered: readonly { id: string; event: DeliveredEvent; exchange: Exchange }[], v: Report, tools: readonly ProgressTool[] = ALL_TOOLS): void {
  const progress = new Map<string, number>();
  const responses = new Map<string, string>();
  /** The last logging message seen on stream 0, and the call that sent it. */
  let lastLog = { seq: 0, call: undefined as string | undefined };
  for (const { id, event, exchange } of ordered) {
    const m: Meaning = event.meaning;
    if (m.t === 'progress') {
      const last = progress.get(m.token) ?? 0;
      if (m.progress !== last + 1) v(m.progress <= last ? 'payload_duplicate' : 'payload_gap', exchange, id, String(last + 1), `progress ${m.progress} after ${last}`);
      progress.set(m.token, m.progress);
    } else if (m.t === 'response') {
      const earlier = responses.get(m.id);
      if (earlier !== undefined) v('double_response', exchange, id, undefined, `a second response for request ${m.id} (first at ${earlier})`);
      responses.set(m.id, id);
    } else if (m.t === 'log' && group.stream === '0') {
      // Each notify call sends 1, 2, 3… and names itself. Holes are the
      // upstream's (it drops messages while no GET is open, so a new call
      // may show up first at any seq); a repeat within one call is not.
      const sameCall = m.call === undefined ? m.seq !== 1 : m.call === lastLog.call;
      if (sameCall && m.seq <= lastLog.seq) v('payload_duplicate', exchange, id, String(lastLog.seq + 1), `logging message ${m.seq} after ${lastLog.seq}${m.call === undefined ? '' : ` of call ${m.call}`}`);
      lastLog = { seq: m.seq, call: m.call };
    }
  }
  // A streaming tool's result: after exactly the progress its arguments ask for, with its exact text.
  const tool = toolNamed(tools, opening?.tool);
  const args = opening?.args ?? (opening?.count === undefined ? undefined : { count: opening.count });
  const count = tool === undefined || args === undefined ? undefined : tool.count(args);
  if (opening !== undefined && tool !== undefined && args !== undefined && opening.rpcId !== undefined && count !== undefined) {
    const response = ordered.find((e) => e.event.meaning.t === 'response' && e.event.meaning.id === opening.rpcId)?.event.meaning;
    if (response?.t === 'response' && response.ok) {
      const got = [...progress.values()][0] ?? 0;
      if (got !== count || response.text !== tool.resultText(args)) v('incomplete_result', opening.exchange, undefined, String(count), `result "${response.text}" after ${got} progress events`);
    }
  }
}

function classify(
  group: StreamGroup,
  opening: Opening | undefined,
  ordered: readonly { event: DeliveredEvent }[],
  call: CallOutcome | undefined,
  found: readonly Violation[],
  hardStopAt: number | undefined,
): { cls: StreamClass; reason: string | undefined } {
  if (found.length > 0) return { cls: 'violation', reason: [...new Set(found.map((f) => f.kind))].join(',') };
  if (group.stream === '0') return { cls: 'open', reason: undefined };
  const rpcId = opening?.rpcId;
  const response = ordered.map((e) => e.event.meaning).find((m): m is Meaning & { t: 'response' } => m.t === 'response' && (rpcId === undefined || m.id === rpcId));
  if (response !== undefined) {
    if (response.ok) return { cls: 'complete', reason: undefined };
    if (response.toolError === true) return { cls: 'explicit', reason: 'tool_error (isError result)' };
    return { cls: 'explicit', reason: `rpc_error ${response.code ?? '?'}${response.tether === undefined ? '' : ` ${response.tether}`}` };
  }
  // No response delivered: how did it end? The last refusal the client got, or what the application saw.
  const refusal = [...group.exchanges].reverse().find((ex) => ex.cursor !== undefined && ex.status !== undefined && ex.status >= 400 && ex.status < 500 && ex.status !== 429 && ex.status !== 409);
  if (refusal !== undefined) return { cls: 'explicit', reason: `refused ${refusal.status} ${refusal.verdict ?? refusal.bodyError?.verdict ?? 'no-verdict'}` };
  if (call?.outcome === 'guard') {
    // The guard fails a call for a refusal it passed on, for a stream of a
    // session it replaced after one, or for a violation (counted from its own report).
    if (call.detail?.startsWith('explicit_refusal') === true) return { cls: 'explicit', reason: `guard refusal ${call.verdict ?? '?'}` };
    if (call.detail?.startsWith('session_replaced') === true) return { cls: 'explicit', reason: 'guard session_replaced' };
    return { cls: 'violation', reason: `guard_${call.detail?.split(':')[0] ?? '?'}` };
  }
  if (call?.outcome === 'ended_without_response') return { cls: 'violation', reason: 'ended_without_response' };
  // A client still trying when its call ended is unfinished; one that had stopped asking long before is stalled.
  const lastActivity = Math.max(...group.exchanges.map((ex) => ex.endedAt ?? ex.startedAt));
  const stalled = call !== undefined && call.at - lastActivity > 5_000;
  // A response still open when the client gave up or the run's hard stop came, that had sent
  // nothing (no event, no end) for 10 s before: the server hung it, and told the client nothing.
  const hung = group.exchanges.find((ex) => {
    if (ex.status !== 200) return false;
    const openAtHardStop = hardStopAt !== undefined && (ex.endedAt === undefined || ex.endedAt >= hardStopAt - 100);
    if (!openAtHardStop && ex.error !== PATIENCE_ERROR) return false;
    return (ex.endedAt ?? hardStopAt ?? 0) - (ex.lastEventAt ?? ex.startedAt) > 10_000;
  });
  if (hung !== undefined) return { cls: 'unfinished', reason: `${call?.outcome ?? 'no-outcome'} (hung: a response still open had sent nothing for over 10s when the client gave up)` };
  return { cls: 'unfinished', reason: `${call?.outcome ?? 'no-outcome'}${stalled ? ' (stalled: no request for the stream in its last 5s)' : ''}` };
}

/** Counts for the summary. */
export function tally(result: CheckResult): { streams: Record<string, number>; explicit: Record<string, number>; unfinished: Record<string, number>; violations: Record<string, number>; logAnomalies: Record<string, number> } {
  const streams: Record<string, number> = {};
  const explicit: Record<string, number> = {};
  const unfinished: Record<string, number> = {};
  for (const s of result.streams) {
    bump(streams, s.cls);
    if (s.cls === 'explicit') bump(explicit, s.reason ?? '?');
    if (s.cls === 'unfinished') bump(unfinished, s.reason ?? '?');
  }
  const violations: Record<string, number> = {};
  for (const v of result.violations) bump(violations, v.kind);
  const logAnomalies: Record<string, number> = {};
  for (const a of result.logAnomalies) bump(logAnomalies, a.kind);
  return { streams, explicit, unfinished, violations, logAnomalies };
}

/** `1..40` for a clean run, else the values with their irregularities. */
function summarize(values: readonly number[]): string {
  const parts: string[] = [];
  let start = values[0];
  let prev = values[0];
  for (const v of [...values.slice(1), Number.NaN]) {
    if (prev !== undefined && v === prev + 1) {
      prev = v;
      continue;
    }
    if (start !== undefined) parts.push(start === prev ? `${start}` : `${start}..${prev}`);
    start = v;
    prev = v;
  }
  return `[${parts.join(', ')}]`;
}
