import fc from 'fast-check';
import { UpstreamTools } from '@tether/testing';
import type { SeededSession, WireRequest } from './gateway-stack.js';

/**
 * Arbitraries of the gateway fuzz suite. Requests are generated as recipes
 * (which seeded session, which id of it, which mutation) and materialized at
 * run time, because the seeded sessions change while the suite runs (a
 * refused resume or a DELETE closes one and it is replaced).
 */

const BASE32 = [...'abcdefghijklmnopqrstuvwxyz234567'];
const BASE64URL = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'];

// ---- header values ---------------------------------------------------------

/**
 * What HTTP allows in a field value (RFC 9110 5.5): visible ASCII, space and
 * HTAB inside, obs-text (0x80-0xff). `fetch` takes header values as byte
 * strings, so Unicode goes on the wire as its UTF-8 bytes (`utf8Bytes`).
 */
const fieldChar = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)) },
  { weight: 1, arbitrary: fc.constantFrom(' ', '\t') },
  { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }).map((c) => String.fromCharCode(c)) },
);

/** Unicode text as the byte string of its UTF-8 encoding, minus what HTTP forbids (controls but HTAB). */
export function utf8Bytes(text: string): string {
  // eslint-disable-next-line no-control-regex
  return Buffer.from(text, 'utf8').toString('latin1').replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, '?');
}

export const fieldText = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.string({ unit: fieldChar, maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: 'grapheme', maxLength: Math.min(maxLength, 64) }).map(utf8Bytes) },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: Math.min(maxLength, 64) }).map(utf8Bytes) },
  );

// ---- session ids and event ids ---------------------------------------------

const counterText = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 2_000 }).map(String) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '0', '00', '01', '+1', '-1', '1.0', '1e3', '0x10', ' 1', '１',
      '9007199254740991', '9007199254740992', '9007199254740993', '18446744073709551615', '18446744073709551616',
      '9'.repeat(17), '9'.repeat(64), '1'.padEnd(300, '0'),
    ),
  },
  { weight: 2, arbitrary: fc.bigInt({ min: 0n, max: 2n ** 80n }).map(String) },
  { weight: 1, arbitrary: fc.string({ unit: fieldChar, maxLength: 6 }) },
);
const epochText = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: fc.constantFrom(...BASE32), minLength: 10, maxLength: 10 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...BASE32, 'A', 'Z', '0', '1', '8', '_'), maxLength: 14 }) },
);
const streamText = fc.oneof(
  { weight: 2, arbitrary: fc.constant('0') },
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...BASE32), minLength: 8, maxLength: 8 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...BASE32, '0', '9', 'Q'), maxLength: 10 }) },
);

/** Event ids that look valid (four `-`-separated fields) without naming any real event, and near misses. */
export const validLookingEventId = fc
  .tuple(epochText, streamText, counterText, counterText, fc.constantFrom('', '', '', '-', '-1', '--'))
  .map(([e, s, q, p, tail]) => `${e}-${s}-${q}-${p}${tail}`);

