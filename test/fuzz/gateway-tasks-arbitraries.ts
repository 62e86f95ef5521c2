import fc from 'fast-check';
import { TaskTools } from '@tether/testing';
import { CAPABILITIES_META, TASKS_EXTENSION, TASKS_VERSION } from './gateway-tasks-stack.js';
import { fieldText } from './http-arbitraries.js';

/**
 * Arbitraries of the task-method fuzz suite. Requests that name real tasks
 * are recipes (which task, which mutation), materialized at run time: the
 * tasks the suite keeps are replaced when a fuzzed `tasks/cancel` ends one.
 */

export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

const BASE64URL = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'];
export const TASK_METHODS = ['tasks/get', 'tasks/update', 'tasks/cancel'] as const;
/** The 2025-11-25 draft's task methods SEP-2663 removed: the gateway answers them -32601 once the edge checks pass. */
export const REMOVED_TASK_METHODS = ['tasks/result', 'tasks/list'] as const;
export type FuzzedMethod = (typeof TASK_METHODS)[number] | (typeof REMOVED_TASK_METHODS)[number] | 'subscriptions/listen';

const anyJson = fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;
/** A marker no fixed text holds: a task id or key built on one must never come back in an error or a log line. */
const marker = fc.string({ unit: fc.constantFrom(...'0123456789ABCDEF'), minLength: 12, maxLength: 12 }).map((h) => `TASKMARK${h}`);

// ---- task ids -----------------------------------------------------------------

export type IdMutation =
  | { readonly t: 'none' }
  | { readonly t: 'case' }
  | { readonly t: 'affix'; readonly prefix: string; readonly suffix: string }
  | { readonly t: 'flip'; readonly index: number; readonly char: string }
  | { readonly t: 'truncate'; readonly keep: number }
  | { readonly t: 'subject'; readonly glue: string };

/** A task id as a request names it: a real task's (ours or another principal's), derived from one, or any JSON at all. */
export type TaskIdRecipe =
  | { readonly t: 'real'; readonly whose: 'own' | 'foreign'; readonly pick: number; readonly mutation: IdMutation }
  | { readonly t: 'value'; readonly value: Json }
  | { readonly t: 'absent' };

const idMutation: fc.Arbitrary<IdMutation> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ t: 'none' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'case' as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('affix' as const), prefix: fc.constantFrom('', ' ', '\t', '.', '*', '>'), suffix: fc.constantFrom('', ' ', '\t', '\u00a0', '.', '.>', '..', '=', '\u0000') }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('flip' as const), index: fc.nat({ max: 21 }), char: fc.constantFrom('A', '-', '_', '.', '*', '>', ' ', '\u00e9', '\u{1F600}') }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('truncate' as const), keep: fc.nat({ max: 21 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('subject' as const), glue: fc.constantFrom('.', '.*', '.>', '..', ' ') }) },
);

/** Task id values: NATS subject tokens and wildcards, look-alikes, Unicode, long, and every JSON type. */
const freeTaskId: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('', ' ', '..', '.', '*', '>', '*.>', 'a.b', 'a b', '\t', '\u0000', 'tether.edge.task.>', '__proto__', 'constructor', 'null', '../../etc/passwd', '%2e%2e', 'AAAAAAAAAAAAAAAAAAAAAA', 'AAAAAAAAAAAAAAAAAAAAA.', '\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9') },
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 22, maxLength: 22 }) },
  { weight: 2, arbitrary: fc.tuple(marker, fc.string({ unit: fc.constantFrom(...BASE64URL, '.', '*', '>', ' '), maxLength: 10 })).map(([m, s]) => `${m}${s}`) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
  { weight: 1, arbitrary: fc.tuple(marker, fc.integer({ min: 200, max: 12_000 })).map(([m, n]) => `${m}${'x'.repeat(n)}`) },
  { weight: 2, arbitrary: anyJson },
  { weight: 1, arbitrary: fc.constantFrom<Json>(0, -1, 1e21, true, false, null, [], {}, ['AAAAAAAAAAAAAAAAAAAAAA'], { taskId: 'AAAAAAAAAAAAAAAAAAAAAA' }) },
);

