import type { ServerEvent } from '@modelcontextprotocol/server';
import { BUS_ENVELOPE_VERSION } from './wire.js';
import type { BusEnvelope } from './wire.js';

/** The SDK's four `ServerEvent` kinds (`serverEventBus.ts`); each maps onto one notification method. */
const EVENT_KINDS: ReadonlySet<string> = new Set(['tools_list_changed', 'prompts_list_changed', 'resources_list_changed', 'resource_updated']);

/** What a received message decodes to; a decoder returns a result instead of throwing. */
export type DecodedMessage =
  | { readonly ok: true; readonly from: string; readonly event: ServerEvent }
  | { readonly ok: false; readonly reason: string };

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * The event as the bus carries it: exactly `kind`, `uri` (for
 * `resource_updated`) and `params` (when an object), or `undefined` when the
 * value is not a `ServerEvent`. Publishers and receivers both go through it,
 * so every listener, local or remote, gets the same shape.
 */
export function toServerEvent(value: unknown): ServerEvent | undefined {
  if (!isPlainObject(value)) return undefined;
  const { kind, uri, params } = value;
  if (typeof kind !== 'string' || !EVENT_KINDS.has(kind)) return undefined;
  if (params !== undefined && !isPlainObject(params)) return undefined;
  const withParams = params === undefined ? {} : { params: params as NonNullable<ServerEvent['params']> };
  if (kind === 'resource_updated') {
    // The SDK's filter matches `uri` exactly against the listener's resourceSubscriptions.
    if (typeof uri !== 'string') return undefined;
    return { kind, uri, ...withParams };
  }
  return { kind: kind as Exclude<ServerEvent['kind'], 'resource_updated'>, ...withParams };
}

/** The bytes published for `event` (already normalized by {@link toServerEvent}). */
export function encodeEnvelope(from: string, event: ServerEvent): Uint8Array {
  const envelope: BusEnvelope = { v: BUS_ENVELOPE_VERSION, from, event };
  return encoder.encode(JSON.stringify(envelope));
}

/** Parses and validates one received message. Reasons name what was wrong, never the content. */
export function decodeEnvelope(data: Uint8Array): DecodedMessage {
  let parsed: unknown;
  try {
    parsed = JSON.parse(decoder.decode(data));
  } catch {
    return { ok: false, reason: 'not UTF-8 JSON' };
  }
  if (!isPlainObject(parsed)) return { ok: false, reason: 'not a JSON object' };
  if (parsed['v'] !== BUS_ENVELOPE_VERSION) return { ok: false, reason: `envelope version is not ${BUS_ENVELOPE_VERSION}` };
  const from = parsed['from'];
  if (typeof from !== 'string' || from === '') return { ok: false, reason: 'no publisher id' };
  const event = toServerEvent(parsed['event']);
  if (event === undefined) return { ok: false, reason: 'not a ServerEvent' };
  return { ok: true, from, event };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
