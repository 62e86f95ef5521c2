import { createHash } from 'node:crypto';

/**
 * A session's name in every view: `s_` and 12 base64url characters of the
 * id's SHA-256, exactly `sessionTag` of @tether/telemetry (the tag in the
 * services' log lines), kept here so the read model does not load the
 * OpenTelemetry SDK. A test checks the two agree.
 */
export function sessionTag(sessionId: string): string {
  return `s_${createHash('sha256').update(sessionId).digest('base64url').slice(0, 12)}`;
}

export const TAG_PATTERN = /^s_[A-Za-z0-9_-]{12}$/;

export function isSessionTag(text: string): boolean {
  return TAG_PATTERN.test(text);
}
