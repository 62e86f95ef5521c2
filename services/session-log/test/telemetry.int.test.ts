import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, status } from '@grpc/grpc-js';
import { callUnary, createCursorClient, EventKind, ResumeVerdict } from '@tether/cursor-proto';
import type { CursorServiceClient } from '@tether/cursor-proto';
import { appendRequest, bytes, collect, failure, startServiceFixture } from './fixture.js';
import type { ServiceFixture } from './fixture.js';
import { attributesOf, startOtlpReceiver } from './otlp-receiver.js';
import type { OtlpReceiver, OtlpSpan } from './otlp-receiver.js';

/**
 * The service process exports to an OTLP/HTTP receiver started here; calls
 * carry a known `traceparent` in their metadata, as a gateway in
 * `--log grpc://` mode sends it.
 */
let receiver: OtlpReceiver;
let fx: ServiceFixture;
let service: Awaited<ReturnType<ServiceFixture['start']>>;
let client: CursorServiceClient;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
  fx = await startServiceFixture();
  service = await fx.start([], 'session-log-otel', receiver.env);
  client = fx.client();
});
afterAll(async () => {
  await fx?.teardown();
  await receiver?.close();
});

const SERVICE = 'tether.cursor.v1.CursorService';
const SPAN_KIND_SERVER = 2;
const STATUS_ERROR = 2;
let traces = 0;

/** A fresh caller trace: its ids, and metadata carrying it. */
function callerTrace() {
  traces += 1;
  const traceId = `${'a'.repeat(24)}${traces.toString(16).padStart(8, '0')}`;
  const spanId = `${'b'.repeat(12)}${traces.toString(16).padStart(4, '0')}`;
  const metadata = new Metadata();
  metadata.set('traceparent', `00-${traceId}-${spanId}-01`);
  return { traceId, spanId, metadata };
}

const spanOf = (method: string, traceId: string) => receiver.eventually(`${method} span of ${traceId}`, () => receiver.spans.find((s) => s.name === `${SERVICE}/${method}` && s.traceId === traceId));

function expectServerSpan(span: OtlpSpan, method: string, parent: { traceId: string; spanId: string }, code: status): void {
  expect(span.kind).toBe(SPAN_KIND_SERVER);
  expect(span.traceId).toBe(parent.traceId);
  expect(span.parentSpanId).toBe(parent.spanId);
  expect(attributesOf(span)).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': SERVICE, 'rpc.method': method, 'rpc.grpc.status_code': code });
}