export const taskIdRecipe: fc.Arbitrary<TaskIdRecipe> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('real' as const), whose: fc.constantFrom('own' as const, 'own' as const, 'foreign' as const), pick: fc.nat(), mutation: idMutation }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('value' as const), value: freeTaskId }) },
  { weight: 1, arbitrary: fc.constant({ t: 'absent' as const }) },
);

export function mutateId(id: string, m: IdMutation): string {
  switch (m.t) {
    case 'none':
      return id;
    case 'case': {
      const swapped = [...id].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join('');
      return swapped === id ? `${id}a` : swapped;
    }
    case 'affix':
      return `${m.prefix}${id}${m.suffix}`;
    case 'flip': {
      const chars = [...id];
      const i = m.index % chars.length;
      chars[i] = chars[i] === m.char ? 'Z' : m.char;
      const out = chars.join('');
      return out === id ? `${id}Z` : out;
    }
    case 'truncate':
      return id.slice(0, m.keep);
    case 'subject':
      return `${id}${m.glue}${id}`;
  }
}

// ---- _meta envelopes ------------------------------------------------------------

/** `extensions` shapes: the Tasks extension declared (an object), misdeclared (other types, other spellings), absent. */
const extensions: fc.Arbitrary<Json | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ [TASKS_EXTENSION]: {} }) },
  { weight: 2, arbitrary: anyJson.map((settings) => ({ [TASKS_EXTENSION]: typeof settings === 'object' && settings !== null && !Array.isArray(settings) ? settings : {}, 'x/other': settings })) },
  {
    weight: 3,
    arbitrary: fc.constantFrom<Json | undefined>(
      undefined, null, [], [TASKS_EXTENSION], 'io.modelcontextprotocol/tasks', {}, { [TASKS_EXTENSION]: null }, { [TASKS_EXTENSION]: [] },
      { [TASKS_EXTENSION]: true }, { [TASKS_EXTENSION]: 'on' }, { 'io.modelcontextprotocol/Tasks': {} }, { 'io.modelcontextprotocol/tasks ': {} }, { tasks: {} },
    ),
  },
  { weight: 1, arbitrary: anyJson },
);

const capabilities: fc.Arbitrary<Json | undefined> = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(extensions, fc.boolean()).map(([ext, elicit]) => ({ ...(ext === undefined ? {} : { extensions: ext }), ...(elicit ? { elicitation: { form: {} } } : {}) })) },
  { weight: 1, arbitrary: fc.constantFrom<Json | undefined>(undefined, null, [], 'tasks', { [TASKS_EXTENSION]: {} }, { extension: { [TASKS_EXTENSION]: {} } }) },
  { weight: 1, arbitrary: anyJson },
);

/** `_meta`: the 2026-07-28 envelope with each key right, wrong or missing, or any JSON. */
export const metaValue: fc.Arbitrary<Json | undefined> = fc.oneof(
  {
    weight: 12,
    arbitrary: fc
      .record({
        // Mostly right: the envelope is checked first, and `versionFault` aims at it on its own.
        protocolVersion: fc.oneof({ weight: 12, arbitrary: fc.constant<Json | undefined>(TASKS_VERSION) }, { weight: 1, arbitrary: fc.constantFrom<Json | undefined>(undefined, '2025-11-25', '', 20260728, null) }),
        clientInfo: fc.oneof({ weight: 6, arbitrary: fc.constant<Json | undefined>({ name: 'fuzz-tasks', version: '0' }) }, { weight: 1, arbitrary: fc.oneof(fc.constant(undefined), anyJson) }),
        capabilities,
        extra: fc.option(fc.dictionary(fc.string({ maxLength: 12 }), anyJson, { maxKeys: 3 }), { freq: 4 }),
      })
      .map(({ protocolVersion, clientInfo, capabilities: caps, extra }) => {
        const meta: Record<string, Json> = { ...(extra ?? {}) };
        if (protocolVersion !== undefined) meta['io.modelcontextprotocol/protocolVersion'] = protocolVersion;
        if (clientInfo !== undefined) meta['io.modelcontextprotocol/clientInfo'] = clientInfo;
        if (caps !== undefined) meta[CAPABILITIES_META] = caps;
        return meta;
      }),
  },
  { weight: 1, arbitrary: fc.constantFrom<Json | undefined>(undefined, null, [], '', 'tasks', 0, {}) },
  { weight: 1, arbitrary: anyJson },
);

