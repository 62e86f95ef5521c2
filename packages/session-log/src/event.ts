import type { MsgHdrs } from '@nats-io/transport-node';
import { encodeEventId, isEndReason, isEpoch, isEventKind, LogHeader } from '@tether/protocol';
import type { EndReason, EventKind } from '@tether/protocol';

/** One event of a session stream, as stored in the log. */
export interface LogEvent {
  /** `<epoch>-<stream>-<seq>-<pos>`: what the client sees as its SSE id. */
  readonly id: string;
  readonly sessionId: string;
  readonly stream: string;
  readonly epoch: string;
  /** Per-stream counter, 1, 2, 3… without holes. */
  readonly seq: number;
  /** JetStream sequence of this event. */
  readonly pos: number;
  /** JetStream sequence of the previous event of the stream, 0 for the first. */
  readonly prev: number;
  readonly kind: EventKind;
  /** The JSON-RPC message bytes exactly as received (empty for `prime` and `end`). */
  readonly payload: Uint8Array;
  /** The upstream's own SSE id, when it sent one. */
  readonly upstreamId: string | undefined;
  /** On `end` events: why the stream ended. */
  readonly endReason: EndReason | undefined;
  /** W3C trace context of the append, so a trace follows the event to its reader. */
  readonly traceparent: string | undefined;
  /** The writer that appended it (`Tether-Writer`): whose liveness decides a takeover. */
  readonly writer: string | undefined;
}

/** Where a reader stands: the last event it has (seq 0, pos 0 = before the first). */
export interface Cursor {
  readonly seq: number;
  readonly pos: number;
}

export const START_CURSOR: Cursor = { seq: 0, pos: 0 };

/**
 * Decodes the headers of a stored or republished message. Returns a reason
 * instead of an event when a header is missing or malformed: a message
 * without a valid chain cannot be delivered, and the reader says so.
 */
export function decodeLogEvent(
  sessionId: string,
  stream: string,
  pos: number,
  header: MsgHdrs | undefined,
  payload: Uint8Array,
): { ok: true; event: LogEvent } | { ok: false; reason: string } {
  if (header === undefined) return { ok: false, reason: `message at ${pos} has no Tether headers` };
  const epoch = header.get(LogHeader.epoch);
  const seq = toCount(header.get(LogHeader.seq));
  const prev = toCount(header.get(LogHeader.prev));
  const kind = header.get(LogHeader.kind);
  if (!isEpoch(epoch) || seq === undefined || seq < 1 || prev === undefined || !isEventKind(kind)) {
    return { ok: false, reason: `message at ${pos} has malformed Tether headers` };
  }
  const end = header.get(LogHeader.endReason);
  const upstreamId = header.get(LogHeader.upstreamId);
  const traceparent = header.get(LogHeader.traceparent);
  const writer = header.get(LogHeader.writer);
  const event: LogEvent = {
    id: encodeEventId({ epoch, stream, seq, pos }),
    sessionId,
    stream,
    epoch,
    seq,
    pos,
    prev,
    kind,
    payload,
    upstreamId: upstreamId === '' ? undefined : upstreamId,
    endReason: isEndReason(end) ? end : undefined,
    traceparent: traceparent === '' ? undefined : traceparent,
    writer: writer === '' ? undefined : writer,
  };
  return { ok: true, event };
}

function toCount(text: string): number | undefined {
  if (!/^(0|[1-9][0-9]{0,15})$/.test(text)) return undefined;
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : undefined;
}