/** `Last-Event-ID` values with no relation to a real session: valid-looking, huge, Unicode, whitespace, empty. */
export const freeLastEventId: fc.Arbitrary<string> = fc.oneof(
  { weight: 5, arbitrary: validLookingEventId },
  { weight: 2, arbitrary: fieldText(120) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\t', '-', '---', '0-0-0-0', 'null', 'undefined', '[object Object]') },
  { weight: 1, arbitrary: fc.integer({ min: 81, max: 8_000 }).map((n) => '9'.repeat(n)) },
  { weight: 1, arbitrary: fc.tuple(validLookingEventId, fc.integer({ min: 1, max: 200 })).map(([id, n]) => `${id}${'-9'.repeat(n)}`) },
);

/** How a cursor is derived from a real id `epoch-stream-seq-pos` (of the victim or of the other session). */
export type CursorMutation =
  | { readonly t: 'exact' }
  | { readonly t: 'epoch'; readonly to: 'victim' | 'source' | 'random'; readonly random: string }
  | { readonly t: 'stream'; readonly to: 'victim' | 'source' | 'zero' | 'random'; readonly pick: number; readonly random: string }
  | { readonly t: 'seq'; readonly delta: number }
  | { readonly t: 'pos'; readonly delta: number }
  | { readonly t: 'counter'; readonly field: 'seq' | 'pos'; readonly text: string }
  | { readonly t: 'pos-of'; readonly from: 'victim' | 'source'; readonly pick: number }
  | { readonly t: 'flip'; readonly index: number; readonly char: string }
  | { readonly t: 'case' }
  | { readonly t: 'affix'; readonly prefix: string; readonly suffix: string }
  | { readonly t: 'truncate'; readonly keep: number };

export interface CursorRecipe {
  /** Whose id it starts from. */
  readonly base: 'victim' | 'source';
  /** Which of its ids (modulo how many it has). */
  readonly pick: number;
  readonly mutations: readonly CursorMutation[];
}

const mutation: fc.Arbitrary<CursorMutation> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ t: fc.constant('epoch' as const), to: fc.constantFrom('victim' as const, 'source' as const, 'random' as const), random: epochText }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('stream' as const), to: fc.constantFrom('victim' as const, 'source' as const, 'zero' as const, 'random' as const), pick: fc.nat(), random: streamText }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('seq' as const), delta: fc.integer({ min: -3, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('pos' as const), delta: fc.oneof(fc.integer({ min: -3, max: 3 }), fc.integer({ min: -1_000, max: 1_000_000 })) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('counter' as const), field: fc.constantFrom('seq' as const, 'pos' as const), text: counterText }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('pos-of' as const), from: fc.constantFrom('victim' as const, 'source' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('flip' as const), index: fc.nat(), char: fc.constantFrom(...BASE32, '-', '0', 'A', '\t', ' ', '\u00e9') }) },
  { weight: 1, arbitrary: fc.constant({ t: 'case' as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('affix' as const), prefix: fc.constantFrom('', ' ', '\t', '-', 'x', '0'), suffix: fc.constantFrom('', ' ', '\t', '-', '0', '-1', '\u00ff') }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('truncate' as const), keep: fc.nat({ max: 40 }) }) },
);

export const cursorRecipe = (base: fc.Arbitrary<'victim' | 'source'>): fc.Arbitrary<CursorRecipe> =>
  fc.record({
    base,
    pick: fc.nat(),
    mutations: fc.oneof({ weight: 2, arbitrary: fc.constant([]) }, { weight: 5, arbitrary: fc.array(mutation, { minLength: 1, maxLength: 3 }) }),
  });

/** The real sessions a cursor is derived from. */
export interface CursorSources {
  readonly victim: { readonly epoch: string; readonly ids: readonly string[] };
  readonly source: { readonly epoch: string; readonly ids: readonly string[] };
}

/** Applies a recipe to the current sessions; the result may be anything from a real id to garbage. */
export function deriveCursor(recipe: CursorRecipe, from: CursorSources): string {
  const ids = from[recipe.base].ids;
  const pickId = (owner: 'victim' | 'source', n: number): string => from[owner].ids[n % from[owner].ids.length]!;
  let id = ids[recipe.pick % ids.length]!;
  for (const m of recipe.mutations) {
    const parts = id.split('-');
    const set = (i: number, value: string): string => {
      const copy = [...parts];
      while (copy.length <= i) copy.push('');
      copy[i] = value;
      return copy.join('-');
    };
    const counter = (i: number, delta: number): string => {
      const n = /^[0-9]+$/.test(parts[i] ?? '') ? BigInt(parts[i]!) + BigInt(delta) : BigInt(delta);
      return set(i, String(n));
    };
    switch (m.t) {
      case 'exact':
        break;
      case 'epoch':
        id = set(0, m.to === 'random' ? m.random : from[m.to].epoch);
        break;
      case 'stream':
        id = set(1, m.to === 'zero' ? '0' : m.to === 'random' ? m.random : (pickId(m.to, m.pick).split('-')[1] ?? '0'));
        break;
      case 'seq':
        id = counter(2, m.delta);
        break;
      case 'pos':
        id = counter(3, m.delta);
        break;
      case 'counter':
        id = set(m.field === 'seq' ? 2 : 3, m.text);
        break;
      case 'pos-of':
        id = set(3, pickId(m.from, m.pick).split('-')[3] ?? '1');
        break;
      case 'flip': {
        const i = id.length === 0 ? 0 : m.index % id.length;
        id = `${id.slice(0, i)}${m.char}${id.slice(i + 1)}`;
        break;
      }
      case 'case':
        id = id.toUpperCase();
        break;
      case 'affix':
        id = `${m.prefix}${id}${m.suffix}`;
        break;
      case 'truncate':
        id = id.slice(0, m.keep);
        break;
    }
  }
  return id;
}

