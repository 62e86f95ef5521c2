import { isSessionId, isStreamId } from '@tether/protocol';
import { SessionLogError, SessionLogErrorCode } from './errors.js';

/** Refuses a malformed session id with `invalid_argument` before it reaches a subject or a KV key. */
export function assertSessionId(sessionId: string): void {
  if (!isSessionId(sessionId)) {
    throw new SessionLogError(SessionLogErrorCode.invalidArgument, 'session id must be 22 base64url characters', { sessionId: String(sessionId).slice(0, 64) });
  }
}

/** Refuses a malformed stream id with `invalid_argument` before it reaches a subject or a KV key. */
export function assertStreamId(stream: string): void {
  if (!isStreamId(stream)) {
    throw new SessionLogError(SessionLogErrorCode.invalidArgument, "stream id must be '0' or 8 base32 characters", { stream: String(stream).slice(0, 64) });
  }
}
