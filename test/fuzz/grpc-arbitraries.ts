import fc from 'fast-check';
import { validLookingEventId } from './http-arbitraries.js';
import type { RpcName } from './grpc-stack.js';

/**
 * Arbitraries of the gRPC fuzz suite. Typed requests are built from field
 * arbitraries with references to live sessions (`Ref`), resolved at run
 * time; raw requests are protobuf wire bytes written by hand, so they can
 * hold what the generated encoder refuses to write (uint64 above 2^53,
 * negative varints, wrong wire types, truncated fields).
 */

const BASE32 = [...'abcdefghijklmnopqrstuvwxyz234567'];
const BASE64URL = [...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'];

/** A value that names a live session (or its streams and events); resolved just before the call. */
export type Ref =
  | { readonly $ref: 'session'; readonly slot: number; readonly flip?: { readonly index: number; readonly char: string } }
  | { readonly $ref: 'stream'; readonly slot: number; readonly pick: number }
  | { readonly $ref: 'event-id'; readonly slot: number; readonly pick: number; readonly cut: number };

/** Any text, empty and oversized included: proto3 strings are UTF-8, so every code point (controls too) may go. */
const anyText = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.string({ maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength }) },
    { weight: 1, arbitrary: fc.constantFrom('', ' ', '\u0000', '\u001f', '\u007f', '\ud83d\ude00', '\u202e', 'tether.caller', 'tether.log.>', '*', '>') },
    { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 70_000 }).chain((n) => fc.constantFrom('x', '\u00e9', '\ud83d\ude00', '0').map((c) => c.repeat(n))) },
  );

const freeSessionId = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: fc.constantFrom(...BASE64URL), minLength: 22, maxLength: 22 }) },
  { weight: 2, arbitrary: anyText(40) },
);

/** A session id field: one of the live sessions (maybe one character off), or anything. */
export const sessionField = (slots: number): fc.Arbitrary<string | Ref> =>
  fc.oneof(
    { weight: 5, arbitrary: fc.record({ $ref: fc.constant('session' as const), slot: fc.nat({ max: slots - 1 }) }) },
    {
      weight: 1,
      arbitrary: fc.record({ $ref: fc.constant('session' as const), slot: fc.nat({ max: slots - 1 }), flip: fc.record({ index: fc.nat({ max: 21 }), char: fc.constantFrom(...BASE64URL, '.', '*', '>', '\u0000') }) }),
    },
    { weight: 2, arbitrary: freeSessionId },
  );

export const streamField = (slots: number): fc.Arbitrary<string | Ref> =>
  fc.oneof(
    { weight: 4, arbitrary: fc.record({ $ref: fc.constant('stream' as const), slot: fc.nat({ max: slots - 1 }), pick: fc.nat() }) },
    { weight: 2, arbitrary: fc.constantFrom('0', '00', '', '1', 'aaaaaaaa', 'AAAAAAAA', 'aaaaaaa0', 'aaaaaaaaa', '0.0', '*', '>', 'a.b') },
    { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom(...BASE32), minLength: 8, maxLength: 8 }) },
    { weight: 1, arbitrary: anyText(20) },
  );

/** uint64 values the generated encoder can write (0 to 2^53 - 1); the raw suite goes beyond. */
export const u64 = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 20 }) },
  { weight: 2, arbitrary: fc.constantFrom(0, 1, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 53 - 2, Number.MAX_SAFE_INTEGER) },
  { weight: 1, arbitrary: fc.maxSafeNat() },
);
export const u32 = fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.constantFrom(0, 1, 999, 1_000, 600_000, 600_001, 10_000, 10_001, 2 ** 31, 2 ** 32 - 1), fc.nat({ max: 2 ** 32 - 1 }));
export const i64 = fc.oneof(fc.integer({ min: -5, max: 5 }), fc.constantFrom(Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, Date.now(), -Date.now()), fc.maxSafeInteger());
/** Enum fields are int32 on the wire: known values and unknown ones. */
export const enumValue = fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 0, max: 3 }) }, { weight: 1, arbitrary: fc.constantFrom(4, 99, -1, 2 ** 31 - 1, -(2 ** 31)) });

