/**
 * Audit events: what a gateway (or the session-log service) did for one
 * request of a session, as metadata only. They live on
 * `<prefix>.audit.<session>` in the log stream itself, so they share its
 * retention (`max_age`, `max_bytes`, `max_msgs_per_subject`); a session's
 * close purges its events (`<prefix>.log.<session>.>`) but not these, so an
 * operator still sees how a closed session ended until `max_age` takes them.
 *
 * Never a payload, never a session id (the subject addresses the session),
 * never a raw event id: a cursor is its stream, seq and position.
 */

/** The request kinds an audit event names. */
export const AuditKind = {
  initialize: 'initialize',
  post: 'post',
  get: 'get',
  resume: 'resume',
  delete: 'delete',
  /** A stream never written by a gateway was claimed by this instance (a session's first GET listener). */
  claim: 'claim',
  /** A stream found orphaned was claimed by this instance (stream `0`'s listener or a POST stream's nested resume). */
  takeover: 'takeover',
  /** This instance's drain ended a delivery of the session. */
  drain: 'drain',
  /** The session was closed (a refused resume, the upstream forgot it, an operator's `tether-admin close`). */
  close: 'close',
  /** A delivery (an SSE answer) ended: how many events it carried, and why it ended. Joined to its request by `conn`. */
  delivered: 'delivered',
} as const;
export type AuditKind = (typeof AuditKind)[keyof typeof AuditKind];

/** One audit event, in wire spelling (JSON on `<prefix>.audit.<session>`). */
export interface AuditEvent {
  /** Format version, 1. */
  readonly v: 1;
  readonly atMs: number;
  /** The instance that served it (`--instance-id`), or `tether-admin`. */
  readonly instance: string;
  readonly kind: AuditKind | string;
  readonly stream?: string;
  /** A resume's cursor as stream, seq and position (never the raw id). */
  readonly cursor?: { readonly stream: string; readonly seq: number; readonly pos: number };
  /** A resume's verdict (`resumed`, `truncated`, …). */
  readonly verdict?: string;
  /** HTTP status answered. */
  readonly status?: number;
  /** Events delivered (on `delivered`). */
  readonly events?: number;
  /** A random id of one delivery: its request's event and its `delivered` event share it. */
  readonly conn?: string;
  /** The writer id of this instance (a takeover's new writer), or the one taken over from. */
  readonly writer?: string;
  readonly from?: string;
  /** A short constant reason (`client_gone`, `drain`, `resumed_upstream`, …). */
  readonly reason?: string;
}

/** What a caller fills in; the recorder adds `v`, `atMs` and `instance`. */
export type AuditRecord = Omit<AuditEvent, 'v' | 'atMs' | 'instance'>;

export function encodeAuditEvent(event: AuditEvent): string {
  return JSON.stringify(event);
}

/** Parses one stored audit event; undefined for anything that is not one (never throws). */
export function decodeAuditEvent(data: Uint8Array | string): AuditEvent | undefined {
  let value: unknown;
  try {
    value = JSON.parse(typeof data === 'string' ? data : Buffer.from(data).toString('utf8'));
  } catch {
    return undefined;
  }
  const e = value as Partial<AuditEvent> | null;
  if (typeof e !== 'object' || e === null || e.v !== 1 || typeof e.atMs !== 'number' || typeof e.instance !== 'string' || typeof e.kind !== 'string') return undefined;
  return e as AuditEvent;
}
