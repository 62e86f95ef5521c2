import { context, propagation, TraceFlags } from '@opentelemetry/api';
import type { Context, Link } from '@opentelemetry/api';

const TRACEPARENT = /^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The context carried by a `traceparent` (W3C), or the active one when absent or malformed. */
export function contextFromTraceparent(traceparent: string | undefined, base: Context = context.active()): Context {
  if (traceparent === undefined || !TRACEPARENT.test(traceparent)) return base;
  return propagation.extract(base, { traceparent });
}

/** The `traceparent` of a context's span, to put in NATS headers or outgoing HTTP. */
export function traceparentOf(ctx: Context = context.active()): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier.traceparent;
}

/**
 * A span link to the trace that appended an event (its `traceparent` header):
 * a client's replay on another instance points back to where the event was
 * recorded, so one trace view follows an event across instances.
 */
export function linkToTraceparent(traceparent: string | undefined): Link | undefined {
  const match = traceparent === undefined ? null : TRACEPARENT.exec(traceparent);
  if (match === null) return undefined;
  return { context: { traceId: match[1]!, spanId: match[2]!, traceFlags: Number.parseInt(match[3]!, 16) & TraceFlags.SAMPLED, isRemote: true } };
}

