import type { ServerResponse } from 'node:http';
import { DEFAULT_ROUTE } from './auth-config.js';
import type { AuthConfig } from './auth-config.js';
import { AuthErrorCode } from './auth-error.js';
import type { AuthError } from './auth-error.js';
import { GatewayErrorCode } from '../http/reply.js';
import type { ErrorReply } from '../http/reply.js';

/** RFC 9728 section 3: the well-known prefix, inserted between the resource's origin and its path. */
export const PRM_PREFIX = '/.well-known/oauth-protected-resource';

/** How long a client waits before asking again while the issuer is unreachable. */
const ISSUER_RETRY_AFTER_S = 2;

/**
 * The protected resource metadata (RFC 9728) of every route, and the
 * challenges that point clients at it. Each route is its own protected
 * resource: its document, at `/.well-known/oauth-protected-resource<route
 * path>`, names the route's `--auth-audience` URI as its `resource`, and a
 * 401 on the route points there. Where the URI's own path differs from the
 * route's (a proxy in front rewrites paths), the document is served at the
 * URI's well-known path too, as RFC 9728 section 3.1 derives it, unless
 * that path is another route's. The bare prefix serves the default route's
 * document (`/mcp`), else the first route's.
 */
export interface ResourceMetadata {
  /** The document served at `path`, or undefined when `path` is not a metadata path. */
  documentAt(path: string): string | undefined;
  /** The JSON-RPC error reply for a refusal on `routePath`, with its `WWW-Authenticate` or `Retry-After`. */
  refusal(err: AuthError, routePath: string): ErrorReply;
}

export function createResourceMetadata(config: AuthConfig): ResourceMetadata | undefined {
  if (config.mode === 'none') return undefined;
  const documents = new Map<string, string>();
  const metadataUrls = new Map<string, string>();
  const routes = Object.entries(config.resources);
  for (const [route, resource] of routes) {
    const body = JSON.stringify({
      resource,
      authorization_servers: config.authorizationServers,
      ...(config.scopes.length === 0 ? {} : { scopes_supported: config.scopes }),
      bearer_methods_supported: ['header'],
    });
    documents.set(PRM_PREFIX + wellKnownSuffix(route), body);
    const url = new URL(resource);
    metadataUrls.set(route, `${url.origin}${PRM_PREFIX}${wellKnownSuffix(url.pathname)}`);
  }
  // Second pass, so a route's own path always wins over another route's URI path.
  for (const [route, resource] of routes) {
    const uriPath = PRM_PREFIX + wellKnownSuffix(new URL(resource).pathname);
    if (!documents.has(uriPath)) documents.set(uriPath, documents.get(PRM_PREFIX + wellKnownSuffix(route))!);
  }
  const defaultRoute = config.resources[DEFAULT_ROUTE] === undefined ? routes[0]![0] : DEFAULT_ROUTE;
  if (!documents.has(PRM_PREFIX)) documents.set(PRM_PREFIX, documents.get(PRM_PREFIX + wellKnownSuffix(defaultRoute))!);
  const scope = config.scopes.join(' ');
  return {
    documentAt: (path) => documents.get(path),
    refusal(err, routePath) {
      if (err.code === AuthErrorCode.issuerUnavailable) {
        return { status: 503, code: GatewayErrorCode.unavailable, message: `Service Unavailable: ${err.description}; retry shortly`, data: { error: 'temporarily_unavailable' }, headers: { 'retry-after': String(ISSUER_RETRY_AFTER_S) } };
      }
      // The caller's token is good here; the issuer will not delegate it to the upstream (token-exchange.ts).
      if (err.code === AuthErrorCode.exchangeRefused) {
        return { status: 502, code: GatewayErrorCode.upstream, message: `Bad Gateway: route ${routePath}: ${err.description}`, data: { error: err.code } };
      }
      if (err.code === AuthErrorCode.invalidRequest) {
        return { status: 400, code: GatewayErrorCode.invalidRequest, message: `Bad Request: ${err.description}`, data: { error: err.code }, headers: { 'www-authenticate': `Bearer error="${err.code}", error_description="${quoted(err.description)}"` } };
      }
      const metadataUrl = metadataUrls.get(routePath) ?? metadataUrls.get(defaultRoute)!;
      // RFC 6750 section 3.1: a request without credentials gets the challenge and no error code.
      const params = err.reason === 'missing' ? [] : [`error="${err.code}"`, `error_description="${quoted(err.description)}"`];
      params.push(`resource_metadata="${metadataUrl}"`);
      const scopes = err.code === AuthErrorCode.insufficientScope ? err.scopes.join(' ') : scope;
      if (scopes !== '') params.push(`scope="${scopes}"`);
      const forbidden = err.code === AuthErrorCode.insufficientScope;
      return {
        status: forbidden ? 403 : 401,
        code: forbidden ? GatewayErrorCode.forbidden : GatewayErrorCode.unauthorized,
        message: `${forbidden ? 'Forbidden' : 'Unauthorized'}: ${err.description}`,
        data: { error: err.code },
        headers: { 'www-authenticate': `Bearer ${params.join(', ')}` },
      };
    },
  };
}

/** A resource URI's path as RFC 9728 appends it to the well-known prefix: `/` is none, a trailing `/` dropped. */
function wellKnownSuffix(pathname: string): string {
  return pathname === '/' ? '' : pathname.replace(/\/$/, '');
}

/** Serves a metadata document (GET, HEAD; CORS open, as browser-based clients fetch it cross-origin). */
export function serveMetadata(res: ServerResponse, method: string | undefined, body: string): void {
  const cors = { 'access-control-allow-origin': '*', 'access-control-allow-methods': 'GET, OPTIONS', 'access-control-allow-headers': 'mcp-protocol-version' };
  if (method === 'OPTIONS') return void res.writeHead(204, cors).end();
  if (method !== 'GET' && method !== 'HEAD') return void res.writeHead(405, { allow: 'GET, HEAD, OPTIONS', ...cors }).end();
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'cache-control': 'max-age=300', ...cors });
  res.end(method === 'HEAD' ? undefined : body);
}

/** RFC 7230 quoted-string: backslash-escape `"` and `\`. */
function quoted(text: string): string {
  return text.replace(/["\\]/g, (c) => `\\${c}`);
}
