import { ResumeVerdict, isResumeAck, parseResumeAck } from '@tether/protocol';
import type { SseMessage } from '@tether/protocol';
import { ResumeViolationCode } from './errors.js';
import type { ViolationPosition } from './errors.js';
import { digestOf, foreignReason, seqOf, shapeOf, stepBetween, successorOf } from './ids.js';

/** A structural problem found in a stream, before any `ResumeViolationError` is made of it. */
export interface StreamFinding {
  readonly code: ResumeViolationCode;
  /** One sentence: what was seen, in terms of ids. */
  readonly reason: string;
  readonly position: ViolationPosition;
  readonly eventId?: string | undefined;
  readonly expectedEventId?: string | undefined;
  readonly previousEventId?: string | undefined;
  /** A verdict the server stated in the stream (a resume acknowledgment's `verdict`). */
  readonly verdict?: string | undefined;
}

/** Default bound of `StreamHistory`: ids remembered per stream. */
export const DEFAULT_MAX_TRACKED_IDS = 10_000;

/**
 * What a client has consumed on one SSE stream (a POST response stream, or
 * the GET stream, with all its resumed continuations). Keeps a digest of each
 * delivered event's data, never the data itself, bounded to the most recent
 * `maxIds` ids.
 */
export class StreamHistory {
  readonly #digests = new Map<string, number>();
  readonly #maxIds: number;
  /** Last id delivered to the client: its cursor. */
  lastId: string | undefined;
  /** Whether any delivered event carried an id. */
  hadIds = false;
  /** Whether a resumed continuation was ever accepted on this stream. */
  resumed = false;
  /**
   * Numeric ids jumped on a fresh stream: the server numbers events per
   * session, not per stream, so a jump proves nothing and only regressions
   * are checked from then on.
   */
  sparse = false;

  constructor(maxIds: number = DEFAULT_MAX_TRACKED_IDS) {
    this.#maxIds = maxIds;
  }

  has(id: string): boolean {
    return this.#digests.has(id);
  }

  digest(id: string): number | undefined {
    return this.#digests.get(id);
  }

  /** Ids remembered, oldest first. */
  ids(): IterableIterator<string> {
    return this.#digests.keys();
  }

  record(id: string, digest: number): void {
    this.#digests.delete(id);
    this.#digests.set(id, digest);
    if (this.#digests.size > this.#maxIds) {
      const oldest = this.#digests.keys().next();
      if (oldest.done !== true) this.#digests.delete(oldest.value);
    }
    this.lastId = id;
    this.hadIds = true;
  }
}

/** Options of `StreamCheck`. */
export interface StreamCheckOptions {
  /** The `Last-Event-ID` sent; undefined for a fresh stream (a POST answer or a GET without cursor). */
  cursor?: string | undefined;
  /**
   * A fresh stream whose first data event has no id is a silent fallback:
   * set when the session had JSON answers or id-carrying streams before.
   * Default false.
   */
  expectIds?: boolean;
  /** How many id-only events a replay-or-fork decision may wait for a data event. Default 8. */
  maxUndecidedEvents?: number;
}

type State =
  | { readonly t: 'verifying' }
  | { readonly t: 'undecided'; readonly tentative: StreamFinding; readonly waited: number }
  | { readonly t: 'open' }
  | { readonly t: 'failed'; readonly finding: StreamFinding };

/**
 * Checks one response stream event by event against what the client already
 * holds (DESIGN §1 structural signals). Pure: no I/O, no clock.
 *
 * A resumed stream (one with a `cursor`) starts `verifying`: the caller holds
 * bytes back until `verified` is true, so the first resumed event reaches the
 * client only after it passed. Accepted events are applied to the history by
 * `commit()`, which the caller runs once the events were delivered.
 *
 * The server may open a resumed stream with a resume acknowledgment
 * (`event: resume`, `id:` the cursor, `data:` `{"verdict","stream","next_seq"}`;
 * `@tether/protocol` `encodeResumeAck`): its resume point, not an event. It
 * is accepted when its id is the cursor and its data is well formed, says
 * `resumed`, names the cursor's stream (Tether ids) and, once the first event
 * arrives, that event's seq. Any other event that repeats the cursor's id is
 * a replay, the bare `id: <cursor>` with empty data included.
 */