export const payloadField = fc.oneof(
  { weight: 4, arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => Buffer.from(b)) },
  { weight: 1, arbitrary: fc.constant(Buffer.alloc(0)) },
  // Around the service's --max-payload-bytes (4096 in this suite).
  { weight: 1, arbitrary: fc.integer({ min: 4_090, max: 4_200 }).map((n) => Buffer.alloc(n, 0x61)) },
);

export const eventIdField = (slots: number): fc.Arbitrary<string | Ref> =>
  fc.oneof(
    { weight: 3, arbitrary: fc.record({ $ref: fc.constant('event-id' as const), slot: fc.nat({ max: slots - 1 }), pick: fc.nat(), cut: fc.oneof(fc.constant(0), fc.nat({ max: 60 })) }) },
    { weight: 3, arbitrary: validLookingEventId },
    { weight: 1, arbitrary: anyText(100) },
  );

const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> => fc.option(arb, { nil: undefined });

const metaField = fc.oneof(
  { weight: 3, arbitrary: fc.dictionary(fc.string({ maxLength: 12 }), fc.string({ maxLength: 40 }), { maxKeys: 4 }) },
  { weight: 1, arbitrary: fc.dictionary(anyText(30), anyText(200), { maxKeys: 40 }) },
  { weight: 1, arbitrary: fc.constantFrom({ 'tether.caller': 'other' }, { '': 'x' }, { big: 'x'.repeat(5_000) }) },
);
const principalField = fc.oneof({ weight: 3, arbitrary: fc.constant('fuzz-user') }, { weight: 2, arbitrary: anyText(40) }, { weight: 1, arbitrary: fc.constantFrom('x'.repeat(1_024), 'x'.repeat(1_025)) });

