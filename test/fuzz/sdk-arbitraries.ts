import fc from 'fast-check';
import { cursorRecipe, freeLastEventId } from './http-arbitraries.js';
import type { CursorRecipe } from './http-arbitraries.js';
import { LIMITS } from './sdk-stack.js';

/**
 * Arbitraries of the SDK fuzz suite: programs for the EventStore (stores
 * over several streams and sessions, concurrent bursts, purges, replays
 * from any cursor), for the durable task store (every call of the SDK's
 * TaskStore and TaskMessageQueue with any ids, TTLs and payloads), and
 * questions to a writer's presence subject. Programs name things by index
 * (`pick`), resolved against what exists when the step runs.
 */

// ---- EventStore ------------------------------------------------------------

/** Which store a step goes to: session A on instance 1, session A on instance 2 (another process), session B on instance 1. */
export type StoreRef = 0 | 1 | 2;
export const STORE_SESSION = ['A', 'A', 'B'] as const;

export type JsonRpcIdValue = string | number;

/** A message the SDK hands `storeEvent` (the SDKs pass JSON-RPC messages; the priming event is `{}`). */
export type MessageRecipe =
  | { readonly t: 'priming' }
  | { readonly t: 'notification'; readonly data: unknown }
  | { readonly t: 'response'; readonly id: { readonly owed: number } | { readonly free: JsonRpcIdValue }; readonly error: boolean; readonly result: unknown }
  | { readonly t: 'request'; readonly id: JsonRpcIdValue; readonly method: string }
  | { readonly t: 'object'; readonly value: Readonly<Record<string, unknown>> }
  | { readonly t: 'oversized'; readonly response: boolean };

/** `{ get }`: the SDK's standalone GET stream; `{ post }`: one of a few SDK stream names of that store (reused after a stream ends, as the SDK never does). */
export type StreamRef = { readonly t: 'get' } | { readonly t: 'post'; readonly name: string };

export interface StoreStep {
  readonly t: 'store';
  readonly store: StoreRef;
  readonly stream: StreamRef;
  readonly message: MessageRecipe;
}

export type CursorChoice =
  /** One of the replaying store's session's ids as it is (any stream: primes, events, ends, purged ones). */
  | { readonly t: 'own'; readonly pick: number }
  | { readonly t: 'derived'; readonly recipe: CursorRecipe }
  | { readonly t: 'free'; readonly value: string };

export type StoreCommand =
  | StoreStep
  /** Steps issued without an await in between (what the SDK does when a tool sends notifications concurrently). */
  | { readonly t: 'burst'; readonly steps: readonly StoreStep[] }
  /**
   * Both instances store on session A's GET stream at once: they race for its seqs, and the loser
   * rebuilds its writer and tries again. Which one wins is not defined; each event must land once.
   */
  | { readonly t: 'race'; readonly steps: readonly StoreStep[] }
  /** `replayEventsAfter` (and `getStreamIdForEventId`) on a store, settled at the end of the case: it follows its stream to the end. */
  | { readonly t: 'replay'; readonly store: StoreRef; readonly cursor: CursorChoice }
  /** `resume()` (what the router calls) now; its events are read only after the case's last step. */
  | { readonly t: 'resume'; readonly store: StoreRef; readonly cursor: CursorChoice }
  /**
   * What retention does: keep only the last `keep` events of a stream of a session, or of the stream
   * the latest replay or resume reads (`recent`). `keep` 0 on a POST stream still written ends it
   * first (its owed responses), then takes it whole: max_age after the stream's end. The GET stream
   * keeps at least one.
   */
  | { readonly t: 'purge'; readonly session: 'A' | 'B'; readonly pick: number; readonly recent: boolean; readonly keep: number };

export interface StoreProgram {
  /** The request ids each SDK stream name carries (`requestsOf`); undefined: not told, the stream ends at its first response. */
  readonly owed: Readonly<Record<string, readonly JsonRpcIdValue[] | undefined>>;
  readonly commands: readonly StoreCommand[];
}

/** SDK stream names (the SDK makes UUIDs; any string is a name to the store), one a near miss of its GET stream's. */
export const SDK_STREAM_NAMES = ['p', 'q', '', '_GET_stream '] as const;

const rpcId: fc.Arbitrary<JsonRpcIdValue> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 5 }) },
  { weight: 2, arbitrary: fc.constantFrom('1', '2', 'a', '', 'é', ' 1') },
  { weight: 1, arbitrary: fc.constantFrom(-0, 2 ** 53, 1e21, 0.5, -1) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
);

