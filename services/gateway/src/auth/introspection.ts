import type { IntrospectionAuth } from './auth-config.js';
import { invalidToken, isAuthError, issuerUnavailable } from './auth-error.js';
import { identityFrom, requireUnexpired, TokenCache, tokenKey } from './identity.js';
import type { Identity } from './identity.js';
import { issuerRequest } from './issuer-request.js';
import type { TokenVerifier } from './jwt.js';

/** One deadline for the whole exchange with the introspection endpoint: connect, headers and body. */
const INTROSPECTION_TIMEOUT_MS = 5_000;
/** The largest introspection answer read; real ones are a few hundred bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Sizes and lives of the answer caches; the defaults suit production, tests shrink them. */
export interface IntrospectionCacheLimits {
  /** Active answers kept (the oldest goes first). Default 10,000. */
  readonly activeEntries?: number;
  /** Refusals kept, apart from active answers, so a flood of junk tokens cannot evict real users' answers. Default 1,000. */
  readonly refusalEntries?: number;
  /**
   * How long a refusal is reused (never longer than `--auth-introspection-cache`).
   * Default 10 s: enough that a client retrying a bad token costs the issuer
   * one call, short enough that a token the issuer did not know yet (a
   * replica behind) is asked again soon.
   */
  readonly refusalMs?: number;
}

/** A refusal: what the issuer's answer amounts to for this resource. */
interface Refusal {
  readonly reason: string;
  readonly description: string;
}
type Answer = { ok: true; identity: Identity } | ({ ok: false } & Refusal);

/**
 * Opaque access tokens asked of the issuer's RFC 7662 introspection
 * endpoint, with the gateway's client credentials (HTTP Basic). An active
 * answer is reused until the token's `exp`, at most `cacheMs`; a refusal
 * (inactive, another audience, not an access token, …) at most
 * `refusalMs`, in a cache of its own; concurrent requests with one token
 * share one call. A refusal is a 401; an endpoint that cannot be reached,
 * answers an error status or refuses the gateway's own credentials is a
 * 503, never a 401.
 */
export function createIntrospectionVerifier(config: IntrospectionAuth, limits: IntrospectionCacheLimits = {}): TokenVerifier {
  const active = new TokenCache<Identity>(limits.activeEntries ?? 10_000);
  const refused = new TokenCache<Refusal>(limits.refusalEntries ?? 1_000);
  const refusalMs = Math.min(limits.refusalMs ?? 10_000, config.cacheMs);
  const pending = new Map<string, Promise<Answer>>();
  const authorization = `Basic ${Buffer.from(`${formEncode(config.clientId)}:${formEncode(config.clientSecret)}`).toString('base64')}`;

  const ask = async (token: string): Promise<Answer> => {
    let answer;
    try {
      answer = await issuerRequest(config.introspectionUrl, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
        timeoutMs: INTROSPECTION_TIMEOUT_MS,
        maxBytes: MAX_ANSWER_BYTES,
      });
    } catch (err) {
      throw issuerUnavailable(`the introspection endpoint could not be reached (${(err as Error).message})`, err);
    }
    const { status, text } = answer;
    if (status === 401 || status === 403) throw issuerUnavailable(`the introspection endpoint refused the gateway's client credentials (HTTP ${status})`);
    if (status !== 200) throw issuerUnavailable(`the introspection endpoint answered HTTP ${status}`);
    let claims: Record<string, unknown>;
    try {
      claims = JSON.parse(text) as Record<string, unknown>;
      if (typeof claims !== 'object' || claims === null || Array.isArray(claims)) throw new Error('not an object');
    } catch (err) {
      throw issuerUnavailable('the introspection endpoint\'s answer is not a JSON object', err);
    }
    return judge(claims, config);
  };

  return {
    async verify(token) {
      const key = tokenKey(token);
      let identity = active.get(key);
      if (identity === undefined) {
        const refusal = refused.get(key);
        if (refusal !== undefined) throw invalidToken(refusal.reason, refusal.description);
        let asking = pending.get(key);
        if (asking === undefined) {
          asking = ask(token).then((answer) => {
            // Stored once, by the request that asked, before the joiners resume.
            if (answer.ok) active.set(key, answer.identity, Math.min(Date.now() + config.cacheMs, answer.identity.expiresAtMs ?? Number.POSITIVE_INFINITY));
            else refused.set(key, { reason: answer.reason, description: answer.description }, Date.now() + refusalMs);
            return answer;
          });
          asking.finally(() => pending.delete(key)).catch(() => undefined);
          pending.set(key, asking);
        }
        const answer = await asking;
        if (!answer.ok) throw invalidToken(answer.reason, answer.description);
        identity = answer.identity;
      }
      requireUnexpired(identity, config.clockSkewMs);
      return identity;
    },
  };
}

/**
 * RFC 7662 section 2.2 `token_type` values that name an access token. The
 * RFC points at RFC 6749 section 7.1's token types, which issuers fill with
 * the access token's type (`Bearer`, as oidc-provider and most others send)
 * or with a type identifier (RFC 8693 section 3, or its short
 * `access_token`). Absent is accepted: the field is optional, and
 * oidc-provider omits it for refresh tokens, which its missing `aud` gives
 * away. Anything else (`refresh_token`, an ID token, `DPoP`: a
 * sender-constrained token whose proof this gateway does not check) must
 * not open a session.
 */
const ACCESS_TOKEN_TYPES = new Set(['access_token', 'urn:ietf:params:oauth:token-type:access_token', 'bearer']);

/** Whether an introspection answer's `token_type` allows an access token (see ACCESS_TOKEN_TYPES). */
export function isAccessTokenType(tokenType: unknown): boolean {
  return tokenType === undefined || (typeof tokenType === 'string' && ACCESS_TOKEN_TYPES.has(tokenType.toLowerCase()));
}

/** RFC 7662 section 2.2: only `active` is required; what else is there must fit this resource. */
function judge(claims: Record<string, unknown>, config: IntrospectionAuth): Answer {
  if (claims.active !== true) return { ok: false, reason: 'inactive', description: 'the access token is not active (expired, revoked or unknown to the issuer)' };
  if (claims.iss !== undefined && claims.iss !== config.issuer) return { ok: false, reason: 'issuer', description: `the access token was not issued by ${config.issuer}` };
  if (!isAccessTokenType(claims.token_type)) return { ok: false, reason: 'token_type', description: 'the token is not an access token (the issuer\'s token_type names another kind, such as a refresh token)' };
  const audiences = typeof claims.aud === 'string' ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud : [];
  // The MCP spec: a token must have been issued for this resource. An answer that names no audience proves nothing.
  if (!audiences.some((a) => config.audiences.includes(a as string))) {
    return { ok: false, reason: 'audience', description: `the access token is not meant for this resource (its audience must include ${config.audiences.join(' or ')})` };
  }
  if (typeof claims.nbf === 'number' && Date.now() + config.clockSkewMs < claims.nbf * 1000) return { ok: false, reason: 'not_yet_valid', description: 'the access token is not valid yet (nbf)' };
  try {
    return { ok: true, identity: identityFrom(claims, config.issuer, config.principalClaim) };
  } catch (err) {
    if (isAuthError(err)) return { ok: false, reason: err.reason, description: err.description };
    throw err;
  }
}

/** RFC 6749 section 2.3.1: client id and secret are form-encoded before Basic. */
function formEncode(value: string): string {
  return encodeURIComponent(value).replace(/%20/g, '+');
}
