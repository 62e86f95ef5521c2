import { metrics } from '@opentelemetry/api';

export interface Telemetry {
  /** Whether traces and metrics are exported (an OTLP endpoint is configured). */
  readonly exporting: boolean;
  /** Flushes and stops exporting. Safe to call when nothing was started. */
  shutdown(): Promise<void>;
}

/**
 * Starts OpenTelemetry for a service, configured by the standard `OTEL_*`
 * variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`,
 * `OTEL_SERVICE_NAME`, `OTEL_TRACES_EXPORTER=none`, `OTEL_METRICS_EXPORTER=none`,
 * `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_METRIC_EXPORT_INTERVAL`, …). Without an
 * OTLP endpoint nothing is started: no exporter retries a missing collector,
 * and spans stay no-ops. Libraries only ever use `@opentelemetry/api`.
 *
 * The SDK and its exporters are imported only when exporting: loading them
 * cost 0.35 s of CPU at every start of a service (0.75 s for the whole
 * `tether-gateway --help`), paid by every process a deployment, a rolling
 * restart or a test suite starts.
 */
export async function startTelemetry(serviceName: string, env: NodeJS.ProcessEnv = process.env): Promise<Telemetry> {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT ?? env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
  if (endpoint === undefined || endpoint === '' || env.OTEL_SDK_DISABLED === 'true') {
    return { exporting: false, shutdown: async () => undefined };
  }
  const [{ OTLPMetricExporter }, { OTLPTraceExporter }, { resourceFromAttributes }, { PeriodicExportingMetricReader }, { NodeSDK }, { BatchSpanProcessor }] = await Promise.all([
    import('@opentelemetry/exporter-metrics-otlp-http'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-metrics'),
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/sdk-trace-base'),
  ]);
  const traces = env.OTEL_TRACES_EXPORTER !== 'none';
  const metricsOn = env.OTEL_METRICS_EXPORTER !== 'none';
  const sdk = new NodeSDK({
    resource: resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME ?? serviceName }),
    ...(traces ? { spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] } : {}),
    ...(metricsOn
      ? {
          metricReader: new PeriodicExportingMetricReader({
            exporter: new OTLPMetricExporter(),
            exportIntervalMillis: Number(env.OTEL_METRIC_EXPORT_INTERVAL ?? 15_000),
          }),
        }
      : {}),
    // We create our own spans; auto-instrumentation of http would double them.
    instrumentations: [],
  });
  sdk.start();
  return {
    exporting: true,
    async shutdown() {
      await sdk.shutdown().catch(() => undefined);
      metrics.disable();
    },
  };
}