/**
 * The per-request envelope's revision against the header's, on top of
 * whatever `_meta` and `MCP-Protocol-Version` a recipe has: `missing`
 * drops the key from `_meta`; `meta` puts another value there (not a
 * string, or another string than the header's); `both` names one revision
 * in the header and `_meta` alike (a later, unserved one: -32022).
 */
export type VersionFault =
  | { readonly t: 'none' }
  | { readonly t: 'missing' }
  | { readonly t: 'meta'; readonly value: Json }
  | { readonly t: 'both'; readonly value: string };

export const versionFault: fc.Arbitrary<VersionFault> = fc.oneof(
  { weight: 9, arbitrary: fc.constant({ t: 'none' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'missing' as const }) },
  {
    weight: 1,
    arbitrary: fc
      .constantFrom<Json>(20260728, null, true, {}, [TASKS_VERSION], '2025-11-25', '2026-07-29', '2027-01-01', ` ${TASKS_VERSION}`, `${TASKS_VERSION}\t`, '2026-7-28', '')
      .map((value) => ({ t: 'meta' as const, value })),
  },
  { weight: 1, arbitrary: fc.constantFrom('2027-01-01', '2026-07-29', '9999-12-31').map((value) => ({ t: 'both' as const, value })) },
);

/** `_meta` and the header's revision once `fault` is applied (`_meta` unchanged when it is not an object). */
export function withVersionFault(meta: Json | undefined, header: string | undefined, fault: VersionFault): { meta: Json | undefined; header: string | undefined } {
  const isObj = typeof meta === 'object' && meta !== null && !Array.isArray(meta);
  const key = 'io.modelcontextprotocol/protocolVersion';
  switch (fault.t) {
    case 'none':
      return { meta, header };
    case 'missing': {
      if (!isObj) return { meta, header };
      const { [key]: _dropped, ...rest } = meta as Record<string, Json>;
      return { meta: rest, header };
    }
    case 'meta':
      return { meta: isObj ? { ...(meta as Record<string, Json>), [key]: fault.value } : meta, header };
    case 'both':
      return { meta: isObj ? { ...(meta as Record<string, Json>), [key]: fault.value } : meta, header: fault.value };
  }
}

// ---- inputResponses ---------------------------------------------------------------

/** The largest `inputResponses` the gateway accepts, serialized (task-methods.ts). */
export const MAX_INPUT_RESPONSES_BYTES = 256 * 1024;

/** `inputResponses`: elicitation answers, any JSON, and objects whose serialization lands around the 256 KiB limit (ASCII and two-byte text). */
export type ResponsesRecipe =
  | { readonly t: 'value'; readonly value: Json | undefined }
  | { readonly t: 'sized'; readonly key: string; readonly bytes: number; readonly wide: boolean };

const answer: fc.Arbitrary<Json> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom<Json>({ action: 'accept', content: { confirm: true } }, { action: 'accept', content: { name: 'Ada' } }, { action: 'decline' }, { action: 'cancel' }) },
  { weight: 2, arbitrary: anyJson },
);
const responseKey = fc.oneof(fc.constantFrom('confirm', 'first', 'second', 'first.2', 'user_name', '__proto__', 'constructor', '', ' '), marker, fc.string({ maxLength: 12 }));

