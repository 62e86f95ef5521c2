import {
  EndReason as ProtoEndReason,
  endReasonFromSpelling,
  endReasonSpelling,
  eventKindFromSpelling,
  eventKindSpelling,
  SessionState,
} from '@tether/cursor-proto';
import type { Event, Lease as ProtoLease, Session } from '@tether/cursor-proto';
import { isSessionId, isStreamId } from '@tether/protocol';
import type { EndReason, EventKind } from '@tether/protocol';
import type { Lease, LogEvent, SessionRecord } from '@tether/session-log';
import { invalid } from './errors.js';
import { publicMeta } from './scope.js';

/** A stored event as the API sends it. */
export function toProtoEvent(event: LogEvent): Event {
  return {
    id: event.id,
    stream: event.stream,
    seq: event.seq,
    pos: event.pos,
    prev: event.prev,
    kind: eventKindFromSpelling(event.kind) ?? 0,
    payload: Buffer.from(event.payload.buffer, event.payload.byteOffset, event.payload.byteLength),
    upstreamId: event.upstreamId,
    endReason: event.endReason === undefined ? ProtoEndReason.UNSPECIFIED : (endReasonFromSpelling(event.endReason) ?? 0),
    traceparent: event.traceparent,
    writer: event.writer,
  };
}

/** A registry entry as the API sends it: never the principal digest, never reserved metadata. */
export function toProtoSession(record: SessionRecord): Session {
  return {
    sessionId: record.sessionId,
    epoch: record.epoch,
    state: record.state === 'active' ? SessionState.ACTIVE : SessionState.CLOSED,
    createdAtMs: record.createdAtMs,
    touchedAtMs: record.touchedAtMs,
    meta: publicMeta(record.meta),
  };
}

export function toProtoLease(lease: Omit<Lease, 'revision'> & { revision?: number }): ProtoLease {
  return {
    sessionId: lease.sessionId,
    stream: lease.stream,
    owner: lease.owner,
    token: lease.token,
    expiresAtMs: lease.expiresAtMs,
    revision: lease.revision ?? 0,
  };
}

/** A lease a caller presents back (renew, release); its session and stream are validated. */
export function fromProtoLease(lease: ProtoLease | undefined): Lease {
  if (lease === undefined) throw invalid('lease is required');
  sessionIdOf(lease.sessionId);
  streamIdOf(lease.stream);
  // Bounded like AcquireLease's owner: a refusal names the owner, and an
  // unbounded one made trailers large enough to stall the caller's channel
  // (the gRPC fuzz found it).
  textOf('lease.owner', lease.owner, 128);
  textOf('lease.token', lease.token, 64);
  // KV revisions start at 1; GetLeaseHolder's answer carries none (0) and is not a lease to renew or release.
  countOf('lease.revision', lease.revision, 1, Number.MAX_SAFE_INTEGER);
  return { ...lease };
}

export function eventKindOf(kind: number): EventKind {
  const spelling = eventKindSpelling(kind);
  if (spelling === undefined) throw invalid(`kind must be EVENT, PRIME or END, got ${kind}`);
  return spelling;
}

export function endReasonOf(reason: number): EndReason | undefined {
  if (reason === ProtoEndReason.UNSPECIFIED) return undefined;
  const spelling = endReasonSpelling(reason);
  if (spelling === undefined) throw invalid(`end_reason must be COMPLETE, ABANDONED or DEADLINE, got ${reason}`);
  return spelling;
}

export function sessionIdOf(sessionId: string): string {
  if (!isSessionId(sessionId)) throw invalid('session_id must be 22 base64url characters', { sessionId: sessionId.slice(0, 64) });
  return sessionId;
}

export function streamIdOf(stream: string): string {
  if (!isStreamId(stream)) throw invalid("stream must be '0' or 8 lowercase base32 characters", { stream: stream.slice(0, 64) });
  return stream;
}

/** A bounded text field: at most `max` UTF-8 bytes, no control characters. */
export function textOf(name: string, value: string, max: number): string {
  if (Buffer.byteLength(value, 'utf8') > max) throw invalid(`${name} is longer than ${max} bytes`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalid(`${name} contains a control character`);
  return value;
}

/** A whole number in [min, max] (uint64 fields arrive as numbers, already bounded by 2^53 - 1). */
export function countOf(name: string, value: number, min: number, max: number): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) throw invalid(`${name} must be an integer from ${min} to ${max}, got ${value}`);
  return value;
}