const jsonData = fc.jsonValue({ maxDepth: 3 });

const message: fc.Arbitrary<MessageRecipe> = fc.oneof(
  { weight: 6, arbitrary: jsonData.map((data) => ({ t: 'notification' as const, data })) },
  { weight: 2, arbitrary: fc.constant({ t: 'priming' as const }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('response' as const),
      id: fc.oneof({ weight: 4, arbitrary: fc.record({ owed: fc.nat() }) }, { weight: 1, arbitrary: fc.record({ free: rpcId }) }),
      error: fc.boolean(),
      result: jsonData,
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('request' as const), id: rpcId, method: fc.constantFrom('sampling/createMessage', 'roots/list', 'ping') }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 8 }), jsonData, { maxKeys: 4 }).map((value) => ({ t: 'object' as const, value })) },
  { weight: 1, arbitrary: fc.boolean().map((response) => ({ t: 'oversized' as const, response })) },
);

const streamRef = (store: StoreRef): fc.Arbitrary<StreamRef> =>
  fc.oneof(
    // The GET stream of session A is written by both instances: they race for its seqs (writer_conflict, retried).
    { weight: store === 1 ? 1 : 2, arbitrary: fc.constant({ t: 'get' as const }) },
    { weight: 5, arbitrary: fc.constantFrom(...SDK_STREAM_NAMES).map((name) => ({ t: 'post' as const, name })) },
  );

const storeRef = fc.constantFrom<StoreRef>(0, 1, 2);
const storeStep: fc.Arbitrary<StoreStep> = storeRef.chain((store) => fc.record({ t: fc.constant('store' as const), store: fc.constant(store), stream: streamRef(store), message }));
/** A burst never has instance 2 write A's GET stream: two processes appending to one stream at once order their events by who wins, not by call order. */
const burstStep = storeStep.filter((s) => !(s.store === 1 && s.stream.t === 'get'));

const cursorChoice: fc.Arbitrary<CursorChoice> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('own' as const), pick: fc.nat() }) },
  // The replaying store's own ids mutated, and the other session's.
  { weight: 6, arbitrary: cursorRecipe(fc.oneof({ weight: 3, arbitrary: fc.constant('victim' as const) }, { weight: 1, arbitrary: fc.constant('source' as const) })).map((recipe) => ({ t: 'derived' as const, recipe })) },
  { weight: 1, arbitrary: freeLastEventId.map((value) => ({ t: 'free' as const, value })) },
);

const raceStep: fc.Arbitrary<StoreStep> = fc.record({ t: fc.constant('store' as const), store: fc.constantFrom<StoreRef>(0, 1), stream: fc.constant({ t: 'get' as const }), message });

const storeCommand: fc.Arbitrary<StoreCommand> = fc.oneof(
  { weight: 8, arbitrary: storeStep },
  { weight: 1, arbitrary: fc.array(raceStep, { minLength: 2, maxLength: 8 }).map((steps) => ({ t: 'race' as const, steps })) },
  { weight: 2, arbitrary: fc.array(burstStep, { minLength: 2, maxLength: 6 }).map((steps) => ({ t: 'burst' as const, steps })) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('replay' as const), store: storeRef, cursor: cursorChoice }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('resume' as const), store: storeRef, cursor: cursorChoice }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('purge' as const), session: fc.constantFrom('A' as const, 'B' as const), pick: fc.nat(), recent: fc.boolean(), keep: fc.oneof(fc.constant(0), fc.nat({ max: 3 })) }) },
);

export const storeProgram: fc.Arbitrary<StoreProgram> = fc.record({
  owed: fc.record(Object.fromEntries(SDK_STREAM_NAMES.map((n) => [n, fc.option(fc.array(rpcId, { maxLength: 3 }), { nil: undefined, freq: 3 })])) as Record<string, fc.Arbitrary<readonly JsonRpcIdValue[] | undefined>>),
  commands: fc.array(storeCommand, { minLength: 1, maxLength: 14 }),
});

/** The message a recipe stands for (owed ids picked from the stream's list). */
export function materialize(recipe: MessageRecipe, owed: readonly JsonRpcIdValue[] | undefined): Record<string, unknown> {
  switch (recipe.t) {
    case 'priming':
      return {};
    case 'notification':
      return { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: recipe.data } };
    case 'response': {
      const id = 'owed' in recipe.id ? (owed === undefined || owed.length === 0 ? recipe.id.owed : owed[recipe.id.owed % owed.length]!) : recipe.id.free;
      return recipe.error ? { jsonrpc: '2.0', id, error: { code: -32603, message: 'fuzz', data: recipe.result } } : { jsonrpc: '2.0', id, result: { data: recipe.result } };
    }
    case 'request':
      return { jsonrpc: '2.0', id: recipe.id, method: recipe.method, params: {} };
    case 'object':
      return { ...recipe.value };
    case 'oversized': {
      const filler = 'x'.repeat(LIMITS.maxPayloadBytes);
      return recipe.response ? { jsonrpc: '2.0', id: owed?.[0] ?? 0, result: { filler } } : { jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: filler } };
    }
  }
}

