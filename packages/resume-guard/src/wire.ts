/**
 * Names and numbers this package puts on, or reads from, the wire. Header
 * names come from `@tether/protocol` (`HttpHeader`); these are the rest.
 */

/** Media types, compared on their essence (no parameters, lowercase). */
export const MediaType = {
  json: 'application/json',
  sse: 'text/event-stream',
} as const;

/**
 * JSON-RPC error code of the error the guard delivers for a pending request
 * whose stream it aborted. In the implementation-defined server-error range
 * (-32000 to -32099), away from codes the MCP SDK and Tether use
 * (-32000 connection closed, -32001 request timeout / session not found,
 * -32002 resource not found). `error.data` is `ResumeViolationError#toJSON()`.
 */
export const RESUME_VIOLATION_RPC_CODE = -32050;

/**
 * Statuses that refuse a `Last-Event-ID` for good: 400 (malformed cursor),
 * 404 (session gone: the spec's "start a new session"), 405 (no GET stream, so
 * nothing can resume), 410 (gone). Anything else (409 conflict, 429, 5xx) may
 * pass on a retry, so it is handed to the client unchanged.
 */
export const REFUSAL_STATUSES: ReadonlySet<number> = new Set([400, 404, 405, 410]);

/** Longest refusal body read to find its verdict. */
export const MAX_REFUSAL_BODY_BYTES = 64 * 1024;

/** The media type essence of a `Content-Type` value: `text/event-stream; charset=utf-8` → `text/event-stream`. */
export function mediaTypeOf(contentType: string | null): string | undefined {
  if (contentType === null) return undefined;
  const essence = contentType.split(';', 1)[0]?.trim().toLowerCase();
  return essence === '' ? undefined : essence;
}