export const responsesRecipe: fc.Arbitrary<ResponsesRecipe> = fc.oneof(
  { weight: 4, arbitrary: fc.dictionary(responseKey, answer, { maxKeys: 3 }).map((value) => ({ t: 'value' as const, value })) },
  { weight: 2, arbitrary: fc.oneof(anyJson, fc.constantFrom<Json | undefined>(undefined, null, [], [{ action: 'accept' }], 'confirm', 0)).map((value) => ({ t: 'value' as const, value })) },
  {
    weight: 2,
    arbitrary: fc.record({
      t: fc.constant('sized' as const),
      key: fc.constantFrom('confirm', 'first', 'x'),
      bytes: fc.oneof(fc.integer({ min: MAX_INPUT_RESPONSES_BYTES - 40, max: MAX_INPUT_RESPONSES_BYTES + 40 }), fc.constantFrom(MAX_INPUT_RESPONSES_BYTES - 1, MAX_INPUT_RESPONSES_BYTES, MAX_INPUT_RESPONSES_BYTES + 1, 1_000_000)),
      wide: fc.boolean(),
    }),
  },
);

/** An `inputResponses` object whose JSON is exactly `bytes` bytes (give or take one when a two-byte character does not fit). */
export function sizedResponses(key: string, bytes: number, wide: boolean): Json {
  const overhead = Buffer.byteLength(JSON.stringify({ [key]: '' }));
  const room = Math.max(0, bytes - overhead);
  return { [key]: wide ? `${'\u00e9'.repeat(Math.floor(room / 2))}${room % 2 === 1 ? 'x' : ''}` : 'x'.repeat(room) };
}

export function responsesOf(r: ResponsesRecipe): Json | undefined {
  return r.t === 'value' ? r.value : sizedResponses(r.key, r.bytes, r.wide);
}

// ---- listen's notifications --------------------------------------------------------

export type NotificationsRecipe =
  | { readonly t: 'value'; readonly value: Json | undefined }
  /** `taskIds` built from task id recipes, maybe with an upstream part beside it. */
  | { readonly t: 'ids'; readonly ids: readonly TaskIdRecipe[]; readonly upstreamPart: boolean }
  | { readonly t: 'many'; readonly count: number };

export const notificationsRecipe: fc.Arbitrary<NotificationsRecipe> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('ids' as const), ids: fc.array(taskIdRecipe, { maxLength: 4 }), upstreamPart: fc.constantFrom(false, false, false, false, false, false, false, false, false, true) }) },
  { weight: 2, arbitrary: fc.oneof(fc.constantFrom<Json | undefined>(undefined, null, {}, [], { taskIds: null }, { taskIds: 'x' }, { taskIds: {} }, { taskIds: [1, 2] }, { taskIds: [null] }), anyJson.map((v) => ({ taskIds: v }))).map((value) => ({ t: 'value' as const, value })) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('many' as const), count: fc.constantFrom(99, 100, 101, 1000) }) },
);

// ---- headers ---------------------------------------------------------------------------

/**
 * A routing header (`Mcp-Method`, `Mcp-Name`): right, padded with
 * whitespace, another value, junk, or absent; for `Mcp-Name`, also SEP-2243's
 * `=?base64?…?=` form (what a client sends for a value a header cannot
 * carry): of the right value (`base64`), of another one (`base64-other`:
 * the right one with a suffix, its case swapped, or a fixed value), with
 * the right value's padding dropped (`base64-unpadded`: invalid when the
 * value's length is not a multiple of 3), or an invalid payload
 * (`base64-invalid`: bad padding, another alphabet, a space, bytes that are
 * not UTF-8).
 */
export type RoutingHeader =
  | { readonly t: 'right'; readonly pad: string }
  | { readonly t: 'other'; readonly value: string }
  | { readonly t: 'absent' }
  | { readonly t: 'base64'; readonly pad: string }
  | { readonly t: 'base64-other'; readonly change: 'suffix' | 'case' | 'value'; readonly value: string }
  | { readonly t: 'base64-unpadded' }
  | { readonly t: 'base64-invalid'; readonly value: string };