/**
 * A header value as bytes `fetch` can send: unchanged when it is already a
 * byte string; else (a mutation made `ÿ` into `Ÿ`, a fullwidth digit…) its
 * UTF-8 bytes, which is what a client would put on the wire.
 */
export function byteString(value: string): string {
  // eslint-disable-next-line no-control-regex
  return /[^\u0000-\u00ff]|[\u0000-\u0008\u000a-\u001f\u007f]/.test(value) ? utf8Bytes(value) : value;
}

export function wireHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, byteString(v)]));
}

/** A session id that is not a seeded session's. */
export const freeSessionId: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 22, maxLength: 22 }) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...BASE64URL), maxLength: 30 }) },
  { weight: 1, arbitrary: fieldText(64) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '0', 'null', '../../etc/passwd', 'tether.log.>', '*', '>', 'a.b.c', 'A'.repeat(22).replace(/A$/, '.')) },
);

/** Which session a request names. */
export type SessionRef =
  | { readonly t: 'none' }
  | { readonly t: 'seeded'; readonly slot: number }
  | { readonly t: 'seeded-flip'; readonly slot: number; readonly index: number; readonly char: string }
  | { readonly t: 'free'; readonly value: string };

export const sessionRef: fc.Arbitrary<SessionRef> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ t: 'none' as const }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('seeded' as const), slot: fc.nat({ max: 1 }) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('seeded-flip' as const), slot: fc.nat({ max: 1 }), index: fc.nat({ max: 21 }), char: fc.constantFrom(...BASE64URL, '.', '*', '>', ' ') }) },
  { weight: 2, arbitrary: fc.record({ t: fc.constant('free' as const), value: freeSessionId }) },
);

// ---- headers ---------------------------------------------------------------

export interface HeaderRecipe {
  readonly origin?: string;
  readonly accept?: string;
  readonly protocolVersion?: string;
  readonly authorization?: string;
  readonly contentType?: string;
}

const maybe = <T>(arb: fc.Arbitrary<T>, presentWeight = 1): fc.Arbitrary<T | undefined> =>
  fc.oneof({ weight: 1, arbitrary: fc.constant(undefined) }, { weight: presentWeight, arbitrary: arb });

