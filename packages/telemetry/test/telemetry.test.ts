import { context, propagation, trace } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contextFromTraceparent, linkToTraceparent, METRIC_NAMES, startTelemetry, traceparentOf } from '@tether/telemetry';

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
    const t = startTelemetry('test', {});
    expect(t.exporting).toBe(false);
    await t.shutdown();
  });

  it('names the instruments dashboards rely on', () => {
    expect(METRIC_NAMES).toContain('tether.resumes');
    expect(new Set(METRIC_NAMES).size).toBe(METRIC_NAMES.length);
  });
});