/** Every RPC's request, with every field drawn from its arbitrary. */
export function typedRequest(slots: number): fc.Arbitrary<{ rpc: RpcName; request: Record<string, unknown> }> {
  const session = sessionField(slots);
  const stream = streamField(slots);
  const appendRequest = fc.record(
    {
      sessionId: session,
      stream,
      kind: enumValue,
      payload: payloadField,
      upstreamId: maybe(anyText(1_100)),
      endReason: enumValue,
      traceparent: maybe(fc.oneof(fc.constant('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'), anyText(600))),
      expectedSeq: maybe(u64),
    },
    { requiredKeys: ['sessionId', 'stream', 'kind', 'payload', 'endReason'] },
  );
  const lease = fc.record({ sessionId: session, stream, owner: anyText(140), token: anyText(40), expiresAtMs: i64, revision: u64 });
  const auditRequest = fc.record(
      {
        sessionId: session,
        atMs: fc.oneof(fc.constant(0), fc.constant(Date.now()), i64),
        instance: fc.oneof(fc.constant('gw-fuzz'), anyText(140)),
        kind: fc.oneof(fc.constantFrom('initialize', 'post', 'get', 'resume', 'delete', 'claim', 'takeover', 'drain', 'close', 'delivered'), anyText(20)),
        stream: maybe(stream),
        cursor: maybe(fc.record({ stream, seq: u64, pos: u64 })),
        verdict: maybe(fc.oneof(fc.constantFrom('resumed', 'truncated', 'unknown_session'), anyText(20))),
        status: maybe(u32),
        events: maybe(u64),
        conn: maybe(fc.oneof(fc.constant('AbCd12_-'), anyText(40))),
        writer: maybe(fc.oneof(fc.constant('aaaaaaaaaaaaaaaa'), anyText(80))),
        from: maybe(fc.oneof(fc.constant('bbbbbbbbbbbbbbbb'), anyText(80))),
        reason: maybe(fc.oneof(fc.constant('client_gone'), anyText(80))),
      },
      { requiredKeys: ['sessionId', 'atMs', 'instance', 'kind'] },
    );
  const taskIdField = fc.oneof(fc.constant('AAAAAAAAAAAAAAAAAAAAAA'), fc.constant('a.b.>'), anyText(100));
  const taskRecordBytes = fc.oneof(
    fc.uint8Array({ maxLength: 400 }).map((b) => Buffer.from(b)),
    fc.jsonValue({ maxDepth: 3 }).map((v) => Buffer.from(JSON.stringify(v))),
    fc.record({ v: fc.constant(1), taskId: taskIdField, principal: anyText(40), status: fc.constantFrom('working', 'completed', 'bogus'), createdAtMs: u64, ttlMs: u64, params: fc.constant({}) }).map((v) => Buffer.from(JSON.stringify(v))),
  );
  const byRpc: { [K in RpcName]: fc.Arbitrary<Record<string, unknown>> } = {
    openSession: fc.record({ principal: principalField, meta: metaField }),
    getSession: fc.record({ sessionId: session, principal: principalField }),
    touchSession: fc.record({ sessionId: session }),
    closeSession: fc.record({ sessionId: session, from: anyText(300) }),
    append: appendRequest,
    appendBatch: fc.record({ entries: fc.array(appendRequest, { maxLength: 20 }) }),
    head: fc.record({ sessionId: session, stream }),
    read: fc.record({ sessionId: session, stream, afterSeq: u64, limit: u32, afterPos: maybe(u64) }, { requiredKeys: ['sessionId', 'stream', 'afterSeq', 'limit'] }),
    resume: fc.record({ sessionId: session, lastEventId: eventIdField(slots), principal: principalField }),
    follow: fc.record({ sessionId: session, stream, afterSeq: u64, afterPos: u64 }),
    acquireLease: fc.record({ sessionId: session, stream, owner: anyText(140), ttlMs: u32 }),
    renewLease: fc.record({ lease: maybe(lease), ttlMs: u32 }, { requiredKeys: ['ttlMs'] }),
    releaseLease: fc.record({ lease: maybe(lease) }, { requiredKeys: [] }),
    getLeaseHolder: fc.record({ sessionId: session, stream }),
    publishControl: fc.record({ message: maybe(fc.record({ type: enumValue, sessionId: session, stream: maybe(anyText(70)), from: maybe(anyText(300)) }, { requiredKeys: ['type', 'sessionId'] })) }, { requiredKeys: [] }),
    watchControl: fc.record({ sessionId: session }),
    recordAudit: auditRequest,
    recordAuditBatch: fc.record({ events: fc.array(auditRequest, { maxLength: 12 }) }),
    watchAdmin: fc.record({ instance: fc.oneof(fc.constant('gw-fuzz'), fc.constant('a..b'), anyText(140)) }),
    answerAdmin: fc.record({ instance: fc.oneof(fc.constant('gw-fuzz'), anyText(140)), requestId: fc.oneof(fc.constant('0123456789abcdef0123456789abcdef'), anyText(40)), ok: fc.boolean(), detail: anyText(300) }),
    probeWriter: fc.record({ writer: fc.oneof(fc.constant('aaaaaaaaaaaaaaaa'), anyText(80)), sessionId: maybe(session), stream: maybe(stream), timeoutMs: maybe(fc.oneof(fc.constant(20), u32)) }, { requiredKeys: ['writer'] }),
    // The task RPCs: ids of every shape, records as arbitrary bytes or JSON (the service checks them field by field).
    openTasks: fc.record({ maxTtlMs: maybe(u64) }, { requiredKeys: [] }),
    createTask: fc.record({ record: taskRecordBytes }),
    getTask: fc.record({ taskId: taskIdField }),
    listWorkingTasks: fc.constant({}),
    compareAndSetTask: fc.record({ taskId: taskIdField, expectedSeq: u64, record: taskRecordBytes }),
    watchTask: fc.record({ taskId: taskIdField }),
    requestCancel: fc.record({ writer: fc.oneof(fc.constant('aaaaaaaaaaaaaaaa'), anyText(80)), taskId: taskIdField, timeoutMs: maybe(fc.oneof(fc.constant(20), u32)) }, { requiredKeys: ['writer', 'taskId'] }),
  };
  return fc.oneof(...(Object.entries(byRpc) as [RpcName, fc.Arbitrary<Record<string, unknown>>][]).map(([rpc, arb]) => arb.map((request) => ({ rpc, request }))));
}

// ---- raw protobuf wire bytes -------------------------------------------------

/** One field as written on the wire: any number, any wire type (valid or not), any value. */
export type RawField =
  | { readonly t: 'varint'; readonly field: number; readonly value: bigint }
  | { readonly t: 'fixed64'; readonly field: number; readonly value: bigint }
  | { readonly t: 'bytes'; readonly field: number; readonly value: Uint8Array; readonly lengthDelta: number }
  | { readonly t: 'fixed32'; readonly field: number; readonly value: number }
  | { readonly t: 'group'; readonly field: number; readonly end: boolean }
  | { readonly t: 'bad-wire-type'; readonly field: number; readonly wireType: 6 | 7 };

