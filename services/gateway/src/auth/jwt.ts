import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import type { JWTVerifyGetKey } from 'jose';
import type { JwtAuth } from './auth-config.js';
import { invalidToken, isAuthError, issuerUnavailable } from './auth-error.js';
import type { AuthError } from './auth-error.js';
import { identityFrom, TokenCache, tokenKey } from './identity.js';
import type { Identity } from './identity.js';

/** Keys are kept this long before they are fetched again (jose's default). */
const JWKS_MAX_AGE_MS = 10 * 60_000;
/**
 * A token signed with a key we do not know refetches the keys (a rotation),
 * but at most this often: forged `kid`s cannot make the gateway hammer the
 * issuer. Short, so a rotation is seen within seconds.
 */
const JWKS_COOLDOWN_MS = 2_000;
const JWKS_TIMEOUT_MS = 5_000;
/** A verified token is reused until its `exp`, but never longer than this (bounds the effect of a key the issuer withdraws). */
const VERIFIED_MAX_MS = 5 * 60_000;

export interface TokenVerifier {
  /** The token's identity; throws an `AuthError` (invalid token, or the issuer unreachable). */
  verify(token: string): Promise<Identity>;
}

/**
 * JWT access tokens (RFC 9068) verified with `jose` against the issuer's
 * JWKS: signature (asymmetric algorithms only, from the configured list),
 * `iss` exactly, `aud` one of the gateway's resource URIs (RFC 8707, the MCP
 * spec's audience rule), `exp` and `nbf` with the clock skew. A token that
 * verified is remembered by its SHA-256 until it expires, so a client's
 * next requests cost a hash and a lookup, not a signature check.
 */
export function createJwtVerifier(config: JwtAuth): TokenVerifier {
  const remote = createRemoteJWKSet(new URL(config.jwksUrl), { cooldownDuration: JWKS_COOLDOWN_MS, cacheMaxAge: JWKS_MAX_AGE_MS, timeoutDuration: JWKS_TIMEOUT_MS });
  // The key set's own failures (unreachable, not JSON, not a key set) are the issuer's, not the token's.
  const keys: JWTVerifyGetKey = async (header, token) => {
    try {
      return await remote(header, token);
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) throw err;
      throw issuerUnavailable(`the issuer's keys could not be fetched (${describeFetchFailure(err)})`, err);
    }
  };
  const verified = new TokenCache<Identity>();
  const skewSeconds = Math.ceil(config.clockSkewMs / 1000);
  return {
    async verify(token) {
      const key = tokenKey(token);
      // An entry lives no longer than its token's exp plus the skew: a hit is unexpired.
      const known = verified.get(key);
      if (known !== undefined) return known;
      let payload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: config.issuer,
          audience: [...config.audiences],
          algorithms: [...config.algorithms],
          clockTolerance: skewSeconds,
          requiredClaims: ['exp'],
        }));
      } catch (err) {
        throw toAuthError(err, config);
      }
      const identity = identityFrom(payload, config.issuer, config.principalClaim);
      verified.set(key, identity, Math.min(identity.expiresAtMs! + config.clockSkewMs, Date.now() + VERIFIED_MAX_MS));
      return identity;
    },
  };
}

/** jose's failures in the words of the MCP client's operator; never the token or a claim's value. */
function toAuthError(err: unknown, config: JwtAuth): AuthError {
  if (isAuthError(err)) return err;
  if (err instanceof errors.JWTExpired) return invalidToken('expired', 'the access token expired');
  if (err instanceof errors.JWTClaimValidationFailed) {
    switch (err.claim) {
      case 'iss':
        return invalidToken('issuer', `the access token was not issued by ${config.issuer}`);
      case 'aud':
        return invalidToken('audience', `the access token is not meant for this resource (its audience must include ${config.audiences.join(' or ')})`);
      case 'nbf':
        return invalidToken('not_yet_valid', 'the access token is not valid yet (nbf)');
      case 'exp':
        return invalidToken('expiry', 'the access token has no valid exp claim');
      default:
        return invalidToken('claims', `the access token's ${err.claim} claim is invalid`);
    }
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return invalidToken('algorithm', `the access token's signature algorithm is not accepted (allowed: ${config.algorithms.join(', ')})`);
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalidToken('signature', 'the access token\'s signature does not verify');
  if (err instanceof errors.JWKSNoMatchingKey) return invalidToken('key', 'the access token is signed with a key the issuer does not publish');
  if (err instanceof errors.JWKSMultipleMatchingKeys) return invalidToken('signature', 'the access token\'s signature does not verify with any of the issuer\'s keys');
  if (err instanceof errors.JOSEError) return invalidToken('malformed', 'the access token is not a well-formed signed JWT');
  return invalidToken('malformed', 'the access token could not be read as a JWT');
}

/** What went wrong reaching the issuer, without URLs or bodies. */
export function describeFetchFailure(err: unknown): string {
  if (err instanceof errors.JWKSTimeout) return 'timed out';
  if (err instanceof errors.JWKSInvalid) return 'the answer is not a JSON Web Key Set';
  if (err instanceof errors.JOSEError) return err.message.slice(0, 120);
  const cause = (err as { cause?: { code?: unknown } }).cause;
  if (typeof cause?.code === 'string') return cause.code;
  return (err as Error).name ?? 'unknown error';
}