/** `=?base64?…?=` values no server may decode (RFC 4648 section 4 padded base64 of UTF-8 is the only payload). */
export const INVALID_SENTINELS = [
  '=?base64?QQ?=', '=?base64?QQ=?=', '=?base64?Q===?=', '=?base64?====?=', '=?base64?QUFB QUFB?=', '=?base64?QUF-?=', '=?base64?QUF_?=', '=?base64?QU\tFB?=',
  // 0xFF; an overlong space; an encoded surrogate (U+D800); a lone continuation byte
  '=?base64?/w==?=', '=?base64?wKA=?=', '=?base64?7aCA?=', '=?base64?gA==?=',
] as const;

const routingHeader = (others: fc.Arbitrary<string>, sentinels: boolean): fc.Arbitrary<RoutingHeader> =>
  fc.oneof(
    { weight: 8, arbitrary: fc.constantFrom('', '', '', ' ', '\t', '  ').map((pad) => ({ t: 'right' as const, pad })) },
    { weight: 1, arbitrary: fc.constant({ t: 'absent' as const }) },
    { weight: 2, arbitrary: fc.oneof(others, fieldText(40)).map((value) => ({ t: 'other' as const, value })) },
    ...(sentinels ? sentinelHeaders : []),
  );

const sentinelHeaders: fc.WeightedArbitrary<RoutingHeader>[] = [
  { weight: 2, arbitrary: fc.constantFrom('', '', ' ').map((pad) => ({ t: 'base64' as const, pad })) },
  {
    weight: 3,
    arbitrary: fc.record({ t: fc.constant('base64-other' as const), change: fc.constantFrom('suffix' as const, 'case' as const, 'value' as const), value: fc.constantFrom('AAAAAAAAAAAAAAAAAAAAAA', 'hold', '', '*', '\u00e9') }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'base64-unpadded' as const }) },
  { weight: 1, arbitrary: fc.constantFrom(...INVALID_SENTINELS).map((value) => ({ t: 'base64-invalid' as const, value })) },
];

const base64Of = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

/** A routing header's value for a request whose right value is `right` (none when the body has none). */
export function routingValue(h: RoutingHeader, right: string | undefined): string | undefined {
  switch (h.t) {
    case 'absent':
      return undefined;
    case 'other':
      return h.value;
    case 'base64-invalid':
      return h.value;
    case 'right':
      return right === undefined ? undefined : `${h.pad}${right}${h.pad}`;
    case 'base64':
      return right === undefined ? undefined : `${h.pad}=?base64?${base64Of(right)}?=${h.pad}`;
    case 'base64-unpadded':
      return right === undefined ? undefined : `=?base64?${base64Of(right).replace(/=+$/, '')}?=`;
    case 'base64-other': {
      const swapped = [...(right ?? '')].map((c) => (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase())).join('');
      const other = right === undefined || h.change === 'value' ? h.value : h.change === 'suffix' ? `${right}x` : swapped === right ? `${right}a` : swapped;
      return `=?base64?${base64Of(other === right ? `${other}x` : other)}?=`;
    }
  }
}

export interface TaskHeaders {
  readonly method: RoutingHeader;
  readonly name: RoutingHeader;
  /** Sent as `Authorization`: none, the other principal's token, or a fresh secret (each must stay out of answers and logs). */
  readonly authorization: { readonly t: 'none' } | { readonly t: 'foreign' } | { readonly t: 'secret'; readonly token: string };
  readonly protocolVersion: string | undefined;
}

