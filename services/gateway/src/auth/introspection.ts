import { request } from 'undici';
import type { IntrospectionAuth } from './auth-config.js';
import { invalidToken, isAuthError, issuerUnavailable } from './auth-error.js';
import { identityFrom, requireUnexpired, TokenCache, tokenKey } from './identity.js';
import type { Identity } from './identity.js';
import type { TokenVerifier } from './jwt.js';

const INTROSPECTION_TIMEOUT_MS = 5_000;
/** The largest introspection answer read; real ones are a few hundred bytes. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** An answer, or the refusal it amounts to (inactive tokens are remembered too, so one bad token costs one call). */
type Answer = { ok: true; identity: Identity } | { ok: false; description: string; reason: string };

/**
 * Opaque access tokens asked of the issuer's RFC 7662 introspection
 * endpoint, with the gateway's client credentials (HTTP Basic). An answer is
 * reused until the token's `exp`, at most `cacheMs`; concurrent requests
 * with one token share one call. `active: false`, a foreign `iss`, or an
 * `aud` without this resource is a 401; an endpoint that cannot be reached,
 * answers an error status or refuses the gateway's own credentials is a
 * 503, never a 401.
 */
export function createIntrospectionVerifier(config: IntrospectionAuth): TokenVerifier {
  const answers = new TokenCache<Answer>();
  const pending = new Map<string, Promise<Answer>>();
  const authorization = `Basic ${Buffer.from(`${formEncode(config.clientId)}:${formEncode(config.clientSecret)}`).toString('base64')}`;

  const ask = async (token: string): Promise<Answer> => {
    let status: number;
    let text: string;
    try {
      const answer = await request(config.introspectionUrl, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
        headersTimeout: INTROSPECTION_TIMEOUT_MS,
        bodyTimeout: INTROSPECTION_TIMEOUT_MS,
      });
      status = answer.statusCode;
      const bytes = Buffer.from(await answer.body.arrayBuffer());
      text = bytes.length > MAX_ANSWER_BYTES ? '' : bytes.toString('utf8');
    } catch (err) {
      throw issuerUnavailable(`the introspection endpoint could not be reached (${(err as { code?: string }).code ?? (err as Error).name})`, err);
    }
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
      let answer = answers.get(key);
      if (answer === undefined) {
        let asking = pending.get(key);
        if (asking === undefined) {
          asking = ask(token).finally(() => pending.delete(key));
          pending.set(key, asking);
        }
        answer = await asking;
        const expiresAtMs = answer.ok ? (answer.identity.expiresAtMs ?? Number.POSITIVE_INFINITY) : Number.POSITIVE_INFINITY;
        answers.set(key, answer, Math.min(Date.now() + config.cacheMs, expiresAtMs));
      }
      if (!answer.ok) throw invalidToken(answer.reason, answer.description);
      requireUnexpired(answer.identity, config.clockSkewMs);
      return answer.identity;
    },
  };
}

/** RFC 7662 section 2.2: only `active` is required; what else is there must fit this resource. */
function judge(claims: Record<string, unknown>, config: IntrospectionAuth): Answer {
  if (claims.active !== true) return { ok: false, reason: 'inactive', description: 'the access token is not active (expired, revoked or unknown to the issuer)' };
  if (claims.iss !== undefined && claims.iss !== config.issuer) return { ok: false, reason: 'issuer', description: `the access token was not issued by ${config.issuer}` };
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
