import { decodeEventId, EndReason, EventKind } from '@tether/protocol';
import { isTetherSdkError, SDK_GET_STREAM, TetherEventStore, TetherSdkError, TetherSdkErrorCode } from '@tether/sdk';
import { isSessionLogError } from '@tether/session-log';
import type { SessionRecord } from '@tether/session-log';
import { errorText, preview } from './fuzz-kit.js';
import { deriveCursor } from './http-arbitraries.js';
import { replayProblem } from './sdk-checks.js';
import type { ReplayOutcome } from './sdk-checks.js';
import { materialize, STORE_SESSION } from './sdk-arbitraries.js';
import type { CursorChoice, JsonRpcIdValue, StoreCommand, StoreProgram, StoreRef, StoreStep } from './sdk-arbitraries.js';
import { LIMITS } from './sdk-stack.js';
import type { SdkStack } from './sdk-stack.js';

/**
 * A model of what `TetherEventStore` writes (README, "The EventStore
 * alone"), and the runner of one case of the EventStore property: the
 * program's steps go to the real stores and to the model; every answer, the
 * log's content and every replay are compared with the model.
 *
 * - `storeEvent` on a POST stream: the first call opens a Tether stream
 *   with a `prime` naming the stream's requests (the SDK's priming event
 *   `{}` *is* that prime); every other message is an `event`; the response
 *   that answers the last owed request (the first response, when the store
 *   was not told the requests) is followed by `end complete`, and the SDK
 *   name is then free again; a call after that response, in the same burst,
 *   is `unknown_stream`. On the GET stream (`0`, shared by every instance
 *   of the session) `{}` is a `prime`, anything else an `event`; when both
 *   instances store there at once, every event lands once, each instance's
 *   in its call order (or is refused `writer_conflict` once its retries ran
 *   out). A message over `maxPayloadBytes` is `payload_too_large` and not
 *   appended.
 * - `replayEventsAfter(cursor)`: a cursor naming an event of this session
 *   whose successor is retained gives exactly the `event`s after it to the
 *   stream's end (also those stored after the replay began), in order, and
 *   resolves with the SDK's stream id; anything else is an explicit error:
 *   `resume_refused` with the verdict (malformed, epoch_mismatch for another
 *   session's cursor, truncated for a purged one, ahead/diverged/truncated
 *   for one that names no event), or `unsupported` for a GET-stream cursor.
 *   A purge of the stream while the replay runs may turn it into a
 *   truncation refusal or `stream_truncated` after a gap-free prefix.
 */

type Kind = 'prime' | 'event' | 'end';
interface ModelEvent {
  readonly seq: number;
  readonly kind: Kind;
  /** JSON text of the payload (`''` for a GET prime and an end). */
  readonly payload: string;
  id: string | undefined;
}

interface ModelStream {
  readonly session: 'A' | 'B';
  /** `0` for the GET stream; a POST stream's is learned from the first id a call resolves with. */
  tether: string | undefined;
  readonly openedBy: StoreRef | undefined;
  readonly sdkName: string | undefined;
  /** Request ids still owed, by `idKey`; undefined: the store was not told (ends at the first response). */
  readonly owed: Map<string, JsonRpcIdValue> | undefined;
  readonly events: ModelEvent[];
  /** The completing response was stored: the SDK name is forgotten once that call settles. */
  ending: boolean;
  purgedThrough: number;
  purges: number;
}

type Expected =
  | { readonly t: 'resolve'; readonly stream: ModelStream; readonly seq: number }
  | { readonly t: 'reject'; readonly code: 'unknown_stream' | 'payload_too_large' };

type ReplayExpectation =
  | { readonly t: 'refused'; readonly verdicts: readonly string[] }
  | { readonly t: 'unsupported'; readonly stream: ModelStream }
  | { readonly t: 'suffix'; readonly stream: ModelStream; readonly afterSeq: number; readonly sdkStreamId: string };

interface PendingReplay {
  /** `replayEventsAfter`, or `resume()` now and its `events()` read only after the case's last step. */
  readonly how: 'replay' | 'resume';
  readonly store: StoreRef;
  readonly cursor: string;
  readonly expect: ReplayExpectation;
  readonly purgesAtStart: number;
  readonly sends: { id: string; message: unknown }[];
  /** Starts (a deferred read) or joins (a replay) the reading; `abort` ends a read that hangs. */
  readonly settle: () => Promise<ReplayOutcome>;
  readonly abort: AbortController;
}

