import { fileURLToPath } from 'node:url';
import { InterceptingCall, status } from '@grpc/grpc-js';
import type { Interceptor } from '@grpc/grpc-js';
import { context, trace, TraceFlags } from '@opentelemetry/api';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { encodeEventId } from '@tether/protocol';
import { isSessionLogError, newWriterId } from '@tether/session-log';
import type { ControlMessage, LogEvent, ResumeResult } from '@tether/session-log';
import { startNatsServer, startServiceProcess } from '@tether/testing';
import type { NatsServer, ServiceProcess } from '@tether/testing';
import { startTelemetry } from '@tether/telemetry';
import type { Telemetry } from '@tether/telemetry';
import { createGrpcLog } from '../src/log/grpc-log.js';
import { createLocalLog } from '../src/log/local-log.js';
import type { LogPort } from '../src/log/log-port.js';
// The session-log service's own test receiver: the same OTLP/HTTP JSON a collector gets.
import { attributesOf, startOtlpReceiver } from '../../session-log/test/otlp-receiver.js';
import type { OtlpReceiver } from '../../session-log/test/otlp-receiver.js';

/**
 * The same LogPort behaviours against both implementations: the session-log
 * library in-process, and the session-log service (a real process) over gRPC.
 * Whatever the gateway can observe must not differ.
 */
const SERVICE_MAIN = fileURLToPath(new URL('../../session-log/dist/main.js', import.meta.url));
const TOKEN = 'gateway-test-token-0123456789';
const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);
const text = (data: Uint8Array): string => new TextDecoder().decode(data);

let nats: NatsServer;
let service: ServiceProcess;
const ports: LogPort[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
  service = await startSessionLogProcess();
});
afterAll(async () => {
  for (const port of ports) await port.close();
  await service.stop();
  await nats.cleanup();
});

function startSessionLogProcess(port = 0): Promise<ServiceProcess> {
  return startServiceProcess({
    name: 'session-log',
    command: process.execPath,
    args: [SERVICE_MAIN, '--port', String(port), '--nats', nats.url, '--max-payload-bytes', '65536', '--token', `gateway:${TOKEN}`],
    readyLine: (o) => o.msg === 'listening',
  });
}

const modes: [string, () => Promise<LogPort>][] = [
  ['local (JetStream in-process)', () => createLocalLog({ servers: nats.url, maxPayloadBytes: 65536 })],
  ['grpc (session-log service)', () => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN })],
];

async function open(factory: () => Promise<LogPort>): Promise<LogPort> {
  const port = await factory();
  ports.push(port);
  return port;
}

async function drain(result: ResumeResult): Promise<LogEvent[]> {
  if (result.verdict !== 'resumed') throw new Error(`expected resumed, got ${result.verdict}: ${result.reason}`);
  const out: LogEvent[] = [];
  for await (const event of result.events()) out.push(event);
  return out;
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  if (!isSessionLogError(err)) throw new Error(`expected a SessionLogError, got ${String(err)}`);
  return err.code;
}

