import { createHash } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { pino, stdSerializers } from 'pino';
import type { DestinationStream, Logger } from 'pino';

export interface RootLoggerOptions {
  /** Default `TETHER_LOG_LEVEL`, else `info`. */
  readonly level?: string;
  /** Human-readable lines. Default: when stdout is a terminal and `CI` is unset. */
  readonly pretty?: boolean;
  /** Where lines go instead of stdout (tests). Ignored when `pretty`. */
  readonly destination?: DestinationStream;
}

/**
 * The one root logger of a service: JSON lines with `service`, and the
 * active span's `trace_id`/`span_id` mixed into every line. Components take
 * `log.child({ component })`. Messages are constant phrases; facts go in
 * fields; payloads are never logged.
 *
 * Session ids are never logged either: a `sessionId` field (on the line, in
 * a child logger's bindings, or on a logged `err`) holds the session's tag
 * ({@link sessionTag}, `s_…`) instead of its id.
 * An id is the one thing an anonymous session's requests present, so a log
 * reader must not be able to replay it; the tag still correlates every line
 * of a session across instances and services.
 */
export function createRootLogger(service: string, options: RootLoggerOptions = {}): Logger {
  const pretty = options.pretty ?? (process.stdout.isTTY === true && process.env.CI === undefined);
  const settings = {
    level: options.level ?? process.env.TETHER_LOG_LEVEL ?? 'info',
    base: { service },
    mixin() {
      const span = trace.getActiveSpan();
      if (span === undefined) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
    // Serializers run on each line's fields and on child loggers' bindings (`log.child({ sessionId })`).
    serializers: { sessionId: (id: unknown) => (typeof id === 'string' ? sessionTag(id) : id), err: (err: Error) => tagNested(stdSerializers.err(err), 4) },
  };
  if (pretty) return pino({ ...settings, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l' } } });
  return options.destination === undefined ? pino(settings) : pino(settings, options.destination);
}

/**
 * A session's name in logs: `s_` and 12 base64url characters of the id's
 * SHA-256 (72 bits: no collisions in practice, and no way back to the id).
 * Operators compute it from an id they hold to find that session's lines.
 */
export function sessionTag(sessionId: string): string {
  return `s_${createHash('sha256').update(sessionId).digest('base64url').slice(0, 12)}`;
}

/** Tags `sessionId` fields at any depth of a serialized error (its `fields`, its `cause`…). */
function tagNested(value: unknown, depth: number): unknown {
  if (depth === 0 || typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, k === 'sessionId' && typeof v === 'string' ? sessionTag(v) : tagNested(v, depth - 1)]),
  );
}
