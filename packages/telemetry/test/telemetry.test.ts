import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextFromTraceparent, createRootLogger, linkToTraceparent, METRIC_NAMES, sessionTag, startTelemetry, traceparentOf } from '@tether/telemetry';

const TP = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

beforeAll(() => {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(() => {
  propagation.disable();
});

describe('trace context', () => {
  it('round-trips a traceparent through a context', () => {
    expect(traceparentOf(contextFromTraceparent(TP))).toBe(TP);
    expect(trace.getSpanContext(contextFromTraceparent(TP))?.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  });

  it('ignores malformed traceparents instead of failing the request', () => {
    for (const bad of ['', 'garbage', '00-xyz-abc-01', `${TP}-extra`]) {
      expect(contextFromTraceparent(bad)).toBe(context.active());
      expect(linkToTraceparent(bad)).toBeUndefined();
    }
  });

  it('links to the span that recorded an event', () => {
    expect(linkToTraceparent(TP)?.context).toMatchObject({ traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', isRemote: true });
  });
});

describe('startTelemetry', () => {
  it('starts nothing without an OTLP endpoint, so no exporter retries a missing collector', async () => {
    const t = await startTelemetry('test', {});
    expect(t.exporting).toBe(false);
    await t.shutdown();
  });

  it('names the instruments dashboards rely on', () => {
    expect(METRIC_NAMES).toContain('tether.resumes');
    expect(new Set(METRIC_NAMES).size).toBe(METRIC_NAMES.length);
  });
});

describe('root logger', () => {
  const SESSION = 'AbCdEfGhIjKlMnOpQrStUv';
  function capture(): { lines: Record<string, unknown>[]; logger: ReturnType<typeof createRootLogger> } {
    const lines: Record<string, unknown>[] = [];
    const destination = { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) };
    return { lines, logger: createRootLogger('test', { pretty: false, destination }) };
  }

  it('writes a session as its tag, never its id, on the line and on a logged error', () => {
    const { lines, logger } = capture();
    logger.child({ component: 'x' }).info({ sessionId: SESSION, stream: '0' }, 'stream opened');
    logger.child({ sessionId: SESSION }).info('stream recorded');
    // The shape of a SessionLogError: its facts in `fields`, and a cause.
    const cause = Object.assign(new Error('inner'), { sessionId: SESSION });
    const err = Object.assign(new Error('session not found', { cause }), { code: 'session_not_found', fields: { sessionId: SESSION, stream: '0' } });
    logger.warn({ err, sessionId: SESSION }, 'resume refused');
    const text = JSON.stringify(lines);
    expect(text).not.toContain(SESSION);
    expect(lines[0]).toMatchObject({ sessionId: sessionTag(SESSION), stream: '0', component: 'x', msg: 'stream opened' });
    expect(lines[1]).toMatchObject({ sessionId: sessionTag(SESSION), msg: 'stream recorded' });
    expect(lines[2]).toMatchObject({ sessionId: sessionTag(SESSION), err: { code: 'session_not_found', fields: { sessionId: sessionTag(SESSION), stream: '0' } } });
  });

  it('tags are stable per session and differ between sessions', () => {
    expect(sessionTag(SESSION)).toBe(sessionTag(SESSION));
    expect(sessionTag(SESSION)).toMatch(/^s_[A-Za-z0-9_-]{12}$/);
    expect(sessionTag(SESSION)).not.toBe(sessionTag(`${SESSION.slice(0, -1)}w`));
  });
});