// ---- durable tasks ------------------------------------------------------------

/** Who calls: an index into the case's principals and sessions (the last of each is an arbitrary string). */
export interface Who {
  readonly principal: number;
  readonly session: number;
}
/** `owner`: the principal and session of the task the call names (most calls: a caller asks about its own tasks). */
export type Caller = Who | 'owner';

export type TaskRef =
  /** The task the previous call named (or the newest one): programs keep working on one task. */
  | { readonly t: 'same' }
  | { readonly t: 'own'; readonly pick: number }
  | { readonly t: 'flip'; readonly pick: number; readonly index: number; readonly char: string }
  | { readonly t: 'upper'; readonly pick: number }
  | { readonly t: 'cut'; readonly pick: number; readonly keep: number }
  | { readonly t: 'free'; readonly value: unknown };

export type TaskOp =
  | { readonly t: 'create'; readonly who: Who; readonly ttl: unknown; readonly pollInterval: unknown; readonly method: string }
  | { readonly t: 'get'; readonly who: Caller; readonly task: TaskRef }
  | { readonly t: 'update'; readonly who: Caller; readonly task: TaskRef; readonly status: unknown; readonly message: string | undefined }
  | { readonly t: 'store-result'; readonly who: Caller; readonly task: TaskRef; readonly status: unknown; readonly result: ResultRecipe }
  | { readonly t: 'get-result'; readonly who: Caller; readonly task: TaskRef }
  | { readonly t: 'list'; readonly who: Caller; readonly cursor: TaskRef | undefined; readonly walk: boolean }
  /** The SDK's tasks/cancel: status cancelled with its message, then the queue is cleared. */
  | { readonly t: 'cancel'; readonly who: Caller; readonly task: TaskRef }
  | { readonly t: 'enqueue'; readonly who: Caller; readonly task: TaskRef; readonly message: QueuedRecipe; readonly maxSize: unknown }
  | { readonly t: 'dequeue'; readonly who: Caller; readonly task: TaskRef; readonly all: boolean }
  | { readonly t: 'bad-principal'; readonly value: unknown }
  /** The previous write again, with the same arguments (a retry after a lost ack). */
  | { readonly t: 'again' };

export type ResultRecipe =
  | { readonly t: 'content'; readonly text: string; readonly isError: boolean }
  | { readonly t: 'json'; readonly value: Readonly<Record<string, unknown>> }
  | { readonly t: 'not-object'; readonly value: unknown }
  | { readonly t: 'oversized' }
  | { readonly t: 'circular' }
  | { readonly t: 'bigint' };

export type QueuedRecipe =
  | { readonly t: 'valid'; readonly type: 'request' | 'notification' | 'response' | 'error'; readonly n: number; readonly data: unknown }
  | { readonly t: 'bad-type'; readonly type: unknown }
  | { readonly t: 'bad-message'; readonly message: unknown }
  | { readonly t: 'not-object'; readonly value: unknown }
  | { readonly t: 'oversized' }
  | { readonly t: 'bigint' };

export const TASK_STATUSES = ['working', 'input_required', 'completed', 'failed', 'cancelled'] as const;

const who: fc.Arbitrary<Who> = fc.record({
  principal: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.constant(1) }, { weight: 1, arbitrary: fc.constantFrom(2, 3) }),
  session: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.constantFrom(1, 2) }, { weight: 1, arbitrary: fc.constantFrom(3, 4) }),
});

const caller: fc.Arbitrary<Caller> = fc.oneof({ weight: 3, arbitrary: fc.constant('owner' as const) }, { weight: 2, arbitrary: who });