/** `idKey` of @tether/sdk's json-rpc.ts: `1` and `"1"` are different requests. */
const idKey = (id: JsonRpcIdValue): string => (typeof id === 'number' ? `n:${id}` : `s:${id}`);

/** `responseIdOf` of @tether/sdk's json-rpc.ts. */
function responseIdOf(m: Record<string, unknown>): JsonRpcIdValue | undefined {
  if (m['method'] !== undefined || !('result' in m || 'error' in m)) return undefined;
  const id = m['id'];
  return typeof id === 'string' || (typeof id === 'number' && Number.isFinite(id)) ? id : undefined;
}

export interface StoreCaseResult {
  readonly problems: string[];
  readonly notes: string[];
}

export interface StoreCaseOptions {
  /** A good call, after every bad one: throws when the store no longer serves. */
  readonly afterBad: () => Promise<void>;
  readonly answerMs: number;
}

/** One case: two fresh sessions, three stores (A on both instances, B on the first), the program, then every check. */
export async function runStoreCase(stack: SdkStack, program: StoreProgram, options: StoreCaseOptions): Promise<StoreCaseResult> {
  const run = new StoreCase(stack, program, options);
  await run.open();
  return run.run();
}

class StoreCase {
  readonly #stack: SdkStack;
  readonly #program: StoreProgram;
  readonly #options: StoreCaseOptions;
  readonly problems: string[] = [];
  readonly notes: string[] = [];
  #sessions!: Record<'A' | 'B', SessionRecord>;
  #stores!: readonly [TetherEventStore, TetherEventStore, TetherEventStore];
  readonly #streams: ModelStream[] = [];
  readonly #get = new Map<'A' | 'B', ModelStream>();
  /** Per store, the POST streams it writes now, by SDK name. */
  readonly #open: readonly [Map<string, ModelStream>, Map<string, ModelStream>, Map<string, ModelStream>] = [new Map(), new Map(), new Map()];
  readonly #replays: PendingReplay[] = [];
  /** The stream the latest replay or resume reads, if its cursor named one. */
  #recent: ModelStream | undefined;
  readonly #trace: string[] = [];

  constructor(stack: SdkStack, program: StoreProgram, options: StoreCaseOptions) {
    this.#stack = stack;
    this.#program = program;
    this.#options = options;
  }

  async open(): Promise<void> {
    const [one, two] = this.#stack.instances;
    const principal = 'digest-of-fuzz';
    this.#sessions = { A: await one.log.createSession(principal), B: await one.log.createSession(principal) };
    const requestsOf = (id: string) => this.#program.owed[id];
    const store = (i: typeof one, s: SessionRecord) => new TetherEventStore({ log: i.log, session: s, presence: i.presence, requestsOf, writerWatch: { checkMs: 100 } });
    this.#stores = [store(one, this.#sessions.A), store(two, this.#sessions.A), store(one, this.#sessions.B)];
    for (const session of ['A', 'B'] as const) {
      const get: ModelStream = { session, tether: '0', openedBy: undefined, sdkName: undefined, owed: undefined, events: [], ending: false, purgedThrough: 0, purges: 0 };
      this.#get.set(session, get);
      this.#streams.push(get);
    }
  }

  async run(): Promise<StoreCaseResult> {
    for (const command of this.#program.commands) {
      this.#trace.push(preview(command, 400));
      await this.#command(command);
      if (this.problems.length > 0) break;
    }
    // Also after a problem: every replay must reach an end, or it outlives the case.
    await this.#finish();
    await this.#sync(() => true);
    await this.#judgeReplays();
    return this.#result();
  }

  #result(): StoreCaseResult {
    if (this.problems.length > 0) this.problems.push(`sessions A ${this.#sessions.A.sessionId} (epoch ${this.#sessions.A.epoch}), B ${this.#sessions.B.sessionId} (epoch ${this.#sessions.B.epoch})`, 'steps run:', ...this.#trace.map((t) => `  ${t}`));
    return { problems: this.problems, notes: this.notes };
  }