export class StreamCheck {
  readonly #history: StreamHistory;
  readonly #cursor: string | undefined;
  readonly #expectIds: boolean;
  readonly #maxUndecided: number;
  #state: State;
  #last: string | undefined;
  #sawData = false;
  #accepted = 0;
  #pending: Array<readonly [string, number]> = [];
  /** Nothing but the resume acknowledgment (and retry hints) has arrived on this resumed stream. */
  #ackOnly = true;
  /** The accepted acknowledgment of this resumed stream, until the first event is checked against it. */
  #ack: { readonly nextSeq: number } | undefined;
  #acked = false;

  constructor(history: StreamHistory, options: StreamCheckOptions = {}) {
    this.#history = history;
    this.#cursor = options.cursor;
    this.#expectIds = options.expectIds ?? false;
    this.#maxUndecided = options.maxUndecidedEvents ?? 8;
    this.#last = options.cursor ?? history.lastId;
    this.#state = options.cursor === undefined ? { t: 'open' } : { t: 'verifying' };
  }

  /** True once the first resumed event passed (always true for a fresh stream). */
  get verified(): boolean {
    return this.#state.t === 'open';
  }

  /**
   * True while a resumed stream has carried nothing but its resume
   * acknowledgment (and retry hints): those may reach the client at once.
   * The SDK client keeps only cursors it saw on the current response;
   * holding the acknowledgment back and then losing the connection would
   * make it reconnect without `Last-Event-ID` and never resume the stream.
   */
  get ackOnly(): boolean {
    return this.#state.t === 'verifying' && this.#ackOnly;
  }

  /** True once this resumed stream's acknowledgment was accepted (its id is the cursor). */
  get acknowledged(): boolean {
    return this.#acked;
  }

  /** The finding that failed this stream, if any. */
  get finding(): StreamFinding | undefined {
    return this.#state.t === 'failed' ? this.#state.finding : undefined;
  }

