import { trace } from '@opentelemetry/api';
import { pino } from 'pino';
import type { Logger } from 'pino';

export interface RootLoggerOptions {
  /** Default `TETHER_LOG_LEVEL`, else `info`. */
  readonly level?: string;
  /** Human-readable lines. Default: when stdout is a terminal and `CI` is unset. */
  readonly pretty?: boolean;
}

/**
 * The one root logger of a service: JSON lines with `service`, and the
 * active span's `trace_id`/`span_id` mixed into every line. Components take
 * `log.child({ component })`. Messages are constant phrases; facts go in
 * fields; payloads are never logged.
 */
export function createRootLogger(service: string, options: RootLoggerOptions = {}): Logger {
  const pretty = options.pretty ?? (process.stdout.isTTY === true && process.env.CI === undefined);
  return pino({
    level: options.level ?? process.env.TETHER_LOG_LEVEL ?? 'info',
    base: { service },
    mixin() {
      const span = trace.getActiveSpan();
      if (span === undefined) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
    ...(pretty ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l' } } } : {}),
  });
}
