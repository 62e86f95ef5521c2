import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as OTLP/HTTP JSON carries it (ids in hex). */
export interface OtlpSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  /** 2 = SERVER. */
  readonly kind?: number;
  readonly attributes?: { key: string; value: Record<string, unknown> }[];
  /** 2 = ERROR. */
  readonly status?: { code?: number; message?: string };
}

/** One data point of a counter (sum) or histogram (its count), with its attributes. */
export interface OtlpPoint {
  readonly name: string;
  readonly attributes: Record<string, unknown>;
  /** A sum's value, or a histogram's count. */
  readonly value: number;
}

/** What a collector would get: an OTLP/HTTP (JSON) receiver on a random port that keeps every span and metric point. */
export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`, for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly endpoint: string;
  readonly spans: OtlpSpan[];
  readonly points: OtlpPoint[];
  /** The environment that makes a service export here, as JSON, quickly, traces only. */
  readonly env: Record<string, string>;
  /** Waits until `find` returns a span (or something); throws naming `what` after `timeoutMs`. */
  eventually<T>(what: string, find: () => T | undefined, timeoutMs?: number): Promise<T>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: OtlpSpan[] = [];
  const points: OtlpPoint[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.url === '/v1/traces') {
        const json = JSON.parse(body || '{}') as { resourceSpans?: { scopeSpans: { spans: OtlpSpan[] }[] }[] };
        for (const rs of json.resourceSpans ?? []) for (const ss of rs.scopeSpans) spans.push(...ss.spans);
      } else if (req.url === '/v1/metrics') {
        const json = JSON.parse(body || '{}') as { resourceMetrics?: { scopeMetrics: { metrics: OtlpMetric[] }[] }[] };
        for (const rm of json.resourceMetrics ?? []) {
          for (const sm of rm.scopeMetrics) {
            for (const m of sm.metrics) {
              for (const p of m.sum?.dataPoints ?? []) points.push({ name: m.name, attributes: attributesOf(p), value: Number(p.asInt ?? p.asDouble ?? 0) });
              for (const p of m.histogram?.dataPoints ?? []) points.push({ name: m.name, attributes: attributesOf(p), value: Number(p.count ?? 0) });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    endpoint,
    spans,
    points,
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_LOGS_EXPORTER: 'none',
    },
    async eventually(what, find, timeoutMs = 15_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        const value = find();
        if (value !== undefined) return value;
        if (Date.now() > until) throw new Error(`timed out waiting for ${what}; spans seen: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type OtlpAttributes = { readonly attributes?: { key: string; value: Record<string, unknown> }[] };
type OtlpDataPoint = OtlpAttributes & { asInt?: string | number; asDouble?: number; count?: string | number };
type OtlpMetric = { name: string; sum?: { dataPoints: OtlpDataPoint[] }; histogram?: { dataPoints: OtlpDataPoint[] } };

/** The attributes of a span or data point as a plain object (`{ 'rpc.method': 'Append', 'rpc.grpc.status_code': 0 }`); int64s become numbers. */
export function attributesOf(item: OtlpAttributes): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of item.attributes ?? []) {
    const [kind, value] = Object.entries(a.value)[0] ?? [];
    out[a.key] = kind === 'intValue' ? Number(value) : value;
  }
  return out;
}
