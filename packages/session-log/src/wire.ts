/**
 * Every subject, bucket and stream name the log uses, in one place.
 * Subjects are always derived from a validated session id and stream id,
 * never from a client-supplied cursor (DESIGN section 10).
 */
export const DEFAULT_STREAM_NAME = 'TETHER_LOG';
export const DEFAULT_SUBJECT_PREFIX = 'tether';
export const DEFAULT_SESSIONS_BUCKET = 'tether_sessions';
export const DEFAULT_LEASES_BUCKET = 'tether_leases';
export const DEFAULT_PRINCIPALS_BUCKET = 'tether_principals';

export interface Subjects {
  /** `<prefix>.log.>`: what the log stream captures. */
  readonly logWildcard: string;
  /** `<prefix>.log.<session>.<stream>`: one stream of one session. */
  log(sessionId: string, stream: string): string;
  /** `<prefix>.log.<session>.>`: every stream of a session (purge filter). */
  sessionLogs(sessionId: string): string;
  /** `<prefix>.live.>`: where the stream republishes every stored event. */
  readonly liveWildcard: string;
  /** `<prefix>.live.<session>.<stream>`: stored events of one stream, as the server republishes them. */
  live(sessionId: string, stream: string): string;
  /** `<prefix>.ctl.<session>`: core-NATS control messages for a session. */
  control(sessionId: string): string;
  /** `<prefix>.writer.<writer>`: a writer process's presence; "no responders" there means it is gone. */
  writer(writerId: string): string;
}

export function createSubjects(prefix: string): Subjects {
  return {
    logWildcard: `${prefix}.log.>`,
    log: (sessionId, stream) => `${prefix}.log.${sessionId}.${stream}`,
    sessionLogs: (sessionId) => `${prefix}.log.${sessionId}.>`,
    liveWildcard: `${prefix}.live.>`,
    live: (sessionId, stream) => `${prefix}.live.${sessionId}.${stream}`,
    control: (sessionId) => `${prefix}.ctl.${sessionId}`,
    writer: (writerId) => `${prefix}.writer.${writerId}`,
  };
}

/** `Nats-Msg-Id` of an event: a retried append of the same seq is a duplicate. */
export function msgIdOf(sessionId: string, stream: string, seq: number): string {
  return `${sessionId}.${stream}.${seq}`;
}

/** Lease key of a stream writer. */
export function leaseKeyOf(sessionId: string, stream: string): string {
  return `${sessionId}.${stream}`;
}

/** Control message kinds on `<prefix>.ctl.<session>`. */
export const ControlType = {
  closed: 'closed',
  superseded: 'superseded',
  drain: 'drain',
  /**
   * A writer stopped writing `stream` without its end marker (it drained,
   * or the log failed it): whoever serves the stream takes it over now
   * instead of at its next liveness check.
   */
  released: 'released',
} as const;
export type ControlType = (typeof ControlType)[keyof typeof ControlType];

export interface ControlMessage {
  readonly type: ControlType;
  readonly sessionId: string;
  /** For `superseded`: the stream whose older readers must end; for `released`: the stream let go. */
  readonly stream?: string;
  /** Who sent it (an instance id), for logs. */
  readonly from?: string;
}