export const headerRecipe: fc.Arbitrary<HeaderRecipe> = fc
  .record({
    // Mostly absent or loopback: any other origin is refused (403) before anything else is looked at.
    origin: fc.oneof(
      { weight: 6, arbitrary: fc.constant(undefined) },
      { weight: 2, arbitrary: fc.constantFrom('http://localhost', 'http://127.0.0.1:1234', 'http://[::1]', 'https://localhost:8443') },
      { weight: 1, arbitrary: fc.constantFrom('https://evil.example', 'null', 'file://', 'http://localhost.evil.example', 'http://127.0.0.1.nip.io', '') },
      { weight: 1, arbitrary: fc.oneof(fc.webUrl(), fieldText(40)) },
    ),
    accept: maybe(
      fc.oneof(
        { weight: 6, arbitrary: fc.constantFrom('application/json, text/event-stream', 'text/event-stream', 'application/json', '*/*', 'text/event-stream;q=0', 'text/html', '') },
        { weight: 1, arbitrary: fieldText(40) },
      ),
      6,
    ),
    protocolVersion: maybe(
      fc.oneof({ weight: 4, arbitrary: fc.constantFrom('2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '2026-07-28', '1999-01-01', '') }, { weight: 1, arbitrary: fieldText(24) }),
      3,
    ),
    // Mostly absent: a present one is another principal, to whom every seeded session is unknown.
    authorization: fc.oneof(
      { weight: 6, arbitrary: fc.constant(undefined) },
      { weight: 1, arbitrary: fc.constantFrom('Bearer fuzz', 'Basic Zm9vOmJhcg==', 'Bearer ', '') },
      { weight: 1, arbitrary: fieldText(200) },
    ),
    contentType: maybe(
      fc.oneof({ weight: 5, arbitrary: fc.constantFrom('application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', '') }, { weight: 1, arbitrary: fieldText(40) }),
      5,
    ),
  })
  .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)) as HeaderRecipe);

// ---- bodies ----------------------------------------------------------------

/** JSON text with numbers JSON.stringify cannot write (huge integers): `{ raw }` is copied verbatim. */
type RawJson = { readonly raw: string };
type JsonLike = null | boolean | number | string | RawJson | readonly JsonLike[] | { readonly [k: string]: JsonLike | undefined };

function isRaw(v: unknown): v is RawJson {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 1 && typeof (v as RawJson).raw === 'string';
}

