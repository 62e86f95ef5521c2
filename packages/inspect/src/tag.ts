import { createHash } from 'node:crypto';
import { principalTag } from '@tether/session-log';

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

/**
 * A principal filter (`--principal`, `?principal=`, ListSessions'
 * `principal`): 1 to 43 base64url characters, a principal tag (12), the
 * start of one, or up to a whole digest (43).
 */
export const PRINCIPAL_FILTER_PATTERN = /^[A-Za-z0-9_-]{1,43}$/;

export function isPrincipalFilter(text: string): boolean {
  return PRINCIPAL_FILTER_PATTERN.test(text);
}

/** What a refused principal filter is told. The value is not echoed: a token pasted by mistake must not end up in a terminal or a log. */
export const PRINCIPAL_FILTER_ALLOWED = 'a principal tag (the PRINCIPAL column) or its start: 1 to 43 of A-Z a-z 0-9 _ -';

/**
 * The principal tag of a registry record: `principalTag` of its digest (the
 * first 12 characters), never more. Empty when there is no record (the
 * session expired from the registry) or it holds no digest.
 */
export function principalTagOf(record: { readonly principal?: unknown } | undefined): string {
  return typeof record?.principal === 'string' ? principalTag(record.principal) : '';
}

/**
 * Whether a session's principal tag passes a principal filter: the tag starts
 * with the filter's first 12 characters (the filter's own tag). Comparing no
 * more than a tag shows keeps a filter from reading a digest out one
 * character at a time. An unknown principal (`''`) passes no filter.
 */
export function principalMatches(tag: string, filter: string): boolean {
  return tag !== '' && tag.startsWith(principalTag(filter));
}