const HEX = [...'0123456789abcdef'];
const taskRef: fc.Arbitrary<TaskRef> = fc.oneof(
  { weight: 8, arbitrary: fc.constant({ t: 'same' as const }) },
  { weight: 6, arbitrary: fc.record({ t: fc.constant('own' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('flip' as const), pick: fc.nat(), index: fc.nat({ max: 31 }), char: fc.constantFrom(...HEX, 'g', 'A', '.', '*', '>', ' ', '\u0000', '\u00e9') }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('upper' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('cut' as const), pick: fc.nat(), keep: fc.nat({ max: 33 }) }) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        fc.string({ unit: fc.constantFrom(...HEX), minLength: 32, maxLength: 32 }),
        fc.string({ maxLength: 40 }),
        fc.constantFrom('', '../../etc', 'tt.*.>', '>', '*', 'f'.repeat(33), 'F'.repeat(32), `${'0'.repeat(31)}.`, '0'.repeat(32)),
        fc.constantFrom(undefined, null, 0, 12345678901234567890123456789012, true, {}, []),
      )
      .map((value) => ({ t: 'free' as const, value })),
  },
);

/** TTLs: none and null (capped), ordinary, over the cap, short enough to expire during a case, and what is refused. */
const ttl: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: fc.integer({ min: 60_000, max: 7_200_000 }) },
  { weight: 2, arbitrary: fc.constantFrom(undefined, null) },
  { weight: 1, arbitrary: fc.constantFrom(1e13, Number.MAX_VALUE, LIMITS.maxTtlMs, LIMITS.maxTtlMs + 1) },
  { weight: 1, arbitrary: fc.oneof(fc.integer({ min: 1, max: 1_500 }), fc.constantFrom(0.001, 0.5, 1)) },
  { weight: 1, arbitrary: fc.constantFrom(0, -5, -0, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, '100', true, {}) },
);
const pollInterval: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.integer({ min: 1, max: 60_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, 0.5, 1e9) },
  { weight: 1, arbitrary: fc.constantFrom(0, -1, Number.NaN, Number.POSITIVE_INFINITY, '5', false) },
);
const status: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 8, arbitrary: fc.constantFrom(...TASK_STATUSES) },
  { weight: 1, arbitrary: fc.constantFrom('done', 'Working', 'completed ', '', null, undefined, 3, 'toString', '__proto__') },
);
const resultStatus: fc.Arbitrary<unknown> = fc.oneof({ weight: 8, arbitrary: fc.constantFrom('completed', 'failed') }, { weight: 1, arbitrary: status });
const statusMessage = fc.oneof(
  { weight: 3, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.constantFrom('need a name', 'working on it') },
  { weight: 1, arbitrary: fc.constant('') },
  { weight: 1, arbitrary: fc.string({ maxLength: 30 }) },
);
const result: fc.Arbitrary<ResultRecipe> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('content' as const), text: fc.constantFrom('done', 'boom', ''), isError: fc.boolean() }) },
  { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 6 }), jsonData, { maxKeys: 4 }).map((value) => ({ t: 'json' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, [], [1], 'text', 7, true, undefined).map((value) => ({ t: 'not-object' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom({ t: 'oversized' as const }, { t: 'circular' as const }, { t: 'bigint' as const }) },
);
const queued: fc.Arbitrary<QueuedRecipe> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ t: fc.constant('valid' as const), type: fc.constantFrom('request' as const, 'notification' as const, 'response' as const, 'error' as const), n: fc.nat({ max: 1_000 }), data: jsonData }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>('bogus', '', null, 3, 'Notification').map((type) => ({ t: 'bad-type' as const, type })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 'text', 3, undefined).map((m) => ({ t: 'bad-message' as const, message: m })) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(null, 'text', [], 3).map((value) => ({ t: 'not-object' as const, value })) },
  { weight: 1, arbitrary: fc.constantFrom({ t: 'oversized' as const }, { t: 'bigint' as const }) },
);
const maxSize: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 4, arbitrary: fc.constant(undefined) },
  { weight: 3, arbitrary: fc.integer({ min: 0, max: 3 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 1.5, Number.NaN, '2', Number.POSITIVE_INFINITY) },
);

const taskOp: fc.Arbitrary<TaskOp> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('create' as const), who, ttl, pollInterval, method: fc.constantFrom('tools/call', 'sampling/createMessage', '') }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('get' as const), who: caller, task: taskRef }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('update' as const), who: caller, task: taskRef, status, message: statusMessage }) },
  { weight: 4, arbitrary: fc.record({ t: fc.constant('store-result' as const), who: caller, task: taskRef, status: resultStatus, result }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('get-result' as const), who: caller, task: taskRef }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('list' as const), who: caller, cursor: fc.option(taskRef, { nil: undefined, freq: 2 }), walk: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('cancel' as const), who: caller, task: taskRef }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('enqueue' as const), who: caller, task: taskRef, message: queued, maxSize }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('dequeue' as const), who: caller, task: taskRef, all: fc.boolean() }) },
  { weight: 3, arbitrary: fc.constant({ t: 'again' as const }) },
  { weight: 1, arbitrary: fc.constantFrom<unknown>(undefined, null, 42, {}, Symbol.iterator).map((value) => ({ t: 'bad-principal' as const, value })) },
);