export function writeJson(v: JsonLike | undefined): string {
  if (v === undefined) return 'null';
  if (isRaw(v)) return v.raw;
  if (Array.isArray(v)) return `[${v.map((x) => writeJson(x)).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    return `{${Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => `${JSON.stringify(k)}:${writeJson(x as JsonLike)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

const hugeNumber = fc.oneof(
  fc.constantFrom('9007199254740993', '-9007199254740993', '123456789012345678901234567890', '1e400', '-1e400', '1E+308', '0.0000000000000000000001', '-0'),
  fc.bigInt({ min: -(2n ** 200n), max: 2n ** 200n }).map(String),
).map((raw): RawJson => ({ raw }));

const garbage: fc.Arbitrary<JsonLike> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 4 }) as fc.Arbitrary<JsonLike> },
  { weight: 1, arbitrary: hugeNumber },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 3_000 }).map((depth): RawJson => ({ raw: `${'['.repeat(depth)}${']'.repeat(depth)}` })) },
);

const jsonRpcId: fc.Arbitrary<JsonLike | undefined> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: -5, max: 1_000_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(0, -1, 2 ** 31, 2 ** 53 - 1, 2 ** 53, 1e308, -1e308, 0.5, Number.MIN_VALUE) },
  { weight: 1, arbitrary: hugeNumber },
  { weight: 2, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, undefined) },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<JsonLike> },
);

const KNOWN_METHODS = [
  'initialize', 'notifications/initialized', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/read', 'resources/subscribe',
  'prompts/list', 'prompts/get', 'logging/setLevel', 'completion/complete', 'notifications/cancelled', 'notifications/progress',
  'notifications/roots/list_changed', 'sampling/createMessage', 'roots/list', 'elicitation/create', '', 'rpc.discover',
];

const toolCallParams: fc.Arbitrary<JsonLike> = fc.record(
  {
    name: fc.oneof(fc.constantFrom(UpstreamTools.Echo, UpstreamTools.StreamProgress, UpstreamTools.NotifyStandalone, 'nope', ''), fc.string({ maxLength: 20 })),
    // Real tools get bounded arguments (the suite must stay short); anything else is garbage.
    arguments: fc.oneof(
      fc.record({ count: fc.integer({ min: 0, max: 3 }), delayMs: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ text: fc.string({ maxLength: 200 }) }),
      garbage,
    ),
    _meta: fc.oneof(fc.constant(undefined), fc.record({ progressToken: fc.oneof(fc.string({ maxLength: 20 }), fc.integer(), fc.constant(null)) }) as fc.Arbitrary<JsonLike>),
  },
  { requiredKeys: [] },
) as fc.Arbitrary<JsonLike>;

const initializeParams: fc.Arbitrary<JsonLike> = fc.oneof(
  fc.record({
    protocolVersion: fc.oneof(fc.constantFrom('2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05', '1999-01-01'), fc.string({ maxLength: 12 })),
    capabilities: fc.oneof(fc.constant({}), garbage),
    clientInfo: fc.oneof(fc.constant({ name: 'fuzz', version: '0' }), garbage),
  }) as fc.Arbitrary<JsonLike>,
  garbage,
);

const jsonRpcMessage: fc.Arbitrary<JsonLike> = fc
  .record(
    {
      jsonrpc: fc.oneof({ weight: 8, arbitrary: fc.constant('2.0') }, { weight: 1, arbitrary: fc.constantFrom('1.0', '2', 2, null, '2.0 ') }),
      id: jsonRpcId,
      method: fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...KNOWN_METHODS) }, { weight: 1, arbitrary: fc.string({ maxLength: 30 }) }, { weight: 1, arbitrary: garbage }),
      params: fc.oneof(fc.constant(undefined), garbage),
      result: fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: garbage }),
      error: fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.oneof(fc.record({ code: fc.integer(), message: fc.string() }) as fc.Arbitrary<JsonLike>, garbage) }),
      extra: fc.oneof({ weight: 5, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: garbage }),
    },
    { requiredKeys: ['jsonrpc'] },
  )
  .chain((m) => {
    // Real methods with params shaped like theirs, part of the time.
    if (m.method === 'tools/call') return fc.oneof(fc.constant(m), toolCallParams.map((params) => ({ ...m, params })));
    if (m.method === 'initialize') return fc.oneof(fc.constant(m), initializeParams.map((params) => ({ ...m, params })));
    return fc.constant(m);
  }) as fc.Arbitrary<JsonLike>;

/** Request bodies: none, random bytes, random JSON, JSON-RPC messages and batches, oversized. */
export type BodyRecipe =
  | { readonly t: 'none' }
  | { readonly t: 'bytes'; readonly bytes: Uint8Array }
  | { readonly t: 'json'; readonly text: string }
  | { readonly t: 'oversized' };

export const bodyRecipe: fc.Arbitrary<BodyRecipe> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ t: 'none' as const }) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 2_048 }).map((bytes) => ({ t: 'bytes' as const, bytes })) },
  { weight: 2, arbitrary: garbage.map((v) => ({ t: 'json' as const, text: writeJson(v) })) },
  { weight: 8, arbitrary: jsonRpcMessage.map((v) => ({ t: 'json' as const, text: writeJson(v) })) },
  { weight: 3, arbitrary: fc.array(jsonRpcMessage, { maxLength: 6 }).map((v) => ({ t: 'json' as const, text: writeJson(v) })) },
  { weight: 1, arbitrary: fc.tuple(jsonRpcMessage, fc.integer({ min: 1, max: 64 })).map(([v, cut]) => ({ t: 'json' as const, text: writeJson(v).slice(0, -cut) })) },
  { weight: 1, arbitrary: fc.constant({ t: 'oversized' as const }) },
);

/** The gateway's default `--max-body-bytes` (4 MiB), plus one. */
const OVERSIZED_BODY = Buffer.alloc(4 * 1024 * 1024 + 1, 0x20);

export function bodyBytes(body: BodyRecipe): Uint8Array | undefined {
  switch (body.t) {
    case 'none':
      return undefined;
    case 'bytes':
      return body.bytes;
    case 'json':
      return Buffer.from(body.text, 'utf8');
    case 'oversized':
      return OVERSIZED_BODY;
  }
}

export const httpMethod = fc.oneof(
  { weight: 8, arbitrary: fc.constant('POST') },
  { weight: 6, arbitrary: fc.constant('GET') },
  { weight: 2, arbitrary: fc.constant('DELETE') },
  { weight: 1, arbitrary: fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD', 'PROPFIND', 'get') },
);

export const requestPath = fc.oneof(
  { weight: 12, arbitrary: fc.constant('/mcp') },
  { weight: 1, arbitrary: fc.constantFrom('/mcp?x=1', '/mcp?', '/mcp/', '/MCP', '/', '//mcp', '/mcp%00', '/%2e%2e/mcp', '/mcp;a=b', '/healthz?x') },
);

export type LastEventIdRef = { readonly t: 'none' } | { readonly t: 'free'; readonly value: string } | { readonly t: 'derived'; readonly slot: number; readonly cursor: CursorRecipe };

export const lastEventIdRef: fc.Arbitrary<LastEventIdRef> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ t: 'none' as const }) },
  { weight: 2, arbitrary: freeLastEventId.map((value) => ({ t: 'free' as const, value })) },
  { weight: 3, arbitrary: fc.record({ t: fc.constant('derived' as const), slot: fc.nat({ max: 1 }), cursor: cursorRecipe(fc.constantFrom('victim' as const, 'source' as const)) }) },
);

/** One fuzzed HTTP request, as recipes: what the gateway and the SDK router suites both send. */
export interface FuzzedRequest {
  readonly method: string;
  readonly path: string;
  readonly session: SessionRef;
  readonly lastEventId: LastEventIdRef;
  readonly headers: HeaderRecipe;
  readonly body: BodyRecipe;
}

export const fuzzedRequest: fc.Arbitrary<FuzzedRequest> = fc.record({ method: httpMethod, path: requestPath, session: sessionRef, lastEventId: lastEventIdRef, headers: headerRecipe, body: bodyRecipe });

/**
 * The request on the wire, against the seeded sessions in `slots`: the
 * session it names (`named`, when it names one as is) and the bytes sent.
 */
export function materialize(r: FuzzedRequest, slots: readonly SeededSession[]): { named: SeededSession | undefined; req: WireRequest } {
  const named = r.session.t === 'seeded' ? slots[r.session.slot] : undefined;
  const headers = headersOf(r.headers);
  const sessionId = sessionIdOf(r.session, slots);
  if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
  if (r.lastEventId.t === 'free') headers['last-event-id'] = r.lastEventId.value;
  if (r.lastEventId.t === 'derived') {
    const source = slots[r.lastEventId.slot]!;
    headers['last-event-id'] = deriveCursor(r.lastEventId.cursor, { victim: named ?? source, source });
  }
  // fetch sends no body with GET or HEAD.
  const bodyless = ['GET', 'HEAD'].includes(r.method.toUpperCase());
  return { named, req: { method: r.method, path: r.path, headers: wireHeaders(headers), body: bodyless ? undefined : bodyBytes(r.body) } };
}

function headersOf(h: HeaderRecipe): Record<string, string> {
  const out: Record<string, string> = {};
  if (h.origin !== undefined) out['origin'] = h.origin;
  if (h.accept !== undefined) out['accept'] = h.accept;
  if (h.protocolVersion !== undefined) out['mcp-protocol-version'] = h.protocolVersion;
  if (h.authorization !== undefined) out['authorization'] = h.authorization;
  if (h.contentType !== undefined) out['content-type'] = h.contentType;
  return out;
}

/** The session id a reference names against `slots`. */
export function sessionIdOf(ref: SessionRef, slots: readonly SeededSession[]): string | undefined {
  switch (ref.t) {
    case 'none':
      return undefined;
    case 'seeded':
      return slots[ref.slot]!.sessionId;
    case 'seeded-flip': {
      const id = slots[ref.slot]!.sessionId;
      // One character off, never the same id: a "flip" to the character
      // already there named the seeded session itself, and its own events
      // were then judged another session's (seen at 12,283 cases).
      const char = ref.char === id[ref.index] ? (ref.char === 'A' ? 'B' : 'A') : ref.char;
      return `${id.slice(0, ref.index)}${char}${id.slice(ref.index + 1)}`;
    }
    case 'free':
      return ref.value;
  }
}