describe.each(modes)('LogPort: %s', (_mode, factory) => {
  let log: LogPort;
  beforeAll(async () => {
    log = await open(factory);
  });

  it('sessions: create, authorize (principal-bound), touch, close', async () => {
    const s = await log.createSession('digest-alice', { route: '/mcp' });
    expect(s).toMatchObject({ principal: 'digest-alice', state: 'active', meta: { route: '/mcp' } });
    const again = await log.authorize(s.sessionId, 'digest-alice');
    expect({ ...again, touchedAtMs: 0 }).toEqual({ ...s, touchedAtMs: 0 });
    expect(await codeOf(log.authorize(s.sessionId, 'digest-mallory'))).toBe('session_not_found');
    await log.touchSession(s.sessionId);
    expect(await log.closeSession(s.sessionId, 'gw-test')).toBe(true);
    expect(await codeOf(log.authorize(s.sessionId, 'digest-alice'))).toBe('session_not_found');
    expect(await log.closeSession('CCCCCCCCCCCCCCCCCCCCCC', 'gw-test')).toBe(false);
    expect(await log.ready()).toBe(true);
  });

  it('append, head, readPage, and the errors writers meet', async () => {
    const s = await log.createSession('p', {});
    expect(await log.head(s.sessionId, '0')).toBeUndefined();
    const results = [];
    for (let i = 1; i <= 4; i += 1) results.push(await log.append(s.sessionId, '0', 'event', bytes(`e${i}`), { upstreamId: `u${i}`, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' }));
    expect(results.map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    const head = await log.head(s.sessionId, '0');
    expect(head).toMatchObject({ id: results[3]!.id, sessionId: s.sessionId, stream: '0', epoch: s.epoch, seq: 4, prev: results[2]!.pos, kind: 'event', upstreamId: 'u4' });
    expect(head?.traceparent).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
    expect(text(head!.payload)).toBe('e4');
    expect((await log.readPage(s.sessionId, '0', 1, 2)).map((e) => text(e.payload))).toEqual(['e2', 'e3']);
    // Concurrent appends to one stream keep call order.
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => log.append(s.sessionId, 'abcdefgh', 'event', bytes(String(i)))));
    expect(many.map((r) => r.seq)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    expect(await codeOf(log.append(s.sessionId, '0', 'event', new Uint8Array(65537)))).toBe('payload_too_large');
    expect(await codeOf(log.append(s.sessionId, 'NOT-AN-ID', 'event', bytes('x')))).toBe('invalid_argument');
    await log.append(s.sessionId, 'abcdefgh', 'end', new Uint8Array(), { endReason: 'deadline' });
    expect(await codeOf(log.append(s.sessionId, 'abcdefgh', 'event', bytes('late')))).toBe('stream_ended');
    expect((await log.head(s.sessionId, 'abcdefgh'))?.endReason).toBe('deadline');
    expect(await codeOf(log.append('CCCCCCCCCCCCCCCCCCCCCC', '0', 'event', bytes('x')))).toBe('session_not_found');
  });

  it('a second writer of the same stream is stopped with writer_conflict, never forks it', async () => {
    const s = await log.createSession('p', {});
    const rival = await open(factory);
    await log.append(s.sessionId, '0', 'event', bytes('a'));
    await rival.append(s.sessionId, '0', 'event', bytes('b'));
    expect(await codeOf(log.append(s.sessionId, '0', 'event', bytes('c')))).toBe('writer_conflict');
    expect((await log.readPage(s.sessionId, '0', 0, 10)).map((e) => text(e.payload))).toEqual(['a', 'b']);
    // Rebuilt from the log, the next append continues the chain.
    expect((await log.append(s.sessionId, '0', 'event', bytes('c'))).seq).toBe(3);
  });

  it('resume: the suffix after the cursor; refusals keep their verdict and positions', async () => {
    const s = await log.createSession('p', {});
    const ids: string[] = [];
    for (let i = 1; i <= 5; i += 1) ids.push((await log.append(s.sessionId, 'qqqqqqqq', 'event', bytes(`e${i}`))).id);
    const end = await log.append(s.sessionId, 'qqqqqqqq', 'end', new Uint8Array());
    const resumed = await log.resume(s.sessionId, ids[1]!, 'p');
    expect(resumed).toMatchObject({ verdict: 'resumed', stream: 'qqqqqqqq', cursor: { seq: 2 }, endedAtCursor: false, nothingLeft: false });
    expect((await drain(resumed)).map((e) => e.id)).toEqual([...ids.slice(2), end.id]);
    expect(await log.resume(s.sessionId, ids[4]!, 'p')).toMatchObject({ verdict: 'resumed', nothingLeft: true });
    // events() may be read again: each reading starts right after the cursor.
    const twice = await log.resume(s.sessionId, ids[2]!, 'p');
    if (twice.verdict !== 'resumed') throw new Error(twice.verdict);
    for await (const event of twice.events()) if (event.seq === 4) break;
    expect((await drain(twice)).map((e) => e.seq)).toEqual([4, 5, 6]);
    expect(await drain(await log.resume(s.sessionId, end.id, 'p'))).toEqual([]);

    const lastPos = Number(end.id.split('-')[3]);
    const ahead = await log.resume(s.sessionId, encodeEventId({ epoch: s.epoch, stream: 'qqqqqqqq', seq: 9, pos: lastPos + 100 }), 'p');
    expect(ahead).toMatchObject({ verdict: 'ahead', sessionId: s.sessionId, cursor: { epoch: s.epoch, stream: 'qqqqqqqq', seq: 9, pos: lastPos + 100 }, log: { lastSeq: 6, lastPos } });
    expect(ahead.verdict !== 'resumed' && ahead.reason).toBe('the log never held the event the cursor names');
    expect(await log.resume(s.sessionId, 'garbage', 'p')).toMatchObject({ verdict: 'malformed' });
    // Another principal and an unknown session id look exactly alike.
    const [other, unknown] = [await log.resume(s.sessionId, ids[0]!, 'other'), await log.resume('CCCCCCCCCCCCCCCCCCCCCC', ids[0]!, 'p')];
    expect(other).toEqual({ verdict: 'unknown_session', reason: 'the session is unknown, closed, or not yours', sessionId: s.sessionId, cursor: expect.objectContaining({ seq: 1 }) });
    expect({ ...unknown, sessionId: s.sessionId }).toEqual(other);
    expect(await log.resume(s.sessionId, encodeEventId({ epoch: 'aaaaaaaaaa', stream: '0', seq: 1, pos: 1 }), 'p')).toMatchObject({ verdict: 'epoch_mismatch' });
  });

  it('resume at the head and follow: replay, then live events, until aborted', async () => {
    const s = await log.createSession('p', {});
    const first = await log.append(s.sessionId, '0', 'event', bytes('one'));
    const result = await log.resume(s.sessionId, first.id, 'p');
    if (result.verdict !== 'resumed') throw new Error(result.verdict);
    const abort = new AbortController();
    const seen: string[] = [];
    const reading = (async () => {
      for await (const event of result.events({ signal: abort.signal })) {
        seen.push(text(event.payload));
        if (seen.length === 2) abort.abort();
      }
    })();
    const following = (async () => {
      const out: number[] = [];
      for await (const event of log.follow(s.sessionId, '0', { seq: 0, pos: 0 })) {
        out.push(event.seq);
        if (out.length === 3) break;
      }
      return out;
    })();
    await new Promise((r) => setTimeout(r, 200));
    await log.append(s.sessionId, '0', 'event', bytes('two'));
    await log.append(s.sessionId, '0', 'event', bytes('three'));
    await reading;
    expect(seen).toEqual(['two', 'three']);
    expect(await following).toEqual([1, 2, 3]);
  });

  it('presence: a held writer answers per stream, is gone once let go; a writer nobody holds is gone at once', async () => {
    const s = await log.createSession('p', {});
    const writer = newWriterId();
    const presence = log.holdPresence(writer, (sessionId, stream) => sessionId === s.sessionId && stream === '0');
    // The service holds the subscription once it said so: wait for the first answer.
    let state = await log.probeWriter(writer);
    for (let i = 0; state !== 'writing' && i < 50; i += 1) {
      await new Promise((r) => setTimeout(r, 20));
      state = await log.probeWriter(writer);
    }
    expect(state).toBe('writing');
    expect(await log.probeWriter(writer, s.sessionId, '0')).toBe('writing');
    expect(await log.probeWriter(writer, s.sessionId, 'abcdefgh')).toBe('not_writing');
    await presence.close();
    let after = await log.probeWriter(writer);
    for (let i = 0; after !== 'gone' && i < 50; i += 1) {
      await new Promise((r) => setTimeout(r, 20));
      after = await log.probeWriter(writer);
    }
    expect(after).toBe('gone');
    expect(await log.probeWriter(newWriterId(), s.sessionId, '0')).toBe('gone');
    expect(await codeOf(log.probeWriter('bad id!', s.sessionId, '0'))).toBe('invalid_argument');
  });

  it('control: listeners get published messages and the close, until they stop listening', async () => {
    const s = await log.createSession('p', {});
    const got: ControlMessage[] = [];
    let heardClose!: () => void;
    const watching = new Promise<void>((resolve) => (heardClose = resolve));
    const unlisten = log.listenControl(s.sessionId, (message) => {
      got.push(message);
      if (message.type === 'closed') heardClose();
    });
    // Publishing is fire-and-forget: repeat until the watcher is subscribed.
    await expect.poll(() => {
      log.publishControl({ type: 'superseded', sessionId: s.sessionId, stream: '0', from: 'gw-x' });
      return got.length > 0;
    }, { timeout: 5_000, interval: 100 }).toBe(true);
    await log.closeSession(s.sessionId, 'gw-y');
    await watching;
    unlisten();
    expect(got[0]).toEqual({ type: 'superseded', sessionId: s.sessionId, stream: '0', from: 'gw-x' });
    expect(got.at(-1)).toEqual({ type: 'closed', sessionId: s.sessionId, from: 'gw-y' });
  });
});

describe('LogPort over gRPC only', () => {
  it('refuses to start without a reachable service, and with a wrong token every call is log_unavailable', async () => {
    expect(await codeOf(createGrpcLog({ target: '127.0.0.1:1', connectTimeoutMs: 500 }))).toBe('log_unavailable');
    const wrong = await open(() => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: 'not-the-token-at-all' }));
    const err = await wrong.createSession('p', {}).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'log_unavailable', fields: { detail: { grpcStatus: 16, serviceCode: 'unauthenticated' } } });
  });

  // Every answer that is not a definite refusal leaves the outcome unknown: the transport's
  // (UNAVAILABLE, DEADLINE_EXCEEDED) and a service's own failure (INTERNAL, UNKNOWN, CANCELLED).
  // The last case loses the reply of the first call and of the pump's first retry, with different
  // statuses: the doubt must outlive a retry that failed too (finding 11 in docs/reliability.md).
  it.each([
    { name: 'UNAVAILABLE', statuses: [status.UNAVAILABLE] },
    { name: 'DEADLINE_EXCEEDED', statuses: [status.DEADLINE_EXCEEDED] },
    { name: 'INTERNAL', statuses: [status.INTERNAL] },
    { name: 'UNKNOWN', statuses: [status.UNKNOWN] },
    { name: 'CANCELLED', statuses: [status.CANCELLED] },
    { name: 'UNAVAILABLE, then INTERNAL on the retry', statuses: [status.UNAVAILABLE, status.INTERNAL] },
  ])('retries an append whose replies were lost ($name) with the same expected_seq: stored once, answered with the first attempt', async ({ statuses }) => {
    // The service stores each Append, but the gateway hears a failure instead of the answer.
    let losing: status[] = [];
    const loseAppendReplies: Interceptor = (options, nextCall) => {
      if (!options.method_definition.path.endsWith('/Append') || losing.length === 0) return new InterceptingCall(nextCall(options));
      const code = losing.shift()!;
      return new InterceptingCall(nextCall(options), {
        start(metadata, listener, next) {
          next(metadata, {
            // The answer arrives, but the status says it did not (grpc-js then drops the message).
            onReceiveStatus: (s, nextStatus) => nextStatus({ ...s, code, details: 'reply lost (test)' }),
          });
        },
      });
    };
    const log = await open(() => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN, interceptors: [loseAppendReplies] }));
    const session = await log.createSession('p', {});
    const writer = newWriterId();
    const first = await log.append(session.sessionId, 'abcdefgh', 'event', bytes('one'), { writer });
    // Each call makes up to 3 attempts: every attempt of the first call, then of each failing retry, loses its reply.
    losing = statuses.flatMap((code) => [code, code, code]);
    const failures: unknown[] = [];
    for (let retry = false; ; retry = true) {
      // The pump's loop: the same bytes again, `retry: true`, while the log is unavailable.
      const result = await log.append(session.sessionId, 'abcdefgh', 'event', bytes('two'), { writer, retry }).catch((err: unknown) => err);
      if (!(result instanceof Error)) {
        expect(result).toMatchObject({ seq: first.seq + 1 });
        break;
      }
      expect(isSessionLogError(result, 'log_unavailable')).toBe(true);
      failures.push(result);
      expect(failures.length).toBeLessThanOrEqual(statuses.length);
    }
    expect(failures).toHaveLength(statuses.length);
    expect(losing).toEqual([]);
    const third = await log.append(session.sessionId, 'abcdefgh', 'event', bytes('three'), { writer });
    expect(third.seq).toBe(first.seq + 2);
    const stored = await log.readPage(session.sessionId, 'abcdefgh', 0, 10);
    expect(stored.map((e) => text(e.payload))).toEqual(['one', 'two', 'three']);
  });

  it('survives a restart of the service: appends continue the chain, readers and watchers carry on, nothing is duplicated', async () => {
    const log = await open(() => createGrpcLog({ target: `127.0.0.1:${service.port}`, token: TOKEN }));
    const s = await log.createSession('p', {});
    await log.append(s.sessionId, '0', 'event', bytes('before'));
    const abort = new AbortController();
    const followed: string[] = [];
    const following = (async () => {
      for await (const event of log.follow(s.sessionId, '0', { seq: 0, pos: 0 }, { signal: abort.signal })) followed.push(text(event.payload));
    })();
    const controls: ControlMessage[] = [];
    const unlisten = log.listenControl(s.sessionId, (message) => controls.push(message));
    await expect.poll(() => followed.length).toBe(1);
    const port = service.port!;
    await service.kill();
    const down = await log.append(s.sessionId, '0', 'event', bytes('while-down')).catch((e: unknown) => e);
    expect(down).toMatchObject({ code: 'log_unavailable' });
    service = await startSessionLogProcess(port);
    await expect.poll(() => log.ready(), { timeout: 10_000 }).toBe(true);
    await log.append(s.sessionId, '0', 'event', bytes('after'));
    expect((await log.readPage(s.sessionId, '0', 0, 10)).map((e) => text(e.payload))).toEqual(['before', 'after']);
    // The follower reopened after its last event; the watcher subscribed again.
    await expect.poll(() => followed, { timeout: 10_000 }).toEqual(['before', 'after']);
    await expect.poll(() => {
      log.publishControl({ type: 'drain', sessionId: s.sessionId, from: 'gw-z' });
      return controls.length > 0;
    }, { timeout: 10_000, interval: 200 }).toBe(true);
    abort.abort();
    unlisten();
    await following;
  });
});

