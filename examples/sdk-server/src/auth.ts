import type { IncomingMessage, ServerResponse } from 'node:http';
import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import type { JWTPayload, JWTVerifyGetKey } from 'jose';
import { InvalidTokenError, ServerError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import type { OAuthTokenVerifier } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import { getOAuthProtectedResourceMetadataUrl } from '@modelcontextprotocol/sdk/server/auth/router.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { OAuthProtectedResourceMetadata } from '@modelcontextprotocol/sdk/shared/auth.js';

/** Signature algorithms accepted: asymmetric only (never `none`, never HMAC, whose key would be the issuer's public one). */
export const JWT_ALGORITHMS = ['RS256', 'ES256', 'EdDSA'] as const;
/** Clock difference tolerated on `exp` and `nbf`. */
export const CLOCK_TOLERANCE_S = 30;
/** How long a client waits before retrying while the issuer's keys cannot be fetched. */
export const JWKS_RETRY_AFTER_S = 2;
/** A token signed with an unknown `kid` refetches the keys (a rotation), at most this often (jose's default is 30 s). */
const JWKS_COOLDOWN_MS = 2_000;
const JWKS_TIMEOUT_MS = 5_000;
/** RFC 9728 §3: the well-known prefix, inserted between the resource's origin and its path. */
const PRM_PREFIX = '/.well-known/oauth-protected-resource';

/** The issuer's keys could not be fetched (unreachable, timed out, not a key set): the issuer's failure, not the token's. */
export class JwksUnavailableError extends ServerError {
  readonly code = 'jwks_unavailable';
}

export interface JwtVerifierOptions {
  readonly jwksUrl: string;
  /** The tokens' `iss`, compared exactly. */
  readonly issuer: string;
  /** This server's canonical resource URI: the tokens' `aud` must name it. */
  readonly audience: string;
}

/**
 * The SDK's `OAuthTokenVerifier` for JWT access tokens (RFC 9068), on
 * `jose`: signature against the issuer's JWKS (`RS256`, `ES256`, `EdDSA`),
 * `iss` exactly, `aud` naming this server's resource URI, `exp` and `sub`
 * required (RFC 9068 §2.2), 30 s of clock tolerance.
 *
 * The `AuthInfo` names the caller in `extra` (`iss`, `sub`, `client_id`),
 * which is what `createSessionRouter` binds sessions to: a refreshed token of
 * the same subject is the same principal. A client-credentials token's `sub`
 * is its client id (RFC 9068 §2.2). `clientId` is the `client_id` claim,
 * else `azp`, else `''`; it is never the principal (a public client's id is
 * every user's of an app).
 *
 * @throws InvalidTokenError (401) for anything wrong with the token; the
 *   message never quotes the token or a claim's value
 * @throws JwksUnavailableError when the keys could not be fetched (503 at the gate)
 */
export function createJwtVerifier(options: JwtVerifierOptions): OAuthTokenVerifier {
  const remote = createRemoteJWKSet(new URL(options.jwksUrl), { cooldownDuration: JWKS_COOLDOWN_MS, timeoutDuration: JWKS_TIMEOUT_MS });
  // jose throws the key set's own failures from this getter; only "no key for this kid" is the token's.
  const keys: JWTVerifyGetKey = async (header, token) => {
    try {
      return await remote(header, token);
    } catch (err) {
      if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) throw err;
      throw Object.assign(new JwksUnavailableError(`the issuer's keys could not be fetched (${fetchFailure(err)})`), { cause: err });
    }
  };
  const resource = new URL(options.audience);
  return {
    async verifyAccessToken(token) {
      let payload: JWTPayload;
      try {
        ({ payload } = await jwtVerify(token, keys, {
          issuer: options.issuer,
          audience: options.audience,
          algorithms: [...JWT_ALGORITHMS],
          clockTolerance: CLOCK_TOLERANCE_S,
          // RFC 9068 §2.2 requires sub; without it the router would have no principal (it never falls back to the client id).
          requiredClaims: ['exp', 'sub'],
        }));
      } catch (err) {
        throw tokenError(err);
      }
      const clientId = stringClaim(payload['client_id']) ?? stringClaim(payload['azp']) ?? '';
      return {
        token,
        clientId,
        scopes: scopesOf(payload),
        expiresAt: payload.exp!,
        resource,
        extra: { iss: payload.iss, sub: payload.sub, ...(clientId === '' ? {} : { client_id: clientId }) },
      };
    },
  };
}

export interface BearerGateOptions {
  readonly verifier: OAuthTokenVerifier;
  readonly requiredScopes: readonly string[];
  /** The canonical resource URI; the 401's `resource_metadata` is its RFC 9728 metadata URL. */
  readonly audience: string;
  /** Told when the issuer's keys could not be fetched (for a log line; never the token). */
  readonly onUnavailable?: (err: JwksUnavailableError) => void;
}

/**
 * The bearer check in front of `/mcp`: the SDK v1's own `requireBearerAuth`
 * (header parsing, audience, scopes, expiry, its 401/403 bodies and
 * `WWW-Authenticate` with `resource_metadata`), run on node:http.
 *
 * It is Express middleware, and this server is plain node:http, so a
 * three-method stand-in for Express's response (`set`, `status`, `json`:
 * all the middleware calls) carries its answer. One thing is changed: the
 * middleware answers any `ServerError` 500; when the verifier failed because
 * the issuer's keys could not be fetched, the client gets 503 with
 * `Retry-After` instead, which says "retry", not "your token is bad".
 *
 * Resolves true with `req.auth` set (what `router.node` reads), or false
 * once the refusal is written.
 */
