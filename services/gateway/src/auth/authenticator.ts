import type { IncomingMessage } from 'node:http';
import { principalDigest } from '@tether/session-log';
import { header } from '../http/request.js';
import type { AuthConfig } from './auth-config.js';
import { invalidRequest, invalidToken, noCredentials } from './auth-error.js';
import type { Identity } from './identity.js';
import { requireScopes, requireUnexpired } from './identity.js';
import { createIntrospectionVerifier } from './introspection.js';
import { createJwtVerifier } from './jwt.js';
import type { TokenVerifier } from './jwt.js';
import { createTokenExchange } from './token-exchange.js';
import { TETHER_IDENTITY, TETHER_PRINCIPAL, upstreamIdentity } from './upstream-identity.js';

/**
 * Who sent a request, as every handler needs it: the principal its
 * sessions are bound to, and what the route's upstream is told of it.
 */
export interface Caller {
  /** The digest sessions are bound to (`principalDigest`, or `identityPrincipal` of a verified token). */
  readonly principal: string;
  /** The route the caller was authenticated for: its credentials are good there and nowhere else. */
  readonly route: string;
  /**
   * Headers every upstream request made for this caller carries, by the
   * route's `--upstream-auth`: none of the caller's credentials and the
   * verified principal instead (`strip`, the default), its
   * `Authorization` unchanged (`forward`; and `--auth none`, where the
   * header is the trusted identity), or a token the issuer minted for the
   * upstream in exchange for it (`exchange`).
   */
  readonly upstreamHeaders: Readonly<Record<string, string>>;
}

export interface Authenticator {
  /** The caller on `route`, or throws an `AuthError` (400, 401, 403 or 503 at the edge). */
  authenticate(req: IncomingMessage, route: string): Promise<Caller>;
}

/** `Bearer <token68>` (RFC 6750 section 2.1); the scheme is case-insensitive. */
const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
/**
 * A compact JWS: three base64url segments, no padding (RFC 7515 section 2).
 * Checked before jose, which would decode a padded signature to the same
 * bytes: `<token>==` must not be a second spelling of a token.
 */
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export function createAuthenticator(config: AuthConfig): Authenticator {
  if (config.mode === 'none') {
    const name = config.identityHeader;
    return {
      authenticate(req, route) {
        refuseRepeated(req, name);
        const authorization = req.headers.authorization;
        return Promise.resolve({ principal: principalDigest(header(req, name) ?? ''), route, upstreamHeaders: authorization === undefined ? {} : { authorization } });
      },
    };
  }
  const verifier: TokenVerifier = config.mode === 'jwt' ? createJwtVerifier(config) : createIntrospectionVerifier(config);
  const exchange = config.exchange === undefined ? undefined : createTokenExchange(config.exchange);
  const exchangeAudiences = config.exchange?.audiences ?? {};
  return {
    async authenticate(req, route) {
      refuseRepeated(req, 'authorization');
      const authorization = req.headers.authorization;
      if (authorization === undefined || authorization === '') throw noCredentials();
      const token = BEARER.exec(authorization)?.[1];
      if (token === undefined) throw invalidToken('malformed', 'the Authorization header is not of the form Bearer <token>');
      if (config.mode === 'jwt' && !COMPACT_JWS.test(token)) throw invalidToken('malformed', 'the access token is not a well-formed signed JWT (three base64url segments)');
      const identity: Identity = await verifier.verify(token);
      // Each route is its own protected resource: a token minted for another
      // route (same issuer, same gateway) is refused here, never forwarded.
      const resource = config.resources[route];
      if (resource === undefined || !identity.audiences.includes(resource)) {
        throw invalidToken('audience', `the access token is not meant for this resource (its audience must include ${resource ?? 'this route\'s resource URI'})`);
      }
      requireScopes(identity, config.scopes);
      let upstreamHeaders: Record<string, string>;
      switch (config.upstreamAuth[route]) {
        case 'forward':
          upstreamHeaders = { authorization };
          break;
        case 'exchange': {
          // The issuer judges the token again, without the gateway's clock
          // skew: one it would call expired gets the 401 a refresh fixes
          // here, not a refused exchange.
          requireUnexpired(identity, 0);
          // Only the exchanged token: it names the caller (sub) and the
          // gateway (act), signed by the issuer, for an upstream that may
          // sit outside the gateway's network, where Tether-Principal, an
          // unsigned header, would prove nothing.
          upstreamHeaders = { authorization: `Bearer ${await exchange!.tokenFor(token, exchangeAudiences[route]!)}` };
          break;
        }
        default:
          upstreamHeaders = { [TETHER_PRINCIPAL]: identity.principal, [TETHER_IDENTITY]: upstreamIdentity(identity) };
      }
      return { principal: identity.principal, route, upstreamHeaders };
    },
  };
}

/**
 * Two credential headers are refused (400): Node keeps the first, and a
 * proxy in front that keeps the last would have authorized someone else.
 * `rawHeaders` holds every line as sent, names in their original case.
 */
function refuseRepeated(req: IncomingMessage, name: string): void {
  let seen = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name && ++seen > 1) {
      throw invalidRequest('repeated_header', `the request has more than one ${name} header`);
    }
  }
}