export const taskHeaders: fc.Arbitrary<TaskHeaders> = fc.record({
  method: routingHeader(fc.constantFrom('tasks/get', 'tasks/update', 'tasks/cancel', 'subscriptions/listen', 'tasks/result', 'tools/call', 'TASKS/GET', 'tasks/get/'), false),
  name: routingHeader(fc.constantFrom('AAAAAAAAAAAAAAAAAAAAAA', '*', '>', '..', 'hold', '=?base64?=', '=?BASE64?QUFB?='), true),
  authorization: fc.oneof(
    { weight: 6, arbitrary: fc.constant({ t: 'none' as const }) },
    { weight: 2, arbitrary: fc.constant({ t: 'foreign' as const }) },
    { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 24, maxLength: 60 }).map((s) => ({ t: 'secret' as const, token: `Bearer SECRET${s}` })) },
  ),
  protocolVersion: fc.oneof({ weight: 12, arbitrary: fc.constant(TASKS_VERSION) }, { weight: 1, arbitrary: fc.constantFrom(undefined, '2025-11-25', ` ${TASKS_VERSION} `, '2026-07-29', '2027-01-01', '9999-12-31') }),
});

// ---- whole requests ------------------------------------------------------------------

/** One fuzzed request to a task method or `subscriptions/listen`. */
export interface TaskMethodRecipe {
  readonly gateway: number;
  readonly method: FuzzedMethod;
  /** A request id (number or string); `absent` makes it a notification. */
  readonly id: number | string | 'absent';
  readonly params: { readonly t: 'object' } | { readonly t: 'value'; readonly value: Json | undefined };
  readonly taskId: TaskIdRecipe;
  readonly meta: Json | undefined;
  /** Applied to `meta` and `headers.protocolVersion`. */
  readonly version: VersionFault;
  readonly responses: ResponsesRecipe;
  readonly notifications: NotificationsRecipe;
  readonly extra: Json | undefined;
  readonly headers: TaskHeaders;
}

/** Request ids JSON-RPC allows (a number or a string); notifications now and then. */
export const validId: fc.Arbitrary<number | string | 'absent'> = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: -5, max: 1_000_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, 2 ** 53 - 1, 0.5, -1e300) },
  { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constant('absent' as const) },
);

const fuzzedRecipe: fc.Arbitrary<TaskMethodRecipe> = fc.record({
  gateway: fc.nat({ max: 1 }),
  method: fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom<FuzzedMethod>('tasks/get', 'tasks/update', 'tasks/cancel', 'subscriptions/listen') },
    { weight: 1, arbitrary: fc.constantFrom<FuzzedMethod>(...REMOVED_TASK_METHODS) },
  ),
  id: validId,
  params: fc.oneof({ weight: 12, arbitrary: fc.constant({ t: 'object' as const }) }, { weight: 1, arbitrary: fc.constantFrom<Json | undefined>(undefined, null, [], [{ taskId: 'AAAAAAAAAAAAAAAAAAAAAA' }], 'taskId', 7).map((value) => ({ t: 'value' as const, value })) }),
  taskId: taskIdRecipe,
  meta: metaValue,
  version: versionFault,
  responses: responsesRecipe,
  notifications: notificationsRecipe,
  extra: fc.option(fc.dictionary(fc.string({ maxLength: 10 }), anyJson, { maxKeys: 2 }), { freq: 5 }).map((v) => v ?? undefined),
  headers: taskHeaders,
});