function varint(value: bigint): number[] {
  // Negative values go out as their 64-bit two's complement (10 bytes), as protobuf writes an int64 -1.
  let v = value < 0n ? (1n << 64n) + value : value;
  const out: number[] = [];
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
}

const tag = (field: number, wireType: number): number[] => varint((BigInt(field) << 3n) | BigInt(wireType));

export function encodeRawFields(fields: readonly RawField[]): Buffer {
  const out: number[] = [];
  for (const f of fields) {
    switch (f.t) {
      case 'varint':
        out.push(...tag(f.field, 0), ...varint(f.value));
        break;
      case 'fixed64': {
        const b = Buffer.alloc(8);
        b.writeBigUInt64LE(BigInt.asUintN(64, f.value));
        out.push(...tag(f.field, 1), ...b);
        break;
      }
      case 'bytes':
        out.push(...tag(f.field, 2), ...varint(BigInt(Math.max(0, f.value.length + f.lengthDelta))), ...f.value);
        break;
      case 'fixed32': {
        const b = Buffer.alloc(4);
        b.writeUInt32LE(f.value >>> 0);
        out.push(...tag(f.field, 5), ...b);
        break;
      }
      case 'group':
        out.push(...tag(f.field, f.end ? 4 : 3));
        break;
      case 'bad-wire-type':
        out.push(...tag(f.field, f.wireType));
        break;
    }
  }
  return Buffer.from(out);
}

/** Field numbers our messages use (1-13), zero, and far ones. */
const fieldNumber = fc.oneof({ weight: 6, arbitrary: fc.integer({ min: 1, max: 13 }) }, { weight: 1, arbitrary: fc.constantFrom(0, 14, 100, 2 ** 29 - 1) });
/** Varints past what the TypeScript stubs can hold (2^53 - 1), negative ones, and the 64-bit edges. */
export const hugeVarint = fc.oneof(
  fc.constantFrom(2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, -1n, -(2n ** 53n) - 1n, -(2n ** 63n)),
  fc.bigInt({ min: 2n ** 53n, max: 2n ** 64n - 1n }),
  fc.bigInt({ min: -(2n ** 63n), max: -1n }),
);

export const rawField: fc.Arbitrary<RawField> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ t: fc.constant('varint' as const), field: fieldNumber, value: fc.oneof(fc.bigInt({ min: 0n, max: 100n }), hugeVarint) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('fixed64' as const), field: fieldNumber, value: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }) }) },
  {
    weight: 4,
    arbitrary: fc.record({
      t: fc.constant('bytes' as const),
      field: fieldNumber,
      value: fc.oneof(fc.uint8Array({ maxLength: 64 }), fc.string({ unit: 'binary', maxLength: 30 }).map((s) => new Uint8Array(Buffer.from(s, 'utf8')))),
      lengthDelta: fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: -3, max: 3 }) }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('fixed32' as const), field: fieldNumber, value: fc.integer() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('group' as const), field: fieldNumber, end: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('bad-wire-type' as const), field: fieldNumber, wireType: fc.constantFrom(6 as const, 7 as const) }) },
);

/** Request bytes: random, or fields written by hand (huge numbers, wrong types, bad lengths), or nothing. */
export const rawRequest: fc.Arbitrary<{ rpc: RpcName; bytes: Buffer; shape: string }> = fc.record({
  rpc: fc.constantFrom<RpcName>(
    'openSession', 'getSession', 'touchSession', 'closeSession', 'append', 'appendBatch', 'head', 'read',
    'resume', 'follow', 'acquireLease', 'renewLease', 'releaseLease', 'getLeaseHolder', 'publishControl', 'watchControl', 'probeWriter', 'recordAudit', 'recordAuditBatch', 'watchAdmin', 'answerAdmin',
  ),
  body: fc.oneof(
    { weight: 2, arbitrary: fc.uint8Array({ maxLength: 256 }).map((b) => ({ bytes: Buffer.from(b), shape: 'random bytes' })) },
    { weight: 5, arbitrary: fc.array(rawField, { maxLength: 6 }).map((fields) => ({ bytes: encodeRawFields(fields), shape: `fields ${JSON.stringify(fields, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v instanceof Uint8Array ? Buffer.from(v).toString('hex') : v))}` })) },
  ),
}).map(({ rpc, body }) => ({ rpc, bytes: body.bytes, shape: body.shape }));
