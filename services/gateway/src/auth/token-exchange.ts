import { request } from 'undici';
import type { TokenExchangeConfig } from './auth-config.js';
import { exchangeRefused, invalidToken, isAuthError, issuerUnavailable } from './auth-error.js';
import type { AuthError } from './auth-error.js';
import { TokenCache, tokenKey } from './identity.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** The longest one exchange may take, from connecting to the answer's last byte. */
const EXCHANGE_TIMEOUT_MS = 5_000;
/** The largest answer read; a token response is a few KiB. */
const MAX_ANSWER_BYTES = 64 * 1024;
/**
 * An exchanged token is not handed out in its last 30 s (its last half when
 * it lives under a minute): it must not expire on its way to the upstream,
 * nor right after, in a reconnect the gateway makes with it.
 */
const EXPIRY_MARGIN_MS = 30_000;
/** A refusal is remembered this long, so a caller retrying cannot make each of its requests a call to the issuer. */
const REFUSAL_CACHE_MS = 10_000;

/** RFC 6750 section 2.1's b64token: what `Authorization: Bearer` may carry (no CR, LF or spaces). */
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
/** RFC 6749 section 5.2: an error code is printable ASCII without `"` and `\`. */
const ERROR_CODE = /^[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}$/;

export interface TokenExchange {
  /**
   * A token for `audience` standing for the holder of `subjectToken`, which
   * the caller verified: from the cache (a hash and a lookup) until shortly
   * before it expires; concurrent misses share one call. Throws an
   * `AuthError`: `issuer_unavailable`, `exchange_refused` or `invalid_token`.
   */
  tokenFor(subjectToken: string, audience: string): Promise<string>;
}

export interface TokenExchangeOptions {
  /** Default 5 s. */
  readonly timeoutMs?: number;
  /** Default 64 KiB. */
  readonly maxAnswerBytes?: number;
  /** Cached exchanges (tokens and refusals); past it the oldest goes. Default 10,000. */
  readonly maxEntries?: number;
}

type Outcome = { readonly ok: true; readonly token: string } | { readonly ok: false; readonly error: AuthError };

/**
 * RFC 8693 token exchange at the issuer's token endpoint, with the
 * gateway's client credentials (`client_secret_basic`) and the target as an
 * RFC 8707 `resource`. What the caller gets when it fails:
 * - the endpoint unreachable, too slow, answering 5xx, 408 or 429, or
 *   answering something that is not a usable Bearer access token:
 *   `issuer_unavailable`, 503 with Retry-After, as for the issuer's keys;
 * - `invalid_grant`: the issuer says the grant, here the caller's token, is
 *   invalid, expired or revoked (RFC 6749 section 5.2), though the gateway
 *   verified it: a 401 `invalid_token` with the route's challenge, since
 *   the client's next token is the fix;
 * - any other refusal (`invalid_target`, `unauthorized_client`,
 *   `invalid_client`, `invalid_request`, …): `exchange_refused`, a 502. The
 *   caller's token is good for the route and the issuer is up; it will not
 *   delegate to this upstream, which is the deployment's to fix. A 401 or
 *   403 `insufficient_scope` would send the client to re-authenticate for
 *   a token that would be refused the same way, and a 503 to retry in vain.
 *   RFC 8693 section 2.2.2 also names `invalid_request` for a bad subject
 *   token; it is a 502 here, as it equally means the gateway's request was
 *   wrong, and an expired token never gets this far (the authenticator
 *   refuses it first, without skew).
 */
