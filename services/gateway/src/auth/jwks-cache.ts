import { createLocalJWKSet, errors } from 'jose';
import type { FlattenedJWSInput, JWSHeaderParameters } from 'jose';
import { issuerUnavailable } from './auth-error.js';
import { issuerRequest } from './issuer-request.js';

/** Keys are refreshed once they are this old (in the background: requests keep using them meanwhile). */
export const JWKS_MAX_AGE_MS = 10 * 60_000;
/**
 * At most one fetch of the keys per this interval, whether the last one
 * succeeded or failed: forged `kid`s, or every request during an outage,
 * cannot make the gateway hammer the issuer. Short, so a rotation is seen
 * within seconds; equal to the 503's Retry-After, so a client that waits as
 * told finds a new fetch allowed.
 */
export const JWKS_COOLDOWN_MS = 2_000;
/**
 * While the issuer's JWKS endpoint fails, keys fetched successfully are
 * still used for this long after that fetch (stale-if-error). An outage of
 * the key endpoint alone should not refuse tokens signed with keys we hold;
 * but a key the issuer withdrew while we could not see it must not live on
 * for ever. A day outlasts the usual outage and stays well inside usual
 * rotation periods (weeks to months, with overlap).
 */
export const JWKS_STALE_IF_ERROR_MS = 24 * 3_600_000;
const JWKS_TIMEOUT_MS = 5_000;
/** A key set is a few kB (an RSA key with an x5c chain is ~4 kB); a larger answer is not one. */
const MAX_JWKS_BYTES = 256 * 1024;

type LocalKeySet = ReturnType<typeof createLocalJWKSet>;

/** jose's key resolver signature, for `jwtVerify(token, keySet)`. */
export type KeySetResolver = (header: JWSHeaderParameters, token: FlattenedJWSInput) => ReturnType<LocalKeySet>;

/**
 * The issuer's JWKS, fetched with a deadline and a size limit, kept in
 * memory, refetched when it ages or a token names an unknown `kid`.
 * Resolves a token's key like jose's sets do: throws `JWKSNoMatchingKey`
 * (no key fits: an `invalid_token`), `JWKSMultipleMatchingKeys` (a token
 * without `kid`, several keys of its algorithm: the caller tries each), or
 * an `issuer_unavailable` AuthError when the keys cannot be had.
 */
export function createKeySetCache(jwksUrl: string): KeySetResolver {
  let held: { keys: LocalKeySet; fetchedAtMs: number } | undefined;
  /** When the last fetch started, successful or not: the cooldown counts from here. */
  let lastAttemptMs = Number.NEGATIVE_INFINITY;
  /** Why the last fetch failed; undefined once one succeeds. */
  let lastFailure: string | undefined;
  let inFlight: Promise<void> | undefined;

  const coolingDown = (now: number): boolean => now - lastAttemptMs < JWKS_COOLDOWN_MS;

  /** Starts a fetch (or joins the running one: concurrent misses share it); rejects with an issuer_unavailable AuthError. */
  const refresh = (): Promise<void> => {
    if (inFlight !== undefined) return inFlight;
    lastAttemptMs = Date.now();
    const attempt = fetchKeySet(jwksUrl).then(
      (keys) => {
        held = { keys, fetchedAtMs: Date.now() };
        lastFailure = undefined;
      },
      (err: unknown) => {
        lastFailure = (err as Error).message;
        throw unavailable(lastFailure, err);
      },
    );
    inFlight = attempt;
    // Cleared on settling, whichever way; the `.catch` keeps this bookkeeping chain from being an unhandled rejection.
    attempt.finally(() => (inFlight = undefined)).catch(() => undefined);
    return attempt;
  };

  /** Fetches now if allowed, else fails with the last failure: the caller has no keys it may use without a fetch. */
  const refreshOrFail = (now: number): Promise<void> => {
    if (inFlight === undefined && coolingDown(now)) return Promise.reject(unavailable(lastFailure ?? 'no key set yet'));
    return refresh();
  };

  return async (header, token) => {
    const now = Date.now();
    if (held === undefined || now - held.fetchedAtMs >= JWKS_STALE_IF_ERROR_MS) {
      // Never fetched, or too long since the last success: no key may be trusted without the issuer.
      await refreshOrFail(now);
      return held!.keys(header, token);
    }
    if (now - held.fetchedAtMs >= JWKS_MAX_AGE_MS && inFlight === undefined && !coolingDown(now)) {
      // Stale but usable: refresh behind this request, which goes on with the keys we hold (stale-if-error).
      refresh().catch(() => undefined);
    }
    try {
      return await held.keys(header, token);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw err;
    }
    // No key we hold fits: perhaps the issuer rotated one in since we fetched.
    if (inFlight === undefined && coolingDown(now)) {
      // No fetch may be made now. If the last one failed, the key may well be
      // a fresh rotation we could not see: 503 (retry) rather than a 401 that
      // would send the client to fetch a new token signed with the same
      // unseen key. If it succeeded moments ago, the issuer does not publish
      // the key: 401.
      if (lastFailure !== undefined) throw unavailable(lastFailure);
      throw new errors.JWKSNoMatchingKey();
    }
    await refresh();
    return held!.keys(header, token);
  };
}

const unavailable = (reason: string, cause?: unknown): Error => issuerUnavailable(`the issuer's keys could not be fetched (${reason})`, cause);

/** GET the JWKS: HTTP 200, at most MAX_JWKS_BYTES, within JWKS_TIMEOUT_MS, a JSON key set jose accepts. */
async function fetchKeySet(url: string): Promise<LocalKeySet> {
  const answer = await issuerRequest(url, { method: 'GET', headers: { accept: 'application/jwk-set+json, application/json' }, timeoutMs: JWKS_TIMEOUT_MS, maxBytes: MAX_JWKS_BYTES });
  if (answer.status !== 200) throw new Error(`HTTP ${answer.status}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    throw new Error('the answer is not JSON');
  }
  try {
    return createLocalJWKSet(parsed as Parameters<typeof createLocalJWKSet>[0]);
  } catch {
    throw new Error('the answer is not a JSON Web Key Set');
  }
}