  /** Checks the next message. Returns a finding when the stream must be aborted (and keeps returning it). */
  push(m: SseMessage): StreamFinding | undefined {
    const s = this.#state;
    if (s.t === 'failed') return s.finding;
    const position: ViolationPosition = this.#accepted === 0 ? 'first' : 'within';
    const id = m.id === '' ? undefined : m.id;
    if (s.t === 'verifying' && isResumeAck(m)) return this.#acknowledge(id, m.data);
    if (id !== undefined || m.data !== '') this.#ackOnly = false;
    if (id === undefined) {
      // Retry hints, event-type-only blocks and empty data carry nothing to
      // check (the SDK skips empty data too).
      if (m.data === '') return undefined;
      const hadIds = this.#history.hadIds || this.#accepted > 0 || this.#cursor !== undefined;
      if (hadIds || (!this.#sawData && this.#expectIds)) {
        return this.#fail({
          code: ResumeViolationCode.silentFallback,
          reason: hadIds
            ? 'an event without an id arrived on a stream that had ids; it can never be resumed past'
            : 'an SSE stream without ids followed JSON answers or id-carrying streams on the same session',
          position,
          previousEventId: this.#last,
        });
      }
      this.#sawData = true;
      return undefined;
    }
    this.#sawData ||= m.data !== '';
    if (s.t === 'verifying' && id === this.#cursor && m.data === '') {
      // What Tether gateways sent before the acknowledgment frame: seen from
      // the client, the first id after the resume does not exceed the cursor.
      return this.#fail({
        code: ResumeViolationCode.replayFromZero,
        reason: `the stream repeated the cursor's id on an empty ${m.event ?? 'message'} event, a replay (a resume point is an \`event: resume\` acknowledgment)`,
        position,
        eventId: id,
        previousEventId: this.#cursor,
        expectedEventId: successorOf(shapeOf(id)),
      });
    }
    if (s.t === 'undecided') return this.#decideUndecided(s, id, m.data);
    const verdict = this.#judge(id, m.data, position) ?? this.#checkAnnounced(id, position);
    if (verdict !== undefined) return verdict;
    this.#accept(id, m.data);
    return undefined;
  }

  /** The stream ended. A replay-or-fork decision still waiting for data becomes final. */
  end(): StreamFinding | undefined {
    const s = this.#state;
    if (s.t === 'undecided') return this.#fail(s.tentative);
    return this.finding;
  }

  /** Applies the events accepted so far to the history (call after delivering them). Returns their ids. */
  commit(): string[] {
    const ids: string[] = [];
    for (const [id, digest] of this.#pending) {
      this.#history.record(id, digest);
      ids.push(id);
    }
    if (ids.length > 0 && this.#cursor !== undefined) this.#history.resumed = true;
    this.#pending = [];
    return ids;
  }

  // The resume acknowledgment, while the stream is still being verified.
  #acknowledge(id: string | undefined, data: string): StreamFinding | undefined {
    const cursor = this.#cursor as string;
    const base = { position: 'first' as const, eventId: id, previousEventId: cursor };
    const malformed = (reason: string): StreamFinding => this.#fail({ ...base, code: ResumeViolationCode.malformedAck, reason });
    if (id === undefined) return malformed('the resume acknowledgment (event: resume) has no id; it must repeat the cursor');
    if (this.#acked) return malformed('a second resume acknowledgment arrived before the first event');
    if (id !== cursor) {
      const from = shapeOf(cursor);
      const to = shapeOf(id);
      const foreign = foreignReason(from, to);
      const step = stepBetween(from, to);
      const named = `the resume acknowledgment names ${id}, not the cursor ${cursor}`;
      if (foreign === undefined && step !== undefined && step < 0) {
        return this.#fail({ ...base, code: ResumeViolationCode.replayFromZero, reason: `${named}: the server resumed from an earlier point` });
      }
      if (foreign === undefined && step !== undefined && step > 0) {
        return this.#fail({ ...base, code: ResumeViolationCode.gap, reason: `${named}: the server resumed ${step} event(s) past it`, expectedEventId: cursor });
      }
      return this.#fail({ ...base, code: ResumeViolationCode.fork, reason: `${named}${foreign === undefined ? '' : `: ${foreign}`}`, expectedEventId: cursor });
    }
    const ack = parseResumeAck(data);
    if (!ack.ok) return malformed(`the resume acknowledgment's data is malformed: ${ack.reason}`);
    const { verdict, stream, next_seq: nextSeq } = ack.value;
    if (verdict !== ResumeVerdict.resumed) {
      return this.#fail({ ...base, code: ResumeViolationCode.explicitRefusal, verdict, reason: `the resume acknowledgment says ${verdict}, not resumed` });
    }
    const at = shapeOf(cursor);
    if (at.kind === 'tether' && stream !== at.id.stream) {
      return this.#fail({ ...base, code: ResumeViolationCode.fork, reason: `the resume acknowledgment names stream ${stream}, the cursor's stream is ${at.id.stream}` });
    }
    this.#acked = true;
    this.#ack = { nextSeq };
    return undefined;
  }

  // The first event after an acknowledgment carries the seq it announced,
  // when the id format has a seq (Tether and numeric ids).
  #checkAnnounced(id: string, position: ViolationPosition): StreamFinding | undefined {
    const ack = this.#ack;
    if (ack === undefined) return undefined;
    this.#ack = undefined;
    const seq = seqOf(shapeOf(id));
    if (seq === undefined || seq === ack.nextSeq) return undefined;
    return this.#fail({
      code: ResumeViolationCode.malformedAck,
      reason: `the resume acknowledgment announced next_seq ${ack.nextSeq}, the stream went on with seq ${seq}`,
      position,
      eventId: id,
      previousEventId: this.#cursor,
    });
  }

  #judge(id: string, data: string, position: ViolationPosition): StreamFinding | undefined {
    const prev = this.#last;
    if (prev === undefined) return undefined;
    const from = shapeOf(prev);
    const to = shapeOf(id);
    const base = { position, eventId: id, previousEventId: prev, expectedEventId: successorOf(from) };
    const foreign = foreignReason(from, to);
    if (foreign !== undefined) {
      return this.#fail({ ...base, code: ResumeViolationCode.fork, reason: `${foreign}: another log answered` });
    }
    const step = stepBetween(from, to);
    if (step === undefined) {
      // Opaque ids: only freshness can be checked.
      return this.#seen(id) === undefined ? undefined : this.#replayOrFork(id, data, base);
    }
    if (step === 1) return undefined;
    if (step > 1) {
      const fresh = this.#cursor === undefined && !this.#history.resumed;
      if (to.kind === 'numeric' && (fresh || this.#history.sparse)) {
        this.#history.sparse = true;
        return undefined;
      }
      return this.#fail({
        ...base,
        code: ResumeViolationCode.gap,
        reason: `${step - 1} event(s) between ${prev} and ${id} are missing`,
      });
    }
    return this.#replayOrFork(id, data, base);
  }

  // An id at or below the cursor. Same id and same data: the server sent
  // history again (replay). Same id, other data: the id names another event,
  // so another log answered (fork). An id-only event cannot tell them apart,
  // so the decision waits for the next event that carries data.
  #replayOrFork(id: string, data: string, base: Omit<StreamFinding, 'code' | 'reason'>): StreamFinding | undefined {
    const known = this.#seen(id);
    const replay: StreamFinding = {
      ...base,
      code: ResumeViolationCode.replayFromZero,
      reason: `the stream went back to ${id}, at or below the cursor ${base.previousEventId ?? '?'}`,
    };
    if (known === undefined) {
      // A Tether id names its event twice over, by seq and by pos: the same
      // seq at another pos is another log of the same epoch.
      const sibling = this.#tetherSibling(id);
      if (sibling === undefined) return this.#fail(replay);
      return this.#fail({ ...base, code: ResumeViolationCode.fork, reason: `seq of ${id} was delivered before as ${sibling}` });
    }
    if (known !== digestOf(data)) {
      return this.#fail({ ...base, code: ResumeViolationCode.fork, reason: `id ${id} now names a different event than the one delivered` });
    }
    if (data !== '') return this.#fail(replay);
    this.#state = { t: 'undecided', tentative: replay, waited: 0 };
    return undefined;
  }

  #decideUndecided(s: Extract<State, { t: 'undecided' }>, id: string, data: string): StreamFinding | undefined {
    const known = this.#seen(id);
    if (known !== undefined && known !== digestOf(data)) {
      return this.#fail({
        ...s.tentative,
        code: ResumeViolationCode.fork,
        eventId: id,
        reason: `id ${id} now names a different event than the one delivered`,
      });
    }
    if (data !== '' || s.waited + 1 >= this.#maxUndecided) return this.#fail(s.tentative);
    this.#state = { ...s, waited: s.waited + 1 };
    return undefined;
  }

  #tetherSibling(id: string): string | undefined {
    const shape = shapeOf(id);
    if (shape.kind !== 'tether') return undefined;
    const prefix = `${shape.id.epoch}-${shape.id.stream}-${shape.id.seq}-`;
    for (const seen of this.#history.ids()) if (seen.startsWith(prefix)) return seen;
    for (const [seen] of this.#pending) if (seen.startsWith(prefix)) return seen;
    return undefined;
  }

  #seen(id: string): number | undefined {
    const d = this.#history.digest(id);
    if (d !== undefined) return d;
    for (const [pid, pd] of this.#pending) if (pid === id) return pd;
    return undefined;
  }

  #accept(id: string, data: string): void {
    this.#pending.push([id, digestOf(data)]);
    this.#accepted += 1;
    this.#last = id;
    if (this.#state.t === 'verifying') this.#state = { t: 'open' };
  }

  #fail(finding: StreamFinding): StreamFinding {
    this.#state = { t: 'failed', finding };
    return finding;
  }
}