describe('traces of the cursor API', () => {
  it('one server span per call, parented on the traceparent in its metadata', async () => {
    const t = callerTrace();
    const { session } = await callUnary(client.openSession.bind(client), { principal: 'user-1', meta: {} }, { metadata: t.metadata });
    const sessionId = session!.sessionId;
    await callUnary(client.head.bind(client), { sessionId, stream: 'abcdefgh' }, { metadata: t.metadata });
    await callUnary(client.touchSession.bind(client), { sessionId }, { metadata: t.metadata });
    for (const method of ['OpenSession', 'Head', 'TouchSession']) {
      const span = await spanOf(method, t.traceId);
      expectServerSpan(span, method, t, status.OK);
      expect(attributesOf(span)['tether.caller']).toBe('alice');
      expect(span.status?.code ?? 0).not.toBe(STATUS_ERROR);
    }

    // A domain error is the call's status on its span, but not a failed span.
    const missing = callerTrace();
    expect((await failure(callUnary(client.getSession.bind(client), { sessionId: 'CCCCCCCCCCCCCCCCCCCCCC', principal: 'user-1' }, { metadata: missing.metadata }))).code).toBe(status.NOT_FOUND);
    const notFound = await spanOf('GetSession', missing.traceId);
    expectServerSpan(notFound, 'GetSession', missing, status.NOT_FOUND);
    expect(notFound.status?.code ?? 0).not.toBe(STATUS_ERROR);

    // Without a traceparent a call starts its own trace.
    const before = receiver.spans.length;
    await callUnary(client.touchSession.bind(client), { sessionId }, {});
    const root = await receiver.eventually('root TouchSession span', () => receiver.spans.slice(before).find((s) => s.name === `${SERVICE}/TouchSession`));
    expect(root.parentSpanId ?? '').toBe('');
    expect(root.traceId).not.toBe(t.traceId);
  });

  it('a call refused for its credentials has a span too (UNAUTHENTICATED)', async () => {
    const t = callerTrace();
    const stranger = createCursorClient({ target: service.target, token: 'not-a-valid-token-0123456789' });
    try {
      const refused = await failure(callUnary(stranger.head.bind(stranger), { sessionId: 'abc', stream: 'abcdefgh' }, { metadata: t.metadata }));
      expect(refused.code).toBe(status.UNAUTHENTICATED);
    } finally {
      stranger.close();
    }
    expectServerSpan(await spanOf('Head', t.traceId), 'Head', t, status.UNAUTHENTICATED);
  });

  it('Append and AppendBatch store their trace context with the event, unless the entry brings its own', async () => {
    const { session } = await callUnary(client.openSession.bind(client), { principal: 'user-1', meta: {} });
    const sessionId = session!.sessionId;
    const stream = 'tracedst';

    const t1 = callerTrace();
    await callUnary(client.append.bind(client), appendRequest({ sessionId, stream, payload: bytes('one') }), { metadata: t1.metadata });
    const own = `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`;
    const t2 = callerTrace();
    await callUnary(client.append.bind(client), appendRequest({ sessionId, stream, payload: bytes('two'), traceparent: own }), { metadata: t2.metadata });
    const t3 = callerTrace();
    const batch = await callUnary(
      client.appendBatch.bind(client),
      { entries: [appendRequest({ sessionId, stream, payload: bytes('three') }), appendRequest({ sessionId, stream, payload: bytes('four') })] },
      { metadata: t3.metadata },
    );
    expect(batch.results.every((r) => r.appended !== undefined)).toBe(true);

    const append1 = await spanOf('Append', t1.traceId);
    expectServerSpan(append1, 'Append', t1, status.OK);
    const append2 = await spanOf('Append', t2.traceId);
    expectServerSpan(append2, 'Append', t2, status.OK);
    const appendBatch = await spanOf('AppendBatch', t3.traceId);
    expectServerSpan(appendBatch, 'AppendBatch', t3, status.OK);

    const { events } = await callUnary(client.read.bind(client), { sessionId, stream, afterSeq: 0, limit: 10, afterPos: undefined });
    // The stored context is the Append span's: a reader links back to the call that wrote the event.
    expect(events.map((e) => e.traceparent)).toEqual([
      `00-${t1.traceId}-${append1.spanId}-01`,
      own,
      `00-${t3.traceId}-${appendBatch.spanId}-01`,
      `00-${t3.traceId}-${appendBatch.spanId}-01`,
    ]);
  });

  it('Resume: a span for the whole stream with tether.verdict; a refusal has its status, and its log line the trace id', async () => {
    const { session } = await callUnary(client.openSession.bind(client), { principal: 'user-1', meta: {} });
    const sessionId = session!.sessionId;
    const stream = 'resumest';
    const ids: string[] = [];
    for (const text of ['e1', 'e2', 'e3']) ids.push((await callUnary(client.append.bind(client), appendRequest({ sessionId, stream, payload: bytes(text) }))).id);
    await callUnary(client.append.bind(client), appendRequest({ sessionId, stream, kind: EventKind.END }));

    const ok = callerTrace();
    const messages = await collect(client.resume({ sessionId, lastEventId: ids[0]!, principal: 'user-1' }, ok.metadata));
    expect(messages[0]?.ack?.verdict).toBe(ResumeVerdict.RESUMED);
    const resumed = await spanOf('Resume', ok.traceId);
    expectServerSpan(resumed, 'Resume', ok, status.OK);
    expect(attributesOf(resumed)).toMatchObject({ 'tether.verdict': 'resumed', 'tether.stream': stream, 'tether.events': messages.length - 1 });

    const refused = callerTrace();
    const failed = await failure(collect(client.resume({ sessionId: 'CCCCCCCCCCCCCCCCCCCCCC', lastEventId: ids[0]!, principal: 'user-1' }, refused.metadata)));
    expect(failed.code).toBe(status.NOT_FOUND);
    const refusal = await spanOf('Resume', refused.traceId);
    expectServerSpan(refusal, 'Resume', refused, status.NOT_FOUND);
    expect(attributesOf(refusal)['tether.verdict']).toBe('unknown_session');
    expect(refusal.status?.code ?? 0).not.toBe(STATUS_ERROR);

    // Logs: the line about the refusal carries the trace it belongs to.
    const line = await receiver.eventually('resume refused log line', () => service.stdoutJson.find((l) => l.msg === 'resume refused' && l.trace_id === refused.traceId));
    expect(line).toMatchObject({ service: 'tether-session-log', span_id: refusal.spanId, verdict: 'unknown_session' });
  });
});