/** A create that succeeds, so that most programs have tasks to work on from their first call. */
const goodCreate: fc.Arbitrary<TaskOp> = fc.record({
  t: fc.constant('create' as const),
  who: fc.oneof({ weight: 4, arbitrary: fc.constant({ principal: 0, session: 0 }) }, { weight: 1, arbitrary: who }),
  ttl: fc.oneof(fc.integer({ min: 60_000, max: 7_200_000 }), fc.constant(null)),
  pollInterval: fc.constant(undefined),
  method: fc.constant('tools/call'),
});

export const taskProgram = fc.record({
  /** The arbitrary principal and session of the case (index 3 and 4 of `Who`). */
  principal: fc.string({ maxLength: 20 }),
  session: fc.string({ maxLength: 20 }),
  ops: fc.tuple(fc.array(goodCreate, { minLength: 1, maxLength: 5 }), fc.array(taskOp, { minLength: 1, maxLength: 16 })).map(([a, b]) => [...a, ...b]),
});
export type TaskProgram = typeof taskProgram extends fc.Arbitrary<infer T> ? T : never;

/** The value a result recipe stands for. */
export function resultOf(recipe: ResultRecipe): unknown {
  switch (recipe.t) {
    case 'content':
      return { content: [{ type: 'text', text: recipe.text }], ...(recipe.isError ? { isError: true } : {}) };
    case 'json':
      return recipe.value;
    case 'not-object':
      return recipe.value;
    case 'oversized':
      return { content: [{ type: 'text', text: 'x'.repeat(LIMITS.maxResultBytes) }] };
    case 'circular': {
      const value: Record<string, unknown> = { content: [] };
      value['self'] = value;
      return value;
    }
    case 'bigint':
      return { content: [], n: 10n };
  }
}

/** The value a queued-message recipe stands for. */
export function queuedOf(recipe: QueuedRecipe): unknown {
  const message = (n: number, data: unknown) => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', n, data } });
  switch (recipe.t) {
    case 'valid':
      return { type: recipe.type, message: message(recipe.n, recipe.data), timestamp: 1_700_000_000_000 + recipe.n };
    case 'bad-type':
      return { type: recipe.type, message: message(0, null), timestamp: 1 };
    case 'bad-message':
      return { type: 'notification', message: recipe.message, timestamp: 1 };
    case 'not-object':
      return recipe.value;
    case 'oversized':
      return { type: 'notification', message: message(0, 'x'.repeat(LIMITS.maxQueuedMessageBytes)), timestamp: 1 };
    case 'bigint':
      return { type: 'notification', message: message(0, 10n), timestamp: 1 };
  }
}

// ---- writer presence ---------------------------------------------------------

/** A question on a writer's presence subject: what probes send (`<session> <stream>`, or empty), near misses, any bytes. */
export type PresenceQuestion =
  | { readonly t: 'pair'; readonly pick: number; readonly open: boolean }
  | { readonly t: 'text'; readonly text: string }
  | { readonly t: 'bytes'; readonly bytes: Uint8Array };

export const presenceQuestion: fc.Arbitrary<PresenceQuestion> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('pair' as const), pick: fc.nat(), open: fc.boolean() }) },
  {
    weight: 3,
    arbitrary: fc
      .oneof(
        fc.constantFrom('', ' ', '  ', 'a', 'a b', 'a b c', 'a  b', ' a b', 'a b ', '\u0000 \u0000', '\t\t', 'x\ny z'),
        fc.string({ maxLength: 40 }),
        fc.string({ unit: 'binary', maxLength: 40 }),
        fc.tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 })).map(([a, b]) => `${a} ${b}`),
      )
      .map((text) => ({ t: 'text' as const, text })),
  },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((bytes) => ({ t: 'bytes' as const, bytes })) },
);

/** begin/finish calls on a presence, with any session and stream strings, then questions. */
export const presenceCase = fc.record({
  marks: fc.array(fc.record({ session: fc.oneof(fc.constantFrom('s1', 's2', ''), fc.string({ maxLength: 10 })), stream: fc.oneof(fc.constantFrom('0', 'abcdefgh', ''), fc.string({ maxLength: 10 })), begin: fc.boolean() }), { maxLength: 8 }),
  questions: fc.array(presenceQuestion, { minLength: 1, maxLength: 8 }),
});
