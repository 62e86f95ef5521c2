/**
 * @tether/protocol: the wire-level vocabulary shared by every Tether package.
 * No runtime dependencies and no `node:` imports, so it also runs in browsers.
 *
 * Explicit named exports only (never `export *`), so the public surface is
 * exactly what this file lists. Users' symbols come first.
 */

// Event ids: `<epoch>-<stream>-<seq>-<pos>` (DESIGN §5).
export { encodeEventId, decodeEventId, compareEventIds, MAX_EVENT_ID_LENGTH } from './event-id.js';
export type { EventId, DecodeResult } from './event-id.js';

// Resume verdicts (DESIGN §7).
export { ResumeVerdict, isResumeVerdict } from './verdicts.js';

// Header names and log message vocabulary (DESIGN §4).
export { HttpHeader, LogHeader, EventKind, EndReason, isEventKind, isEndReason } from './wire.js';

// SSE framing.
export { SseParser, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_BLOCK_BYTES } from './sse-parse.js';
export type { SseMessage, SseParserOptions } from './sse-parse.js';
export { encodeSseEvent, encodeSseComment } from './sse-encode.js';
export type { SseOutgoing } from './sse-encode.js';

// The acknowledgment frame that opens a served resume (`event: resume`).
export { encodeResumeAck, parseResumeAck, isResumeAck, RESUME_ACK_EVENT, MAX_RESUME_ACK_LENGTH } from './resume-ack.js';
export type { ResumeAck, ResumeAckOptions } from './resume-ack.js';

// Random tokens.
export {
  STANDALONE_STREAM,
  isEpoch,
  isStreamId,
  isSessionId,
  newEpoch,
  newStreamId,
  newSessionId,
  EPOCH_LENGTH,
  STREAM_ID_LENGTH,
  SESSION_ID_LENGTH,
} from './ids.js';

// Errors.
export { ProtocolError, ProtocolErrorCode, SseLimitError, isSseLimitError } from './errors.js';
