import { errors, jwtVerify } from 'jose';
import type { JWTPayload, JWTVerifyOptions } from 'jose';
import type { JwtAuth } from './auth-config.js';
import { invalidToken, isAuthError } from './auth-error.js';
import type { AuthError } from './auth-error.js';
import { identityFrom, requireIssuedInPast, TokenCache, tokenKey } from './identity.js';
import type { Identity } from './identity.js';
import { createKeySetCache } from './jwks-cache.js';

/** A verified token is reused until its `exp`, but never longer than this (bounds the effect of a key the issuer withdraws). */
const VERIFIED_MAX_MS = 5 * 60_000;
/** RFC 9068 section 4: the `typ` of a JWT access token (jose compares media types without `application/` and case-insensitively). */
const ACCESS_TOKEN_TYP = 'at+jwt';

export interface TokenVerifier {
  /** The token's identity; throws an `AuthError` (invalid token, or the issuer unreachable). */
  verify(token: string): Promise<Identity>;
}

/**
 * JWT access tokens (RFC 9068) verified with `jose` against the issuer's
 * JWKS (`jwks-cache.ts`): signature (asymmetric algorithms only, from the
 * configured list), `iss` exactly, `aud` one of the gateway's resource URIs
 * (RFC 8707, the MCP spec's audience rule), `exp` and `nbf` with the clock
 * skew, `iat` not in the future, and with `tokenType: 'at+jwt'` the header's
 * `typ`. A token that verified is remembered by its SHA-256 until it
 * expires, so a client's next requests cost a hash and a lookup, not a
 * signature check.
 */
export function createJwtVerifier(config: JwtAuth): TokenVerifier {
  const keys = createKeySetCache(config.jwksUrl);
  const verified = new TokenCache<Identity>();
  const options: JWTVerifyOptions = {
    issuer: config.issuer,
    audience: [...config.audiences],
    algorithms: [...config.algorithms],
    clockTolerance: Math.ceil(config.clockSkewMs / 1000),
    requiredClaims: ['exp'],
    ...(config.tokenType === 'at+jwt' ? { typ: ACCESS_TOKEN_TYP } : {}),
  };
  return {
    async verify(token) {
      const key = tokenKey(token);
      // An entry lives no longer than its token's exp plus the skew: a hit is unexpired.
      const known = verified.get(key);
      if (known !== undefined) return known;
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, options));
      } catch (err) {
        if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw toAuthError(err, config);
        payload = await verifyWithEachKey(token, err, options, config);
      }
      requireIssuedInPast(payload, config.clockSkewMs);
      const identity = identityFrom(payload, config.issuer, config.principalClaim);
      verified.set(key, identity, Math.min(identity.expiresAtMs! + config.clockSkewMs, Date.now() + VERIFIED_MAX_MS));
      return identity;
    },
  };
}

/**
 * A token without `kid` and several keys of its algorithm (RFC 7515 makes
 * `kid` optional; issuers publish old and new keys side by side while they
 * rotate): each candidate in turn. Only a signature that verifies with none
 * of them is a bad signature; any other refusal (expired, audience, …) is
 * the token's, from the key that verified it.
 */
async function verifyWithEachKey(token: string, candidates: errors.JWKSMultipleMatchingKeys, options: JWTVerifyOptions, config: JwtAuth): Promise<JWTPayload> {
  for await (const key of candidates) {
    try {
      return (await jwtVerify(token, key, options)).payload;
    } catch (err) {
      if (!(err instanceof errors.JWSSignatureVerificationFailed)) throw toAuthError(err, config);
    }
  }
  throw invalidToken('signature', 'the access token\'s signature does not verify with any of the issuer\'s keys');
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
      case 'typ':
        return invalidToken('token_type', `the access token is not a JWT access token (its typ header must be ${ACCESS_TOKEN_TYP}, RFC 9068)`);
      default:
        return invalidToken('claims', `the access token's ${err.claim} claim is invalid`);
    }
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return invalidToken('algorithm', `the access token's signature algorithm is not accepted (allowed: ${config.algorithms.join(', ')})`);
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalidToken('signature', 'the access token\'s signature does not verify');
  if (err instanceof errors.JWKSNoMatchingKey) return invalidToken('key', 'the access token is signed with a key the issuer does not publish');
  if (err instanceof errors.JOSEError) return invalidToken('malformed', 'the access token is not a well-formed signed JWT');
  return invalidToken('malformed', 'the access token could not be read as a JWT');
}
