import type { ResumeVerdict } from '@tether/protocol';

/**
 * Local errors of `@tether/sdk`. Callers match on `code`; the HTTP edge
 * (`createSessionRouter`) maps them to statuses. JSON-RPC codes on the wire
 * are kept apart, in `wire.ts`.
 */
export const TetherSdkErrorCode = {
  /** The log refused the cursor (`verdict` says why): the SDK must answer an error, never an empty stream. */
  resumeRefused: 'resume_refused',
  /** A store was asked about a stream id that neither the SDK nor Tether could have produced for its session. */
  unknownStream: 'unknown_stream',
  /** A session's stored `initialize` request is missing or unreadable: the session cannot be rebuilt here. */
  sessionNotRebuildable: 'session_not_rebuildable',
  /** Asked of the SDK's own resume path what it cannot serve: a GET stream never ends, and the SDK answers a replay only once it did. */
  unsupported: 'unsupported',
  /** A verified token (`authInfo`) names no subject (`extra.sub`; with `clientPrincipalOf`, no `clientId`): the server's verifier must say who the caller is. */
  noIdentity: 'no_identity',
} as const;
export type TetherSdkErrorCode = (typeof TetherSdkErrorCode)[keyof typeof TetherSdkErrorCode];

/** Facts that travel with an error (never payloads, never raw session ids in messages). */
export interface TetherSdkErrorFields {
  readonly verdict?: ResumeVerdict;
  readonly stream?: string;
  readonly detail?: Readonly<Record<string, unknown>>;
}

export class TetherSdkError extends Error {
  override readonly name = 'TetherSdkError';
  readonly code: TetherSdkErrorCode;
  readonly fields: TetherSdkErrorFields;

  constructor(code: TetherSdkErrorCode, message: string, fields: TetherSdkErrorFields = {}, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.fields = fields;
  }
}

export function isTetherSdkError(err: unknown, code?: TetherSdkErrorCode): err is TetherSdkError {
  return err instanceof TetherSdkError && (code === undefined || err.code === code);
}