export function createTokenExchange(config: TokenExchangeConfig, options: TokenExchangeOptions = {}): TokenExchange {
  const timeoutMs = options.timeoutMs ?? EXCHANGE_TIMEOUT_MS;
  const maxAnswerBytes = options.maxAnswerBytes ?? MAX_ANSWER_BYTES;
  const outcomes = new TokenCache<Outcome>(options.maxEntries);
  const pending = new Map<string, Promise<Outcome>>();
  const authorization = `Basic ${Buffer.from(`${formEncode(config.clientId)}:${formEncode(config.clientSecret)}`).toString('base64')}`;

  const post = async (body: string): Promise<{ status: number; text: string }> => {
    const signal = AbortSignal.timeout(timeoutMs);
    try {
      const answer = await request(config.tokenEndpoint, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
        body,
        signal,
      });
      // Read while it streams, so an endless answer costs at most the bound.
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of answer.body as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxAnswerBytes) {
          answer.body.destroy();
          throw issuerUnavailable(`the token endpoint's answer exceeds ${maxAnswerBytes} bytes`);
        }
        chunks.push(chunk);
      }
      return { status: answer.statusCode, text: Buffer.concat(chunks).toString('utf8') };
    } catch (err) {
      if (isAuthError(err)) throw err;
      const why = signal.aborted ? `no answer within ${timeoutMs} ms` : ((err as { code?: string }).code ?? (err as Error).name);
      throw issuerUnavailable(`the token endpoint could not be reached (${why})`, err);
    }
  };

  /** One exchange, and until when its outcome may be reused. */
  const ask = async (subjectToken: string, audience: string): Promise<[Outcome, number]> => {
    const { status, text } = await post(
      new URLSearchParams({
        grant_type: TOKEN_EXCHANGE_GRANT,
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        requested_token_type: ACCESS_TOKEN_TYPE,
        resource: audience,
      }).toString(),
    );
    const now = Date.now();
    if (status === 200) {
      const { token, lifetimeMs } = usableToken(text);
      // Without expires_in the token's life is unknown: used once, never cached.
      const untilMs = lifetimeMs === undefined ? now : now + lifetimeMs - Math.min(EXPIRY_MARGIN_MS, lifetimeMs / 2);
      return [{ ok: true, token }, untilMs];
    }
    if (status < 400 || status >= 500 || status === 408 || status === 429) throw issuerUnavailable(`the token endpoint answered HTTP ${status}`);
    const code = oauthError(text);
    const error = code === 'invalid_grant'
      ? invalidToken('exchange_invalid_grant', 'the issuer no longer accepts the access token (it refused to exchange it: invalid_grant)')
      : exchangeRefused(code);
    return [{ ok: false, error }, now + REFUSAL_CACHE_MS];
  };

  return {
    async tokenFor(subjectToken, audience) {
      // The audience is in the key: one caller token, one exchanged token per upstream.
      const key = tokenKey(`${audience}\0${subjectToken}`);
      let outcome = outcomes.get(key);
      if (outcome === undefined) {
        let asking = pending.get(key);
        if (asking === undefined) {
          asking = ask(subjectToken, audience)
            .then(([result, untilMs]) => (outcomes.set(key, result, untilMs), result))
            .finally(() => pending.delete(key));
          pending.set(key, asking);
        }
        outcome = await asking;
      }
      if (!outcome.ok) throw outcome.error;
      return outcome.token;
    },
  };
}

/** RFC 8693 section 2.2.1: a Bearer access token, and how long it lives. Anything else is the issuer's fault. */
function usableToken(text: string): { token: string; lifetimeMs: number | undefined } {
  const answer = jsonObject(text);
  if (answer === undefined) throw issuerUnavailable('the token endpoint\'s answer is not a JSON object');
  const token = answer.access_token;
  if (typeof token !== 'string' || !BEARER_TOKEN.test(token)) throw issuerUnavailable('the token endpoint\'s answer has no access_token the gateway can send');
  if (typeof answer.token_type !== 'string' || answer.token_type.toLowerCase() !== 'bearer') throw issuerUnavailable('the exchanged token is not a Bearer token');
  if (answer.issued_token_type !== undefined && answer.issued_token_type !== ACCESS_TOKEN_TYPE) throw issuerUnavailable('the token endpoint issued something other than an access token');
  const expiresIn = answer.expires_in;
  return { token, lifetimeMs: typeof expiresIn === 'number' && Number.isFinite(expiresIn) && expiresIn > 0 ? expiresIn * 1000 : undefined };
}

/** The OAuth `error` of a refusal (RFC 6749 section 5.2), or `unknown`: a code, never the description, goes into answers and logs. */
function oauthError(text: string): string {
  const error = jsonObject(text)?.error;
  return typeof error === 'string' && ERROR_CODE.test(error) ? error : 'unknown';
}

function jsonObject(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** RFC 6749 section 2.3.1: client id and secret are form-encoded before Basic. */
function formEncode(value: string): string {
  return encodeURIComponent(value).replace(/%20/g, '+');
}
