/**
 * What an operator sees of sessions: the read model shared by
 * `tether-inspect` (the web page) and `tether-admin` (the command line).
 * Metadata only: never a payload, never a raw session id (a session is
 * named by its tag, `sessionTag(id)` from @tether/protocol), never a
 * principal digest in full or a token (a principal is named by its tag).
 */

/** One row of the session list. */
export interface SessionSummary {
  /** `sessionTag(sessionId)`: how every view names the session. */
  readonly tag: string;
  /**
   * `principalTag(record.principal)`: the first 12 characters of the digest
   * of the principal that opened the session, the same for all of one
   * user's sessions (with OAuth, across token refreshes). Never the whole
   * digest. Empty when the registry no longer holds the session (`expired`).
   */
  readonly principal: string;
  readonly route: string | undefined;
  readonly state: 'active' | 'closed' | string;
  readonly createdAtMs: number;
  readonly touchedAtMs: number | undefined;
  readonly streams: number;
  /** Resume verdicts recorded by the audit events, by kind (`resumed`, `truncated`, …). */
  readonly verdicts: Readonly<Record<string, number>>;
}

/** One event of a stream, as a mark on its lane. */
export interface EventMark {
  readonly seq: number;
  readonly pos: number;
  readonly kind: 'prime' | 'event' | 'end' | string;
  /** Payload size in bytes (the payload itself is never read out). */
  readonly bytes: number;
  readonly atMs: number;
  /** The instance's writer id that stored it (`Tether-Writer`), if any. */
  readonly writer: string | undefined;
  readonly endReason?: string;
}

/** A stretch of a stream written by one writer; a new writer after another is a takeover. */
export interface WriterSpan {
  readonly writer: string;
  readonly fromSeq: number;
  readonly toSeq: number;
  readonly takeover: boolean;
}

/** One stream of the session: the GET stream `0` or a POST stream. */
export interface StreamLane {
  readonly stream: string;
  readonly events: readonly EventMark[];
  readonly writers: readonly WriterSpan[];
  readonly ended: boolean;
}

/** What a gateway (or the session-log service) recorded about one request, from the audit events. */
export interface Connection {
  readonly atMs: number;
  /** The instance that served it (`--instance-id`). */
  readonly instance: string;
  /** `initialize`, `post`, `get`, `resume`, `delete`, `takeover`, `drain`, … */
  readonly kind: string;
  readonly stream: string | undefined;
  /** The cursor of a resume, as `seq` and `pos` (never the raw id: it contains the epoch only, but stays metadata). */
  readonly cursor: { readonly stream: string; readonly seq: number; readonly pos: number } | undefined;
  /** A resume's verdict (`resumed`, `truncated`, `epoch_mismatch`, `unknown_session`, …). */
  readonly verdict: string | undefined;
  /** Events delivered on this connection, when known. */
  readonly events: number | undefined;
  readonly status: number | undefined;
  /** When the delivery ended (its `delivered` audit event), if it has. */
  readonly endedAtMs?: number;
  /** A short constant reason: how a delivery ended (`ended`, `client_gone`, `drain`, …), what a takeover did, why a session closed. */
  readonly reason?: string;
  /** Takeovers and claims: the writer that took the stream, and the one it was taken from (absent on a first claim). */
  readonly writer?: string;
  readonly from?: string;
}

/** Everything drawn for one session. */
export interface SessionTimeline {
  readonly session: SessionSummary;
  readonly lanes: readonly StreamLane[];
  readonly connections: readonly Connection[];
  /** When the session ended (closed), if it did. */
  readonly endedAtMs: number | undefined;
}

/** The result of checking one stream's chain on demand. */
export interface ChainCheck {
  readonly stream: string;
  readonly ok: boolean;
  readonly events: number;
  /** Each hole or fork by position: what was expected and what was found. */
  readonly problems: readonly { readonly kind: 'hole' | 'fork' | 'epoch' | 'after_end' | string; readonly seq: number; readonly pos: number; readonly detail: string }[];
}