  async #command(command: StoreCommand): Promise<void> {
    switch (command.t) {
      case 'store':
        return this.#steps([command]);
      case 'burst':
        return this.#steps(command.steps);
      case 'race':
        return this.#race(command.steps);
      case 'replay':
        return this.#replay('replay', command.store, command.cursor);
      case 'resume':
        return this.#replay('resume', command.store, command.cursor);
      case 'purge':
        return this.#purge(command.session, command.recent ? this.#recent : undefined, command.pick, command.keep);
    }
  }

  /** Plans every step on the model in call order, issues them without an await in between, then compares each answer. */
  async #steps(steps: readonly StoreStep[]): Promise<void> {
    const planned = steps.map((step) => ({ step, message: this.#message(step), expected: undefined as Expected | undefined }));
    for (const p of planned) p.expected = this.#plan(p.step, p.message);
    const answers = await Promise.allSettled(planned.map((p) => this.#stores[p.step.store].storeEvent(p.step.stream.t === 'get' ? SDK_GET_STREAM : p.step.stream.name, p.message)));
    // The store forgets an SDK name once its completing call settled.
    for (const open of this.#open) for (const [name, s] of open) if (s.ending) open.delete(name);
    let bad = false;
    for (const [i, p] of planned.entries()) {
      const answer = answers[i]!;
      const where = `storeEvent #${i} of ${planned.length} (store ${p.step.store}, ${p.step.stream.t === 'get' ? SDK_GET_STREAM : p.step.stream.name}, ${preview(p.message, 160)})`;
      const expected = p.expected!;
      if (answer.status === 'rejected') bad = true;
      if (expected.t === 'reject') {
        const ok = answer.status === 'rejected' && (isTetherSdkError(answer.reason, 'unknown_stream') || isSessionLogError(answer.reason, 'payload_too_large')) && (answer.reason as { code: string }).code === expected.code;
        this.notes.push(`store ${answer.status === 'rejected' ? String((answer.reason as { code?: string }).code) : 'resolved'}`);
        if (!ok) this.problems.push(`${where}: expected ${expected.code}, got ${answer.status === 'rejected' ? errorText(answer.reason) : `an id ${answer.value}`}`);
        continue;
      }
      if (answer.status === 'rejected') {
        this.problems.push(`${where}: expected an id (seq ${expected.seq}), got ${errorText(answer.reason)}`);
        continue;
      }
      this.notes.push(`store ${p.step.stream.t} ${expected.stream.events[expected.seq - 1]!.kind}${expected.stream.events[expected.seq]?.kind === 'end' ? '+end' : ''}`);
      this.#learn(where, expected.stream, expected.seq, answer.value);
    }
    if (bad) await this.#options.afterBad();
  }

  /**
   * Stores on session A's GET stream from both instances at once. The model cannot know who wins
   * each seq; it checks that every call resolved with a seq of its own (or was refused explicitly:
   * `payload_too_large`, or `writer_conflict` once its retries ran out), that the log then holds
   * exactly the resolved events, each at its seq, each instance's in its call order, then takes
   * the log's order.
   */
  async #race(steps: readonly StoreStep[]): Promise<void> {
    const get = this.#get.get('A')!;
    const before = get.events.length;
    const messages = steps.map((step) => this.#message(step));
    const answers = await Promise.allSettled(steps.map((step, i) => this.#stores[step.store].storeEvent(SDK_GET_STREAM, messages[i]!)));
    const landed = new Map<number, { step: number; payload: string }>();
    let bad = false;
    for (const [i, answer] of answers.entries()) {
      const where = `racing storeEvent #${i} of ${steps.length} (store ${steps[i]!.store}, ${preview(messages[i], 120)})`;
      const tooLarge = Buffer.byteLength(JSON.stringify(messages[i]), 'utf8') > LIMITS.maxPayloadBytes;
      if (answer.status === 'rejected') {
        bad = true;
        this.notes.push(`race ${String((answer.reason as { code?: string }).code)}`);
        if (tooLarge ? !isSessionLogError(answer.reason, 'payload_too_large') : !isSessionLogError(answer.reason, 'writer_conflict')) this.problems.push(`${where}: ${errorText(answer.reason)}`);
        continue;
      }
      const decoded = decodeEventId(answer.value);
      if (tooLarge || !decoded.ok || decoded.value.epoch !== this.#sessions.A.epoch || decoded.value.stream !== '0' || decoded.value.seq <= before || landed.has(decoded.value.seq)) {
        this.problems.push(`${where}: resolved with ${answer.value}, expected ${tooLarge ? 'payload_too_large' : `a seq of its own after ${before} on A's GET stream`}`);
        continue;
      }
      this.notes.push('race stored');
      landed.set(decoded.value.seq, { step: i, payload: Object.keys(messages[i]!).length === 0 ? '' : JSON.stringify(messages[i]) });
    }
    if (this.problems.length > 0) return;
    let events;
    try {
      events = await this.#stack.instances[0].log.readPage(this.#sessions.A.sessionId, '0', before, 10_000);
    } catch (err) {
      this.problems.push(`reading A's GET stream after the race: ${errorText(err)}`);
      return;
    }
    const shown = events.map((e) => `${e.seq}:${landed.get(e.seq)?.step ?? '?'}`).join(' ');
    if (events.length !== landed.size || events.some((e) => landed.get(e.seq)?.payload !== Buffer.from(e.payload).toString('utf8'))) {
      this.problems.push(`after the race, A's GET stream holds [${shown}] (seq:call), the calls resolved with seqs [${[...landed.keys()].join(' ')}]`);
      return;
    }
    for (const store of [0, 1]) {
      const order = events.map((e) => landed.get(e.seq)!.step).filter((i) => steps[i]!.store === store);
      if (order.some((n, k) => k > 0 && n < order[k - 1]!)) this.problems.push(`after the race, instance ${store + 1}'s events are out of call order: [${shown}] (seq:call)`);
    }
    for (const e of events) {
      const seq = push(get, Object.keys(messages[landed.get(e.seq)!.step]!).length === 0 ? 'prime' : 'event', landed.get(e.seq)!.payload);
      get.events[seq - 1]!.id = e.id;
    }
    if (bad) await this.#options.afterBad();
  }

  #message(step: StoreStep): Record<string, unknown> {
    return materialize(step.message, step.stream.t === 'post' ? this.#program.owed[step.stream.name] : undefined);
  }

  /** What the store does with one call, applied to the model; returns what the call should answer. */
  #plan(step: StoreStep, message: Record<string, unknown>): Expected {
    const session = STORE_SESSION[step.store];
    const payload = JSON.stringify(message);
    const tooLarge = Buffer.byteLength(payload, 'utf8') > LIMITS.maxPayloadBytes;
    const priming = Object.keys(message).length === 0;
    if (step.stream.t === 'get') {
      const get = this.#get.get(session)!;
      if (tooLarge) return { t: 'reject', code: 'payload_too_large' };
      return { t: 'resolve', stream: get, seq: push(get, priming ? 'prime' : 'event', priming ? '' : payload) };
    }
    const open = this.#open[step.store];
    let stream = open.get(step.stream.name);
    if (stream === undefined) {
      const requests = this.#program.owed[step.stream.name];
      stream = {
        session,
        tether: undefined,
        openedBy: step.store,
        sdkName: step.stream.name,
        owed: requests === undefined ? undefined : new Map(requests.map((id) => [idKey(id), id] as const)),
        events: [],
        ending: false,
        purgedThrough: 0,
        purges: 0,
      };
      this.#streams.push(stream);
      open.set(step.stream.name, stream);
      const prime = push(stream, 'prime', JSON.stringify(requests === undefined ? {} : { requests }));
      if (priming) return { t: 'resolve', stream, seq: prime };
    } else if (stream.ending) {
      return { t: 'reject', code: 'unknown_stream' };
    }
    const seq = tooLarge ? undefined : push(stream, 'event', payload);
    const answered = responseIdOf(message);
    let completes = false;
    if (answered !== undefined) {
      if (stream.owed === undefined) completes = true;
      else {
        stream.owed.delete(idKey(answered));
        completes = stream.owed.size === 0;
      }
    }
    if (completes) {
      stream.ending = true;
      push(stream, 'end', '');
    }
    return seq === undefined ? { t: 'reject', code: 'payload_too_large' } : { t: 'resolve', stream, seq };
  }

  /** An id a call resolved with: it must be the planned event's (this session's epoch, its stream, its seq). */
  #learn(where: string, stream: ModelStream, seq: number, id: string): void {
    const decoded = decodeEventId(id);
    const epoch = this.#sessions[stream.session].epoch;
    if (!decoded.ok || decoded.value.epoch !== epoch || decoded.value.seq !== seq || (stream.tether !== undefined && decoded.value.stream !== stream.tether)) {
      this.problems.push(`${where}: resolved with ${JSON.stringify(id)}, expected an id of session ${stream.session} (epoch ${epoch}), stream ${stream.tether ?? '(new)'}, seq ${seq}`);
      return;
    }
    stream.tether ??= decoded.value.stream;
    if (this.#streams.some((s) => s !== stream && s.session === stream.session && s.tether === stream.tether)) {
      this.problems.push(`${where}: resolved with ${id}, on a stream the model holds as another one (two SDK streams share one Tether stream)`);
    }
    const event = stream.events[seq - 1]!;
    event.id = id;
  }

  /**
   * Reads every retained event of the streams that `which` selects from the
   * log and compares them with the model (seq, kind, payload, end reason),
   * learning the ids no call returned (primes opened by a message, ends).
   */
  async #sync(which: (s: ModelStream) => boolean): Promise<void> {
    const log = this.#stack.instances[0].log;
    for (const stream of this.#streams) {
      if (stream.tether === undefined || !which(stream)) continue;
      const sessionId = this.#sessions[stream.session].sessionId;
      let events;
      try {
        events = await log.readPage(sessionId, stream.tether, stream.purgedThrough, 10_000);
      } catch (err) {
        this.problems.push(`reading stream ${stream.tether} of session ${stream.session} after seq ${stream.purgedThrough}: ${errorText(err)}`);
        continue;
      }
      const want = stream.events.filter((e) => e.seq > stream.purgedThrough);
      const shown = (e: { seq: number; kind: string; payload: string }) => `${e.seq} ${e.kind} ${preview(e.payload, 80)}`;
      const got = events.map((e) => ({ seq: e.seq, kind: e.kind as string, payload: Buffer.from(e.payload).toString('utf8'), endReason: e.endReason, id: e.id }));
      const same = got.length === want.length && got.every((g, i) => g.seq === want[i]!.seq && g.kind === want[i]!.kind && g.payload === want[i]!.payload && (g.kind !== EventKind.end || g.endReason === EndReason.complete));
      if (!same) {
        this.problems.push(`stream ${stream.tether} of session ${stream.session} (${stream.sdkName ?? 'GET'}) holds [${got.map(shown).join(' | ')}], the model [${want.map(shown).join(' | ')}]`);
        continue;
      }
      for (const [i, g] of got.entries()) {
        const e = want[i]!;
        if (e.id !== undefined && e.id !== g.id) this.problems.push(`stream ${stream.tether}: the log has ${g.id} at seq ${g.seq}, a call answered ${e.id}`);
        e.id = g.id;
      }
    }
  }

  /**
   * `replay`: the SDK's resume path, `replayEventsAfter`, left running. `resume`: what the router
   * does, `resume()` (the classification) now, its `events()` read only once the case's steps
   * are all done, so that stores and purges fall between the two.
   */
  async #replay(how: 'replay' | 'resume', ref: StoreRef, choice: CursorChoice): Promise<void> {
    await this.#sync((s) => s.events.some((e) => e.id === undefined));
    const own = STORE_SESSION[ref];
    const other = own === 'A' ? 'B' : 'A';
    const idsOf = (session: 'A' | 'B'): string[] => {
      const ids = this.#streams.filter((s) => s.session === session).flatMap((s) => s.events.flatMap((e) => (e.id === undefined ? [] : [e.id])));
      return ids.length > 0 ? ids : [`${this.#sessions[session].epoch}-0-1-1`];
    };
    const ownIds = idsOf(own);
    const cursor =
      choice.t === 'free'
        ? choice.value
        : choice.t === 'own'
          ? ownIds[choice.pick % ownIds.length]!
          : deriveCursor(choice.recipe, { victim: { epoch: this.#sessions[own].epoch, ids: idsOf(own) }, source: { epoch: this.#sessions[other].epoch, ids: idsOf(other) } });
    const store = this.#stores[ref];
    const { expect, stream, sdkName } = this.#expectReplay(ref, cursor);
    this.#recent = stream ?? this.#recent;
    const named = await store.getStreamIdForEventId(cursor);
    if (named !== sdkName) this.problems.push(`getStreamIdForEventId(${JSON.stringify(cursor)}) on store ${ref}: ${JSON.stringify(named)}, expected ${JSON.stringify(sdkName)}`);
    const sends: { id: string; message: unknown }[] = [];
    const abort = new AbortController();
    const base = { how, store: ref, cursor, expect, purgesAtStart: stream?.purges ?? 0, sends, abort };
    if (how === 'replay') {
      const settled = store
        .replayEventsAfter(cursor, {
          send: async (id, message) => {
            sends.push({ id, message });
          },
        })
        .then(
          (value) => ({ ok: true as const, value }),
          (err: unknown) => ({ ok: false as const, err }),
        );
      this.#replays.push({ ...base, settle: () => settled });
      return;
    }
    const result = await store.resume(cursor);
    if (result.verdict !== 'resumed') {
      if (result.reason.trim() === '') this.problems.push(`resume(${JSON.stringify(cursor)}): refused ${result.verdict} without a reason`);
      // As replayEventsAfter would throw it: one judge for both.
      const err = new TetherSdkError(TetherSdkErrorCode.resumeRefused, `resume refused (${result.verdict}): ${result.reason}`, { verdict: result.verdict });
      this.#replays.push({ ...base, settle: async () => ({ ok: false, err }) });
      return;
    }
    if (result.accepted.stream === '0') {
      // The GET stream never ends: not read (the router streams it); its cursor was accepted.
      if (result.sdkStreamId !== SDK_GET_STREAM) this.problems.push(`resume(${JSON.stringify(cursor)}): accepted on the GET stream as ${JSON.stringify(result.sdkStreamId)}`);
      const err = new TetherSdkError(TetherSdkErrorCode.unsupported, 'a GET-stream cursor (not read here)');
      this.#replays.push({ ...base, settle: async () => ({ ok: false, err }) });
      return;
    }
    const settle = async (): Promise<ReplayOutcome> => {
      try {
        for await (const event of result.events(abort.signal)) {
          if (event.kind === EventKind.event) sends.push({ id: event.id, message: JSON.parse(Buffer.from(event.payload).toString('utf8')) });
        }
        return { ok: true, value: result.sdkStreamId };
      } catch (err) {
        return { ok: false, err };
      }
    };
    this.#replays.push({ ...base, settle });
  }

  #expectReplay(ref: StoreRef, cursor: string): { expect: ReplayExpectation; stream: ModelStream | undefined; sdkName: string | undefined } {
    const decoded = decodeEventId(cursor);
    if (!decoded.ok) return { expect: { t: 'refused', verdicts: ['malformed'] }, stream: undefined, sdkName: undefined };
    const ownStream = (tether: string) => this.#streams.find((s) => s.session === STORE_SESSION[ref] && s.tether === tether && s.openedBy === ref);
    const sdkName = decoded.value.stream === '0' ? SDK_GET_STREAM : (ownStream(decoded.value.stream)?.sdkName ?? decoded.value.stream);
    const session = this.#sessions[STORE_SESSION[ref]];
    if (decoded.value.epoch !== session.epoch) return { expect: { t: 'refused', verdicts: ['epoch_mismatch'] }, stream: undefined, sdkName };
    for (const stream of this.#streams) {
      if (stream.session !== STORE_SESSION[ref]) continue;
      const event = stream.events.find((e) => e.id === cursor);
      if (event === undefined) continue;
      const held = (seq: number) => seq > stream.purgedThrough && seq <= stream.events.length;
      if (!held(event.seq) && !held(event.seq + 1)) return { expect: { t: 'refused', verdicts: ['truncated'] }, stream, sdkName };
      if (stream.tether === '0') return { expect: { t: 'unsupported', stream }, stream, sdkName };
      return { expect: { t: 'suffix', stream, afterSeq: event.seq, sdkStreamId: sdkName }, stream, sdkName };
    }
    // Names no event of this session: some refusal, whichever rule matches first.
    return { expect: { t: 'refused', verdicts: ['ahead', 'diverged', 'truncated'] }, stream: undefined, sdkName };
  }

  async #purge(session: 'A' | 'B', recent: ModelStream | undefined, pick: number, keep: number): Promise<void> {
    if (keep === 0 && recent !== undefined && recent.openedBy !== undefined && recent.sdkName !== undefined && this.#open[recent.openedBy].get(recent.sdkName) === recent) {
      await this.#end(recent.openedBy, recent.sdkName, recent);
    }
    await this.#sync((s) => s.events.some((e) => e.id === undefined));
    const candidates = this.#streams.filter((s) => s.session === session && s.tether !== undefined && s.events.length > s.purgedThrough);
    const stream = recent ?? candidates[pick % Math.max(1, candidates.length)];
    if (stream === undefined || stream.tether === undefined || stream.events.length === stream.purgedThrough) return;
    const ended = stream.events.at(-1)?.kind === 'end';
    // A stream still written keeps its last event (else its writer's expected last sequence no longer holds).
    const kept = ended ? keep : Math.max(1, keep);
    await this.#stack.jsm.streams.purge(this.#stack.streamName, { filter: this.#stack.subjects.log(this.#sessions[stream.session].sessionId, stream.tether), keep: kept });
    stream.purgedThrough = Math.max(stream.purgedThrough, stream.events.length - kept);
    stream.purges += 1;
    this.notes.push(`purge keep ${kept}`);
  }

  /** Ends every POST stream still open (a response for each request it owes), so every replay reaches an end. */
  async #finish(): Promise<void> {
    for (const [ref, open] of this.#open.entries()) {
      for (const [name, stream] of [...open]) await this.#end(ref as StoreRef, name, stream);
    }
  }

  /** Stores a response for each request a POST stream still owes (one, when it was not told): it ends. */
  async #end(ref: StoreRef, name: string, stream: ModelStream): Promise<void> {
    const ids = stream.owed === undefined || stream.owed.size === 0 ? ['fin'] : [...stream.owed.values()];
    for (const id of ids) {
      const step: StoreStep = { t: 'store', store: ref, stream: { t: 'post', name }, message: { t: 'response', id: { free: id }, error: false, result: 'fin' } };
      this.#trace.push(`end: ${preview(step, 200)}`);
      await this.#steps([step]);
    }
  }

  async #judgeReplays(): Promise<void> {
    for (const replay of this.#replays) {
      const bound = new Promise<'hang'>((resolve) => setTimeout(resolve, this.#options.answerMs, 'hang').unref());
      const outcome = await Promise.race([replay.settle(), bound]);
      const where = replay.how === 'replay' ? `replayEventsAfter(${JSON.stringify(replay.cursor)}) on store ${replay.store}` : `resume(${JSON.stringify(replay.cursor)}) on store ${replay.store}, its events read after the last step`;
      if (outcome === 'hang') {
        replay.abort.abort();
        this.problems.push(`${where}: not settled ${this.#options.answerMs} ms after every stream ended (${replay.sends.length} events sent)`);
        continue;
      }
      const problem = this.#judge(replay, outcome);
      if (!outcome.ok) {
        const err = outcome.err as { code?: string; fields?: { verdict?: string } };
        this.notes.push(`${replay.how} ${err.code ?? 'error'}${err.fields?.verdict === undefined ? '' : `/${err.fields.verdict}`}`);
        await this.#options.afterBad();
      } else this.notes.push(`${replay.how} resumed${replay.sends.length === 0 ? ' (nothing left)' : ''}`);
      if (problem !== undefined) this.problems.push(`${where}: ${problem}`);
    }
  }

  #judge(replay: PendingReplay, outcome: ReplayOutcome): string | undefined {
    let { expect } = replay;
    if (expect.t === 'refused' && outcome.ok) {
      // A mutated cursor may name an event stored after the replay began (the next seq at the next
      // position): whether the log held it when the cursor was classified is a race. Then its suffix.
      const later = this.#expectReplay(replay.store, replay.cursor).expect;
      if (later.t === 'suffix' && later.afterSeq > 0) expect = later;
    }
    if (expect.t === 'refused') return replayProblem(expect, outcome, replay.sends);
    // A purge of the stream while the replay ran may make it an explicit truncation.
    const overlap = expect.stream.purges > replay.purgesAtStart;
    if (expect.t === 'unsupported') return replayProblem({ t: 'unsupported', overlap }, outcome, replay.sends);
    const events = expect.stream.events.filter((e) => e.seq > expect.afterSeq && e.kind === 'event');
    return replayProblem({ t: 'suffix', events, sdkStreamId: expect.sdkStreamId, overlap }, outcome, replay.sends);
  }
}

/** Appends a model event; returns its seq. */
function push(stream: ModelStream, kind: Kind, payload: string): number {
  const seq = stream.events.length + 1;
  stream.events.push({ seq, kind, payload, id: undefined });
  return seq;
}