describe('metrics of the cursor API', () => {
  it('append latency, resumes by verdict, replayed events and open streams', async () => {
    const metered = await fx.start([], 'session-log-metrics', { ...receiver.env, OTEL_METRICS_EXPORTER: 'otlp', OTEL_TRACES_EXPORTER: 'none', OTEL_METRIC_EXPORT_INTERVAL: '300' });
    const c = fx.client({ target: metered.target });
    const { session } = await callUnary(c.openSession.bind(c), { principal: 'user-1', meta: {} });
    const sessionId = session!.sessionId;
    const stream = 'meteredx';
    const first = await callUnary(c.append.bind(c), appendRequest({ sessionId, stream, payload: bytes('one') }));
    await callUnary(c.append.bind(c), appendRequest({ sessionId, stream, payload: bytes('two') }));
    await callUnary(c.append.bind(c), appendRequest({ sessionId, stream, kind: EventKind.END }));
    await collect(c.resume({ sessionId, lastEventId: first.id, principal: 'user-1' }));
    await failure(collect(c.resume({ sessionId: 'CCCCCCCCCCCCCCCCCCCCCC', lastEventId: first.id, principal: 'user-1' })));

    const point = (name: string, match: (p: { attributes: Record<string, unknown>; value: number }) => boolean) =>
      receiver.eventually(name, () => [...receiver.points].reverse().find((p) => p.name === name && match(p)));
    await point('tether.append.duration', (p) => p.value >= 3);
    await point('tether.resumes', (p) => p.attributes.verdict === 'resumed' && p.value === 1);
    await point('tether.resumes', (p) => p.attributes.verdict === 'unknown_session' && p.value === 1);
    await point('tether.replay.events', (p) => p.value === 1);
    // Every stream that opened has closed again.
    await point('tether.streams.open', (p) => p.attributes['rpc.method'] === 'Resume' && p.value === 0);
  });

  it('sessions refused past --max-sessions-per-principal', async () => {
    const metered = await fx.start(['--max-sessions-per-principal', '1'], 'session-log-limited-metrics', { ...receiver.env, OTEL_METRICS_EXPORTER: 'otlp', OTEL_TRACES_EXPORTER: 'none', OTEL_METRIC_EXPORT_INTERVAL: '300' });
    const c = fx.client({ target: metered.target });
    await callUnary(c.openSession.bind(c), { principal: 'user-limited', meta: {} });
    expect((await failure(callUnary(c.openSession.bind(c), { principal: 'user-limited', meta: {} }))).detail?.code).toBe('too_many_sessions');
    await receiver.eventually('tether.sessions.refused', () => [...receiver.points].reverse().find((p) => p.name === 'tether.sessions.refused' && p.attributes.reason === 'too_many_sessions' && p.value === 1));
  });
});
