import type { IncomingMessage } from 'node:http';
import { principalDigest } from '@tether/session-log';
import { header } from '../http/request.js';
import type { AuthConfig } from './auth-config.js';
import { invalidToken } from './auth-error.js';
import type { Identity } from './identity.js';
import { requireScopes } from './identity.js';
import { createIntrospectionVerifier } from './introspection.js';
import { createJwtVerifier } from './jwt.js';
import type { TokenVerifier } from './jwt.js';
import { TETHER_IDENTITY, TETHER_PRINCIPAL, upstreamIdentity } from './upstream-identity.js';

/**
 * Who sent a request, as every handler needs it: the principal its
 * sessions are bound to, and what the upstream is told of it.
 */
export interface Caller {
  /** The digest sessions are bound to (`principalDigest`, or `identityPrincipal` of a verified token). */
  readonly principal: string;
  /**
   * Headers every upstream request made for this caller carries: its
   * `Authorization` unchanged (default), or with `--upstream-auth strip`
   * none of it and the verified principal instead.
   */
  readonly upstreamHeaders: Readonly<Record<string, string>>;
}

export interface Authenticator {
  /** The caller, or throws an `AuthError` (401, 403 or 503 at the edge). */
  authenticate(req: IncomingMessage): Promise<Caller>;
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
      authenticate(req) {
        const authorization = req.headers.authorization;
        return Promise.resolve({ principal: principalDigest(header(req, name) ?? ''), upstreamHeaders: authorization === undefined ? {} : { authorization } });
      },
    };
  }
  const verifier: TokenVerifier = config.mode === 'jwt' ? createJwtVerifier(config) : createIntrospectionVerifier(config);
  const strip = config.upstreamAuth === 'strip';
  return {
    async authenticate(req) {
      const authorization = req.headers.authorization;
      if (authorization === undefined || authorization === '') throw invalidToken('missing', 'the request has no access token (Authorization: Bearer <token>)');
      const token = BEARER.exec(authorization)?.[1];
      if (token === undefined) throw invalidToken('malformed', 'the Authorization header is not of the form Bearer <token>');
      if (config.mode === 'jwt' && !COMPACT_JWS.test(token)) throw invalidToken('malformed', 'the access token is not a well-formed signed JWT (three base64url segments)');
      const identity: Identity = await verifier.verify(token);
      requireScopes(identity, config.scopes);
      return {
        principal: identity.principal,
        upstreamHeaders: strip ? { [TETHER_PRINCIPAL]: identity.principal, [TETHER_IDENTITY]: upstreamIdentity(identity) } : { authorization },
      };
    },
  };
}
