/**
 * Why a request's credentials were refused, in the terms of RFC 6750 and
 * the MCP authorization spec. `issuer_unavailable` is ours: the issuer's
 * keys, introspection or token endpoint could not be reached, which is
 * answered 503 (retry), never 401 (which would send the client to
 * re-authenticate for no fault of its own). `exchange_refused` is ours too:
 * the issuer answered, but would not exchange the caller's good token for
 * the upstream's (RFC 8693), which is a 502 (token-exchange.ts says why).
 */
export const AuthErrorCode = {
  /** RFC 6750 section 3.1: the request itself is malformed (two `Authorization` headers): 400. */
  invalidRequest: 'invalid_request',
  invalidToken: 'invalid_token',
  insufficientScope: 'insufficient_scope',
  issuerUnavailable: 'issuer_unavailable',
  exchangeRefused: 'exchange_refused',
} as const;
export type AuthErrorCode = (typeof AuthErrorCode)[keyof typeof AuthErrorCode];

/**
 * A refusal. `description` names the problem for the client (never the
 * token or its claims' values); `reason` is a short stable word for logs
 * and metrics (`expired`, `audience`, `signature`, …).
 */
export class AuthError extends Error {
  override readonly name = 'AuthError';
  constructor(
    readonly code: AuthErrorCode,
    readonly reason: string,
    readonly description: string,
    /** insufficient_scope: the scopes the request needs. */
    readonly scopes: readonly string[] = [],
    options?: { cause?: unknown },
  ) {
    super(description, options);
  }
}

export const isAuthError = (err: unknown): err is AuthError => err instanceof AuthError;

export const invalidToken = (reason: string, description: string, cause?: unknown): AuthError =>
  new AuthError(AuthErrorCode.invalidToken, reason, description, [], cause === undefined ? undefined : { cause });

/** No credentials at all: RFC 6750 section 3.1 says the challenge then carries no error code. */
export const noCredentials = (): AuthError => invalidToken('missing', 'the request has no access token (Authorization: Bearer <token>)');

export const invalidRequest = (reason: string, description: string): AuthError => new AuthError(AuthErrorCode.invalidRequest, reason, description);

export const issuerUnavailable = (description: string, cause?: unknown): AuthError =>
  new AuthError(AuthErrorCode.issuerUnavailable, 'issuer_unavailable', description, [], cause === undefined ? undefined : { cause });

/** `issuerError`: the token endpoint's OAuth `error` code, or `unknown`; never its description. */
export const exchangeRefused = (issuerError: string): AuthError =>
  new AuthError(AuthErrorCode.exchangeRefused, 'exchange_refused', `the issuer refused to exchange the access token for the upstream's (${issuerError})`);