/** A request a client would send (routing headers right, the extension declared, a real task), with one or two fields fuzzed. */
const nearValidRecipe: fc.Arbitrary<TaskMethodRecipe> = fc
  .tuple(fuzzedRecipe, fc.nat({ max: 1 }), fc.constantFrom('own' as const, 'own' as const, 'foreign' as const), fc.nat(), fc.subarray(['taskId', 'meta', 'version', 'responses', 'method', 'name', 'authorization'] as const, { maxLength: 2 }), fc.nat({ max: 3 }))
  .map(([f, pad, whose, pick, keep, nameForm]): TaskMethodRecipe => ({
    ...f,
    params: { t: 'object' },
    extra: undefined,
    taskId: keep.includes('taskId') ? f.taskId : { t: 'real', whose, pick, mutation: { t: 'none' } },
    meta: keep.includes('meta') ? f.meta : { 'io.modelcontextprotocol/protocolVersion': TASKS_VERSION, 'io.modelcontextprotocol/clientInfo': { name: 'fuzz-tasks', version: '0' }, [CAPABILITIES_META]: { extensions: { [TASKS_EXTENSION]: {} } } },
    version: keep.includes('version') ? f.version : { t: 'none' },
    responses: keep.includes('responses') ? f.responses : { t: 'value', value: { first: { action: 'accept', content: { name: 'Ada' } }, [`k${pick}`]: pick } },
    headers: {
      method: keep.includes('method') ? f.headers.method : { t: 'right', pad: pad === 0 ? '' : ' ' },
      // A client may send any Mcp-Name in its =?base64?…?= form (it must for a value a header cannot carry).
      name: keep.includes('name') ? f.headers.name : nameForm === 0 ? { t: 'base64', pad: '' } : { t: 'right', pad: '' },
      authorization: keep.includes('authorization') ? f.headers.authorization : whose === 'foreign' ? { t: 'foreign' } : { t: 'none' },
      protocolVersion: TASKS_VERSION,
    },
  }));

export const taskMethodRecipe: fc.Arbitrary<TaskMethodRecipe> = fc.oneof({ weight: 3, arbitrary: fuzzedRecipe }, { weight: 2, arbitrary: nearValidRecipe });

/** Request ids JSON-RPC 2.0 does not allow (a request id is a string or a number): booleans, objects, arrays, and numbers JSON.parse makes Infinity. */
export const invalidId: fc.Arbitrary<{ readonly raw: string }> = fc.oneof(
  fc.constantFrom('true', 'false', '{}', '[]', '{"a":1}', '[1]', '1e400', '-1e400'),
  anyJson.filter((v) => typeof v === 'object' && v !== null).map((v) => JSON.stringify(v)),
).map((raw) => ({ raw }));

// ---- tools/call envelopes (property 3) ------------------------------------------------

export interface ToolCallRecipe {
  readonly gateway: number;
  readonly tool: 'slow_compute' | 'failing_job' | 'greet';
  /** slow_compute: 0 answers at once, 0.8 s only well after --task-after (250 ms), even on a loaded machine. */
  readonly seconds: 0 | 0.8;
  readonly meta: Json | undefined;
  /** Applied to `meta` and the header's revision (2026-07-28). */
  readonly version: VersionFault;
  readonly name: RoutingHeader;
}

export const toolCallRecipe: fc.Arbitrary<ToolCallRecipe> = fc.record({
  gateway: fc.nat({ max: 1 }),
  tool: fc.constantFrom('slow_compute' as const, 'slow_compute' as const, 'slow_compute' as const, 'failing_job' as const, 'greet' as const),
  seconds: fc.constantFrom(0 as const, 0.8 as const),
  meta: metaValue,
  version: versionFault,
  name: fc.oneof({ weight: 12, arbitrary: fc.constant({ t: 'right' as const, pad: '' }) }, { weight: 1, arbitrary: fc.constant({ t: 'absent' as const }) }, ...sentinelHeaders),
});

// ---- interleavings on one live task (property 2) -------------------------------------

export const LIVE_TOOLS = [TaskTools.Hold, TaskTools.SlowCompute, TaskTools.ConfirmDelete, TaskTools.MultiInput, TaskTools.FailingJob, TaskTools.ProtocolErrorJob] as const;
export type LiveTool = (typeof LIVE_TOOLS)[number];

