import { createHash, randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, type JWK } from 'jose';
import { LOOPBACK } from './ports.js';

// The parts of `authorization-server.ts` that drive HTTP by hand: the
// browserless authorization-code flow, keys, and the listener's life cycle.
// No oidc-provider types here: the package ships none, and emitted
// declarations must not name it.

/** The redirect URI every client is registered with; nothing listens there. */
export const TEST_REDIRECT_URI = 'http://127.0.0.1/cb';

/** A token, introspection or authorization request the server refused. */
export class OAuthRequestError extends Error {
  readonly code = 'oauth_request_failed';
  readonly endpoint: string;
  readonly status: number;
  /** The OAuth `error` code (`invalid_target`, `invalid_scope`, …) when the server sent one. */
  readonly error: string | undefined;
  readonly errorDescription: string | undefined;

  constructor(endpoint: string, status: number, body: string) {
    let parsed: { error?: unknown; error_description?: unknown } = {};
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      // Not JSON: the body is kept in the message.
    }
    const error = typeof parsed.error === 'string' ? parsed.error : undefined;
    const description = typeof parsed.error_description === 'string' ? parsed.error_description : undefined;
    super(`authorization server: ${endpoint} answered ${status}: ${error === undefined ? body.slice(0, 500) : `${error}${description === undefined ? '' : ` (${description})`}`}`);
    this.name = 'OAuthRequestError';
    this.endpoint = endpoint;
    this.status = status;
    this.error = error;
    this.errorDescription = description;
  }
}

/** The account an authorization-code grant logs in when none is named. */
export const DEFAULT_ACCOUNT = 'user-1';

/**
 * A user's authorization-code grant without a browser: GET /auth, the
 * interaction redirects (answered by `finishInteraction` in
 * `authorization-server.ts`), the callback's `code`, then the token request
 * with the PKCE verifier.
 */
export async function authorizationCodeFlow<T extends { readonly refresh_token?: string }>(flow: {
  issuer: string;
  clientId: string;
  resource: string;
  scope: string | undefined;
  accountId: string;
  tokenRequest: (clientId: string, params: Record<string, string>) => Promise<T>;
}): Promise<T & { readonly refresh_token: string }> {
  const { issuer, clientId, resource, scope, accountId, tokenRequest } = flow;
  const verifier = randomBytes(32).toString('base64url');
  const state = randomBytes(12).toString('base64url');
  const authorize = new URL(`${issuer}/auth`);
  for (const [name, value] of Object.entries({
    client_id: clientId,
    response_type: 'code',
    redirect_uri: TEST_REDIRECT_URI,
    // offline_access is only honoured with prompt=consent.
    scope: scope === undefined ? 'offline_access' : `${scope} offline_access`,
    prompt: 'consent',
    resource,
    login_hint: accountId,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state,
  }))
    authorize.searchParams.set(name, value);
  const callback = await followToCallback(authorize.href);
  const error = callback.searchParams.get('error');
  if (error !== null) throw new OAuthRequestError('authorization', 302, JSON.stringify({ error, error_description: callback.searchParams.get('error_description') ?? undefined }));
  if (callback.searchParams.get('state') !== state) throw new Error('authorization server: state mismatch on the callback');
  const code = callback.searchParams.get('code');
  if (code === null) throw new Error(`authorization server: no code on the callback ${callback.href}`);
  const tokens = await tokenRequest(clientId, { grant_type: 'authorization_code', code, redirect_uri: TEST_REDIRECT_URI, code_verifier: verifier, resource });
  const refreshToken = tokens.refresh_token;
  if (refreshToken === undefined) throw new Error('authorization server: the code grant returned no refresh_token');
  return { ...tokens, refresh_token: refreshToken };
}

/** Follows redirects by hand, with a cookie jar, until one points at {@link TEST_REDIRECT_URI}. */
async function followToCallback(start: string): Promise<URL> {
  const jar = new Map<string, string>();
  let url = start;
  for (let hop = 0; hop < 10; hop += 1) {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const res = await fetch(url, { redirect: 'manual', headers: cookie === '' ? {} : { cookie } });
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      if (eq > 0) jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const location = res.headers.get('location');
    if (res.status < 300 || res.status >= 400 || location === null) {
      throw new OAuthRequestError('authorization', res.status, await res.text());
    }
    await res.body?.cancel();
    const next = new URL(location, url);
    if (`${next.origin}${next.pathname}` === TEST_REDIRECT_URI) return next;
    url = next.href;
  }
  throw new Error('authorization server: more than 10 redirects in the authorization flow');
}

export async function newSigningKey(alg: 'RS256' | 'PS256' | 'ES256'): Promise<JWK> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: await calculateJwkThumbprint(jwk), use: 'sig', alg };
}

export function basicAuth(clientId: string, clientSecret: string): string {
  // RFC 6749 §2.3.1: each part form-urlencoded before base64.
  const encode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`).toString('base64')}`;
}

export function listen(server: Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ host: LOOPBACK, port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

export function stopListening(server: Server, sockets: Set<Socket>): Promise<void> {
  if (!server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    server.close((err) => (err === undefined ? resolve() : reject(err)));
    server.closeAllConnections();
    for (const socket of sockets) socket.destroy();
  });
}
