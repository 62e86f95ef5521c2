import type { ServerResponse } from 'node:http';
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
 * The protected resource metadata (RFC 9728) of every resource URI the
 * gateway answers for, and the challenges that point clients at it.
 *
 * Each `--auth-audience` URI's document is served at its well-known path
 * (`https://gw/mcp` → `/.well-known/oauth-protected-resource/mcp`), as the
 * RFC derives it, so its `resource` is the one the client's URL implies
 * (the SDK clients check that). The bare prefix serves the first. A 401 on
 * a route points at the document of the audience whose path is the route's,
 * else the first.
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
  for (const resource of config.audiences) {
    const url = new URL(resource);
    const path = url.pathname === '/' ? '' : url.pathname.replace(/\/$/, '');
    const body = JSON.stringify({
      resource,
      authorization_servers: config.authorizationServers,
      ...(config.scopes.length === 0 ? {} : { scopes_supported: config.scopes }),
      bearer_methods_supported: ['header'],
    });
    if (!documents.has(PRM_PREFIX + path)) documents.set(PRM_PREFIX + path, body);
    metadataUrls.set(path, `${url.origin}${PRM_PREFIX}${path}`);
  }
  if (!documents.has(PRM_PREFIX)) documents.set(PRM_PREFIX, documents.values().next().value!);
  const fallbackUrl = metadataUrls.values().next().value!;
  const scope = config.scopes.join(' ');
  return {
    documentAt: (path) => documents.get(path),
    refusal(err, routePath) {
      if (err.code === AuthErrorCode.issuerUnavailable) {
        return { status: 503, code: GatewayErrorCode.unavailable, message: `Service Unavailable: ${err.description}; retry shortly`, data: { error: 'temporarily_unavailable' }, headers: { 'retry-after': String(ISSUER_RETRY_AFTER_S) } };
      }
      const metadataUrl = metadataUrls.get(routePath) ?? fallbackUrl;
      const params = [`error="${err.code}"`, `error_description="${quoted(err.description)}"`, `resource_metadata="${metadataUrl}"`];
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