export type LiveOp =
  | { readonly t: 'get'; readonly gateway: number }
  /** Answers: to the open requests' keys (`pick`ed from what the last get showed), unknown keys, bad shapes. */
  | { readonly t: 'update'; readonly gateway: number; readonly keys: readonly ('open' | 'unknown')[]; readonly pick: number; readonly answer: Json }
  | { readonly t: 'cancel'; readonly gateway: number }
  /** The hold tool's key is released upstream: its call answers. */
  | { readonly t: 'release' }
  | { readonly t: 'wait'; readonly ms: number }
  /** Polls tasks/get until the status is not the last one seen (or 1 s): moves the case along the state machine. */
  | { readonly t: 'until'; readonly gateway: number }
  /** The same task id from another principal: must be "not found" and change nothing. */
  | { readonly t: 'foreign'; readonly gateway: number; readonly method: (typeof TASK_METHODS)[number] };

const liveOp: fc.Arbitrary<LiveOp> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('get' as const), gateway: fc.nat({ max: 1 }) }) },
  {
    weight: 3,
    arbitrary: fc.record({
      t: fc.constant('update' as const),
      gateway: fc.nat({ max: 1 }),
      keys: fc.array(fc.constantFrom('open' as const, 'open' as const, 'unknown' as const), { minLength: 1, maxLength: 2 }),
      pick: fc.nat(),
      answer: fc.oneof({ weight: 4, arbitrary: fc.constantFrom<Json>({ action: 'accept', content: { confirm: true, name: 'Ada' } }, { action: 'decline' }) }, { weight: 1, arbitrary: anyJson }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('cancel' as const), gateway: fc.nat({ max: 1 }) }) },
  { weight: 1, arbitrary: fc.constant({ t: 'release' as const }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('wait' as const), ms: fc.constantFrom(0, 20, 80, 250, 700) }) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('until' as const), gateway: fc.nat({ max: 1 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('foreign' as const), gateway: fc.nat({ max: 1 }), method: fc.constantFrom(...TASK_METHODS) }) },
);

export interface LiveRecipe {
  readonly tool: LiveTool;
  readonly creator: number;
  /** A `subscriptions/listen` on this gateway follows the task from creation to its end; none when undefined. */
  readonly listenOn: number | undefined;
  /** slow_compute's run (past --task-after). */
  readonly seconds: number;
  /** Steps in order; the ops of one step run at once. */
  readonly steps: readonly (readonly LiveOp[])[];
  /** Who sends the final tasks/cancel that ends the case. */
  readonly finalCancel: number;
}

export const liveRecipe: fc.Arbitrary<LiveRecipe> = fc.record({
  tool: fc.constantFrom(...LIVE_TOOLS),
  creator: fc.nat({ max: 1 }),
  listenOn: fc.option(fc.nat({ max: 1 }), { freq: 3, nil: undefined }),
  seconds: fc.constantFrom(0.4, 0.8, 1.5),
  steps: fc.array(fc.array(liveOp, { minLength: 1, maxLength: 3 }), { minLength: 1, maxLength: 8 }),
  finalCancel: fc.nat({ max: 1 }),
});

// ---- records near the store's message limit (properties 4 and 5) ------------------------

/**
 * A slow_compute label of `labelBytes`: the task's record holds it in its
 * params, and again in its result once it completes. The store takes one
 * record per message (nats-server's default max_payload, 1 MiB).
 */
export interface RecordSizeRecipe {
  readonly gateway: number;
  readonly labelBytes: number;
}

/** Calls whose record (params alone) is around and past 1 MiB. */
export const oversizedCallRecipe: fc.Arbitrary<RecordSizeRecipe> = fc.record({
  gateway: fc.nat({ max: 1 }),
  labelBytes: fc.oneof(fc.integer({ min: 900_000, max: 1_500_000 }), fc.constantFrom(1_048_000, 1_100_000)),
});

/** Calls whose record fits, but whose record with the result (the label twice) may not. */
export const oversizedOutcomeRecipe: fc.Arbitrary<RecordSizeRecipe> = fc.record({
  gateway: fc.nat({ max: 1 }),
  labelBytes: fc.oneof(fc.integer({ min: 400_000, max: 1_000_000 }), fc.constantFrom(520_000, 600_000, 800_000)),
});
