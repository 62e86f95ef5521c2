/**
 * Names that travel on the wire, in one place (STYLE: "Subjects, header names
 * and bucket names are constants in one place per package"). Values keep wire
 * spelling. NATS subjects and bucket names belong to `@tether/session-log`.
 */

/**
 * HTTP header names, lowercase: Node's `IncomingMessage.headers` and the
 * Fetch `Headers` class both present names lowercased, so these can be used
 * for lookups directly. HTTP header names are case-insensitive on the wire.
 */
export const HttpHeader = {
  /** `Mcp-Session-Id`: the session, minted by the gateway (DESIGN §9). */
  sessionId: 'mcp-session-id',
  /** `Last-Event-ID`: the client's resume cursor, an encoded `EventId`. */
  lastEventId: 'last-event-id',
  /** `MCP-Protocol-Version`: selects the protocol era (DESIGN §2). */
  protocolVersion: 'mcp-protocol-version',
  /** `Tether-Resume`: the `ResumeVerdict` of a resume request (DESIGN §7). */
  tetherResume: 'tether-resume',
  /** W3C trace context. */
  traceparent: 'traceparent',
} as const;
export type HttpHeader = (typeof HttpHeader)[keyof typeof HttpHeader];

/**
 * NATS message header names on log events (DESIGN §4). NATS headers are
 * case-sensitive, so these are exact spellings.
 */
export const LogHeader = {
  /** The epoch of the session's log. */
  epoch: 'Tether-Epoch',
  /** Per-stream counter, 1, 2, 3… with no holes. */
  seq: 'Tether-Seq',
  /** JetStream sequence of the previous event of the same stream, `0` for the first. */
  prev: 'Tether-Prev',
  /** An `EventKind`. */
  kind: 'Tether-Kind',
  /** The upstream's own SSE id, when it sent one (used for nested resume, DESIGN §6). */
  upstreamId: 'Tether-Upstream-Id',
  /** An `EndReason`, on `end` markers. */
  endReason: 'Tether-End',
  /** JetStream de-duplication id: `<session>.<stream>.<seq>`. */
  msgId: 'Nats-Msg-Id',
  /** W3C trace context, carried across NATS (DESIGN §11). */
  traceparent: 'traceparent',
  /**
   * The writer that appended the event: a process's random incarnation id,
   * whose liveness anyone can ask on `<prefix>.writer.<id>` (DESIGN §6).
   * Absent: no writer has claimed the stream (a session's first GET prime).
   */
  writer: 'Tether-Writer',
} as const;
export type LogHeader = (typeof LogHeader)[keyof typeof LogHeader];

/** The value of `Tether-Kind`: what a log message is. */
export const EventKind = {
  /** An upstream SSE event; the payload is the JSON-RPC message bytes as received. */
  event: 'event',
  /** A priming event (SEP-1699): an id and empty data. */
  prime: 'prime',
  /** The end marker of a stream; its `Tether-End` says why. */
  end: 'end',
} as const;
export type EventKind = (typeof EventKind)[keyof typeof EventKind];

/** The value of `Tether-End` on an `end` marker. */
export const EndReason = {
  /** The upstream response finished normally. */
  complete: 'complete',
  /** The writer died and the upstream could not resume (DESIGN §6). Readers get an error. */
  abandoned: 'abandoned',
  /** The request deadline passed before the upstream finished. */
  deadline: 'deadline',
} as const;
export type EndReason = (typeof EndReason)[keyof typeof EndReason];

const KINDS: ReadonlySet<string> = new Set(Object.values(EventKind));
const END_REASONS: ReadonlySet<string> = new Set(Object.values(EndReason));

/** True when `s` is a valid `Tether-Kind` value. */
export function isEventKind(s: unknown): s is EventKind {
  return typeof s === 'string' && KINDS.has(s);
}

/** True when `s` is a valid `Tether-End` value. */
export function isEndReason(s: unknown): s is EndReason {
  return typeof s === 'string' && END_REASONS.has(s);
}