export function createBearerGate(options: BearerGateOptions): (req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse) => Promise<boolean> {
  const resourceMetadataUrl = getOAuthProtectedResourceMetadataUrl(new URL(options.audience));
  const settings = { requiredScopes: [...options.requiredScopes], resourceMetadataUrl, expectedResource: new URL(options.audience) };
  return (req, res) =>
    new Promise<boolean>((resolve, reject) => {
      let unavailable: JwksUnavailableError | undefined;
      // One middleware per request, so the verifier's failure is this request's.
      const middleware = requireBearerAuth({
        ...settings,
        verifier: {
          verifyAccessToken: (token) =>
            options.verifier.verifyAccessToken(token).catch((err: unknown) => {
              if (err instanceof JwksUnavailableError) unavailable = err;
              throw err;
            }),
        },
      });
      let status = 200;
      const headers: Record<string, string> = {};
      const response = {
        set(name: string, value: string) {
          headers[name.toLowerCase()] = value;
          return response;
        },
        status(code: number) {
          status = code;
          return response;
        },
        json(body: unknown) {
          if (unavailable !== undefined) {
            options.onUnavailable?.(unavailable);
            status = 503;
            headers['retry-after'] = String(JWKS_RETRY_AFTER_S);
            body = { error: 'temporarily_unavailable', error_description: `${unavailable.message}; retry shortly` };
          }
          res.writeHead(status, { ...headers, 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
          resolve(false);
          return response;
        },
      };
      Promise.resolve(middleware(req, response, (err?: unknown) => (err === undefined ? resolve(true) : reject(err)))).catch(reject);
    });
}

/** RFC 9728 protected resource metadata, served at the audience's well-known path and at the bare prefix. */
export interface ResourceMetadata {
  /** The paths it answers (`/.well-known/oauth-protected-resource/mcp` for `https://host/mcp`, and the bare prefix). */
  readonly paths: ReadonlySet<string>;
  /** The document, for GET; 204 for a CORS preflight; 405 otherwise. */
  serve(req: IncomingMessage, res: ServerResponse): void;
}

export function createResourceMetadata(options: { audience: string; authorizationServer: string; scopes: readonly string[] }): ResourceMetadata {
  const metadata: OAuthProtectedResourceMetadata = {
    resource: options.audience,
    authorization_servers: [options.authorizationServer],
    ...(options.scopes.length === 0 ? {} : { scopes_supported: [...options.scopes] }),
    bearer_methods_supported: ['header'],
    resource_name: 'tether-sdk-example',
  };
  const body = JSON.stringify(metadata);
  const paths = new Set([new URL(getOAuthProtectedResourceMetadataUrl(new URL(options.audience))).pathname, PRM_PREFIX]);
  // Browser-based MCP clients read it cross-origin (the SDK's own metadata handler allows any origin too).
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET, OPTIONS' };
  return {
    paths,
    serve(req, res) {
      if (req.method === 'OPTIONS') {
        res.writeHead(204, { ...cors, 'access-control-allow-headers': '*' }).end();
      } else if (req.method === 'GET' || req.method === 'HEAD') {
        res.writeHead(200, { ...cors, 'content-type': 'application/json' }).end(req.method === 'HEAD' ? undefined : body);
      } else {
        res.writeHead(405, { ...cors, allow: 'GET, OPTIONS', 'content-type': 'application/json' }).end(JSON.stringify({ error: 'method_not_allowed', message: `${req.method} is not allowed; use GET` }));
      }
    },
  };
}

/** jose's failures as the SDK's 401, in words that never quote the token or a claim's value. */
function tokenError(err: unknown): Error {
  if (err instanceof JwksUnavailableError) return err;
  if (err instanceof errors.JWTExpired) return new InvalidTokenError('Token has expired');
  if (err instanceof errors.JWTClaimValidationFailed) return new InvalidTokenError(`Token's ${err.claim} claim is invalid`);
  if (err instanceof errors.JOSEAlgNotAllowed) return new InvalidTokenError(`Token's signature algorithm is not accepted (allowed: ${JWT_ALGORITHMS.join(', ')})`);
  if (err instanceof errors.JWSSignatureVerificationFailed || err instanceof errors.JWKSMultipleMatchingKeys) return new InvalidTokenError('Token signature does not verify');
  if (err instanceof errors.JWKSNoMatchingKey) return new InvalidTokenError('Token is signed with a key the issuer does not publish');
  return new InvalidTokenError('Token is not a well-formed signed JWT');
}

/** What went wrong reaching the issuer, without URLs or bodies. */
function fetchFailure(err: unknown): string {
  if (err instanceof errors.JWKSTimeout) return 'timed out';
  if (err instanceof errors.JWKSInvalid) return 'the answer is not a JSON Web Key Set';
  if (err instanceof errors.JOSEError) return err.message.slice(0, 120);
  const code = (err as { cause?: { code?: unknown } }).cause?.code;
  return typeof code === 'string' ? code : ((err as Error).name ?? 'unknown error');
}

function scopesOf(payload: JWTPayload): string[] {
  if (typeof payload['scope'] === 'string') return payload['scope'].split(' ').filter((s) => s !== '');
  const scp = payload['scp'];
  return Array.isArray(scp) ? scp.filter((s): s is string => typeof s === 'string') : [];
}

function stringClaim(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
