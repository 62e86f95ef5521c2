import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UpstreamTools } from '@tether/testing';
import { callTool, initialize, request } from './raw-client.js';
import { startStack } from './stack.js';
import type { Stack } from './stack.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  attributes?: { key: string; value: Record<string, unknown> }[];
  links?: { traceId: string; spanId: string }[];
}

/** An OTLP/HTTP (JSON) receiver: what a collector would get from the gateways. */
const spans: OtlpSpan[] = [];
const metricNames = new Set<string>();
const metricPoints: { name: string; attributes: Record<string, unknown>; value: number }[] = [];
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const json = JSON.parse(body || '{}') as Record<string, unknown[]>;
    if (req.url === '/v1/traces') {
      for (const rs of (json.resourceSpans ?? []) as { scopeSpans: { spans: OtlpSpan[] }[] }[]) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
    } else if (req.url === '/v1/metrics') {
      for (const rm of (json.resourceMetrics ?? []) as { scopeMetrics: { metrics: { name: string; sum?: { dataPoints: DataPoint[] } }[] }[] }[]) {
        for (const sm of rm.scopeMetrics) {
          for (const m of sm.metrics) {
            metricNames.add(m.name);
            for (const p of m.sum?.dataPoints ?? []) metricPoints.push({ name: m.name, attributes: attrs(p.attributes), value: Number(p.asInt ?? p.asDouble ?? 0) });
          }
        }
      }
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
});
type DataPoint = { attributes?: OtlpSpan['attributes']; asInt?: string | number; asDouble?: number };

function attrs(list: OtlpSpan['attributes']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of list ?? []) out[a.key] = Object.values(a.value)[0];
  return out;
}

async function eventually<T>(what: string, fn: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = fn();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

let stack: Stack;
beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  stack = await startStack({
    gateways: 2,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_METRIC_EXPORT_INTERVAL: '300',
      OTEL_LOGS_EXPORTER: 'none',
    },
  });
});
afterAll(async () => {
  await stack?.teardown();
  receiver.close();
});

describe('telemetry of a cross-instance resume', () => {
  it('one trace view follows an event from the recording instance to the replaying one; verdicts are metrics; logs carry trace ids', async () => {
    const [a, b] = stack.gateways;
    const sessionId = await initialize(a!.url);
    const traceId = 'a'.repeat(31) + '1';
    const post = await request(a!.url, {
      method: 'POST',
      sessionId,
      headers: { traceparent: `00-${traceId}-${'b'.repeat(16)}-01` },
      body: callTool(1, UpstreamTools.StreamProgress, { count: 5, delayMs: 0 }),
    });
    const ids: string[] = [];
    for await (const m of post.messages) if (m.id !== undefined && m.data !== '') ids.push(m.id);
    const resumed = await request(b!.url, { method: 'GET', sessionId, lastEventId: ids[1]!, headers: { traceparent: `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01` } });
    expect(resumed.status).toBe(200);
    for await (const m of resumed.messages) void m;

    // Instance A: the POST's span continues the caller's trace, and the recording is its child.
    const record = await eventually('tether.record span', () => spans.find((s) => s.name === 'tether.record' && s.traceId === traceId));
    expect(attrs(record.attributes)).toMatchObject({ 'tether.instance': a!.name, 'tether.outcome': 'complete' });
    expect(spans.some((s) => s.name === 'mcp.upstream' && s.traceId === traceId)).toBe(true);
    // Instance B: the resume has its verdict, and its replay links back to A's recording.
    const resumeRequest = await eventually('resume request span', () =>
      spans.find((s) => s.name === 'mcp.request' && attrs(s.attributes)['tether.verdict'] === 'resumed' && s.traceId === 'c'.repeat(32)),
    );
    expect(attrs(resumeRequest.attributes)['tether.instance']).toBe(b!.name);
    const replay = await eventually('tether.replay span', () => spans.find((s) => s.name === 'tether.replay' && s.traceId === 'c'.repeat(32)));
    expect(replay.links?.map((l) => l.traceId)).toContain(traceId);
    expect(replay.links?.map((l) => l.spanId)).toContain(record.spanId);
    // The messages after the cursor, plus the stream's end marker.
    expect(Number(attrs(replay.attributes)['tether.events'])).toBe(ids.length - 2 + 1);

    // Metrics: the resume counted by verdict.
    await eventually('tether.resumes metric', () => metricPoints.find((p) => p.name === 'tether.resumes' && p.attributes.verdict === 'resumed'));
    // Appends are measured on instance A, whose export is its own (every
    // 300 ms): B's resume metric arriving first says nothing about A's.
    await eventually('tether.append.duration metric', () => (metricNames.has('tether.append.duration') ? true : undefined));
    // Logs: the line about the resume carries the trace it belongs to.
    const line = await eventually('resume log line', () => b!.process.stdoutJson.find((l) => l.msg === 'resume classified'));
    expect(line.trace_id).toBe('c'.repeat(32));
  });
});