describe('trace context over gRPC', () => {
  // The service exports its spans here; this process only needs the SDK's
  // context manager and W3C propagator, so it exports nothing itself.
  let receiver: OtlpReceiver;
  let traced: ServiceProcess;
  let telemetry: Telemetry;
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    traced = await startServiceProcess({
      name: 'session-log-traced',
      command: process.execPath,
      args: [SERVICE_MAIN, '--port', '0', '--nats', nats.url, '--token', `gateway:${TOKEN}`],
      env: receiver.env,
      readyLine: (o) => o.msg === 'listening',
    });
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', receiver.endpoint);
    vi.stubEnv('OTEL_TRACES_EXPORTER', 'none');
    vi.stubEnv('OTEL_METRICS_EXPORTER', 'none');
    vi.stubEnv('OTEL_LOGS_EXPORTER', 'none');
    telemetry = await startTelemetry('grpc-log-test');
  });
  afterAll(async () => {
    await telemetry?.shutdown();
    vi.unstubAllEnvs();
    await traced?.stop();
    await receiver?.close();
  });

  it("every call sends the active traceparent: the service's spans join the caller's trace, and appends are stored with it", async () => {
    const log = await open(() => createGrpcLog({ target: `127.0.0.1:${traced.port}`, token: TOKEN }));
    const parent = { traceId: `${'e'.repeat(28)}0001`, spanId: 'f'.repeat(16), traceFlags: TraceFlags.SAMPLED };
    const stream = 'tracedgw';
    const sessionId = await context.with(trace.setSpanContext(context.active(), parent), async () => {
      const s = await log.createSession('digest-trace', {});
      const first = await log.append(s.sessionId, stream, 'event', bytes('one'));
      await log.append(s.sessionId, stream, 'event', bytes('two'));
      await log.append(s.sessionId, stream, 'end', bytes(''));
      expect((await drain(await log.resume(s.sessionId, first.id, 'digest-trace'))).map((e) => e.kind)).toEqual(['event', 'end']);
      await log.touchSession(s.sessionId);
      return s.sessionId;
    });

    const SERVICE = 'tether.cursor.v1.CursorService';
    const methods = ['OpenSession', 'Head', 'Append', 'Resume', 'TouchSession'];
    await receiver.eventually('spans of every call', () => (methods.every((m) => receiver.spans.some((s) => s.name === `${SERVICE}/${m}` && s.traceId === parent.traceId)) ? true : undefined));
    const ours = receiver.spans.filter((s) => s.traceId === parent.traceId);
    expect(ours.length).toBeGreaterThanOrEqual(methods.length);
    for (const span of ours) {
      expect(span.parentSpanId).toBe(parent.spanId);
      expect(attributesOf(span)).toMatchObject({ 'rpc.system': 'grpc', 'rpc.service': SERVICE, 'rpc.grpc.status_code': 0 });
    }

    // The gateway's append left traceparent unset: the service stored its Append span's.
    const appendSpans = new Set(ours.filter((s) => s.name === `${SERVICE}/Append`).map((s) => s.spanId));
    const events = await log.readPage(sessionId, stream, 0, 10);
    expect(events).toHaveLength(3);
    for (const event of events) {
      const [, traceId, spanId] = (event.traceparent ?? '').split('-');
      expect(traceId).toBe(parent.traceId);
      expect(appendSpans.has(spanId!)).toBe(true);
    }
    // Outside the context a call sends none: the readPage above started its own trace.
    const read = await receiver.eventually('Read span', () => receiver.spans.find((s) => s.name === `${SERVICE}/Read`));
    expect(read.traceId).not.toBe(parent.traceId);
    expect(read.parentSpanId ?? '').toBe('');
  });
});
