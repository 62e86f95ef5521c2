/**
 * The outcome of classifying a resume request (DESIGN §7). The first rule that
 * matches decides, in this order:
 *
 * | verdict           | condition                                                        | gateway answer |
 * |-------------------|------------------------------------------------------------------|----------------|
 * | `malformed`       | `Last-Event-ID` does not decode                                  | 400 |
 * | `unknown_session` | the session is not registered, is closed, or has another principal | 404 |
 * | `epoch_mismatch`  | the cursor's epoch is not the session's epoch                    | terminate, 404 |
 * | `ahead`           | the stream's last position is below the cursor's `pos`           | terminate, 404 |
 * | `diverged`        | the message at the cursor's `pos` has another subject, seq or epoch | terminate, 404 |
 * | `truncated`       | the event after the cursor was evicted (seq or prev chain broken) | terminate, 404 |
 * | `abandoned`       | the stream ended without its writer finishing                    | terminate, 404 |
 * | `resumed`         | otherwise                                                        | 200 SSE |
 *
 * Every gateway answer carries it in the `Tether-Resume` header
 * (`HttpHeader.tetherResume`). Values are wire spelling (snake_case).
 */
export const ResumeVerdict = {
  resumed: 'resumed',
  malformed: 'malformed',
  unknownSession: 'unknown_session',
  epochMismatch: 'epoch_mismatch',
  ahead: 'ahead',
  diverged: 'diverged',
  truncated: 'truncated',
  abandoned: 'abandoned',
} as const;
export type ResumeVerdict = (typeof ResumeVerdict)[keyof typeof ResumeVerdict];

const VERDICTS: ReadonlySet<string> = new Set(Object.values(ResumeVerdict));

/** True when `s` is one of the wire spellings of `ResumeVerdict`, e.g. from a `Tether-Resume` header. */
export function isResumeVerdict(s: unknown): s is ResumeVerdict {
  return typeof s === 'string' && VERDICTS.has(s);
}
