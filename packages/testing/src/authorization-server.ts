import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { JWK } from 'jose';
import type { Provider, ProviderContext } from 'oidc-provider';
import {
  authorizationCodeFlow,
  basicAuth,
  DEFAULT_ACCOUNT,
  listen,
  newSigningKey,
  OAuthRequestError,
  stopListening,
  TEST_REDIRECT_URI,
} from './authorization-server-flows.js';
import { createTokenExchangeGrant, TOKEN_EXCHANGE_GRANT } from './authorization-server-exchange.js';
import { LOOPBACK } from './ports.js';

export { OAuthRequestError, TEST_REDIRECT_URI } from './authorization-server-flows.js';

/** Options of {@link startAuthorizationServer}. */
export interface AuthorizationServerOptions {
  /**
   * Resource indicators (RFC 8707) tokens may be issued for, e.g. a gateway's
   * canonical URI `http://127.0.0.1:PORT/mcp`. Their access tokens are JWTs
   * (`typ: at+jwt`) with `aud` = the resource. The first one is the default
   * when a token request names no `resource`.
   */
  readonly resources: readonly string[];
  /** Resources whose access tokens are opaque (for RFC 7662 introspection). Default none. */
  readonly opaqueResources?: readonly string[];
  /** Access token lifetime in seconds, for every grant. Default 5. */
  readonly accessTokenTtlSeconds?: number;
  /** Scopes the server knows besides `openid` and `offline_access`. Default `['mcp:tools', 'mcp:admin']`. */
  readonly scopes?: readonly string[];
  /**
   * Confidential clients: `client_secret_basic` or `client_secret_post`, grants
   * client_credentials, authorization_code (PKCE S256, redirect URI
   * {@link TEST_REDIRECT_URI}) and refresh_token. `scope` limits the scopes the
   * client may ask for (default: all). Default: `client-a` and `client-b` with
   * random secrets.
   */
  readonly clients?: readonly { readonly clientId: string; readonly clientSecret: string; readonly scope?: string }[];
  /**
   * RFC 8693 token exchange at the token endpoint, for one more confidential
   * client (`client_secret_basic`, no other grant): a JWT access token this
   * server issued (`subject_token`, verified with its keys, `iss` and `exp`,
   * no skew) becomes a token for the one `resource` (or `audience`) asked,
   * with the same `sub`, no scope it lacked, and `act: {sub: clientId}`
   * (RFC 8693 section 4.1). A bad subject token is `invalid_grant`, an
   * unknown resource `invalid_target`. Default: no token exchange.
   */
  readonly tokenExchange?: { readonly clientId: string; readonly clientSecret: string };
  /** JWS algorithm of JWT access tokens. Default `RS256`. */
  readonly signingAlg?: 'RS256' | 'PS256' | 'ES256';
  /** Port on 127.0.0.1. Default 0 (any free one). */
  readonly port?: number;
  /**
   * How introspection names a token's type. `oidc-provider` (default): as it
   * does, `token_type: "Bearer"` for access tokens, and for refresh tokens
   * no `token_type` and no `aud`. `rfc8693`: as issuers that label tokens do,
   * `token_type` an RFC 8693 token type identifier
   * (`urn:ietf:params:oauth:token-type:access_token` or `…:refresh_token`),
   * and a refresh token's `aud` the resources it was granted for: the case
   * where only `token_type` tells a refresh token from an access token.
   */
  readonly introspectionTokenTypes?: 'oidc-provider' | 'rfc8693';
}

/** A token endpoint's success response, as sent. */
export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: string;
  readonly expires_in: number;
  /** Absent when the token carries no scope. */
  readonly scope?: string;
  readonly refresh_token?: string;
}

/** How a client authenticates at the token endpoint. */
export type ClientAuthMethod = 'client_secret_basic' | 'client_secret_post';

/** A real OAuth 2 authorization server (oidc-provider) in this process, on 127.0.0.1. */
export interface AuthorizationServer {
  /** `http://127.0.0.1:PORT`: exactly the `iss` of its tokens. */
  readonly issuer: string;
  readonly port: number;
  readonly jwksUri: string;
  readonly tokenEndpoint: string;
  readonly introspectionEndpoint: string;
  /** `issuer + /.well-known/openid-configuration`; the same document is served at `/.well-known/oauth-authorization-server` (RFC 8414). */
  readonly metadataUrl: string;
  readonly clients: readonly { readonly clientId: string; readonly clientSecret: string }[];
  /** client_credentials grant: the raw token response. Without `scope` the token carries none. */
  clientCredentials(clientId: string, options: { resource: string; scope?: string; authMethod?: ClientAuthMethod }): Promise<TokenResponse>;
  /**
   * A user's authorization-code grant with PKCE, done without a browser: the
   * login and consent interactions are finished for `accountId` (default
   * `user-1`, the token's `sub`). Asks for `offline_access`, so a refresh token
   * comes back.
   */
  authorizationCode(
    clientId: string,
    options: { resource: string; scope?: string; accountId?: string },
  ): Promise<TokenResponse & { readonly refresh_token: string }>;
  /** refresh_token grant: a new access token for the same subject. */
  refresh(clientId: string, refreshToken: string, options: { resource: string }): Promise<TokenResponse>;
  /** Token exchange requests (`tokenExchange`) that reached the grant, granted or refused. */
  tokenExchanges(): number;
  /** Allows one more resource indicator from now on (e.g. a gateway started after this server). */
  addResource(resource: string, options?: { opaque?: boolean }): void;
  /**
   * New tokens are signed with a new key (new `kid`); the JWKS lists it first
   * and keeps the old ones, so tokens already issued still verify. Issuer,
   * port, clients, grants and refresh tokens stay.
   */
  rotateSigningKey(): Promise<void>;
  /** The private signing JWKs, newest first (to forge tokens with the real key in negative tests). */
  signingKeys(): readonly JWK[];
  /** Requests received for `pathname` (e.g. `/jwks`, `/token/introspection`) since the server started. */
  requestCount(pathname: string): number;
  /** Stops listening and drops every connection: requests fail with connection refused. */
  stop(): Promise<void>;
  /** Listens again on the same port, with the same keys and state. */
  start(): Promise<void>;
  /** Stops for good. Idempotent. */
  close(): Promise<void>;
}

const DEFAULT_SCOPES = ['mcp:tools', 'mcp:admin'] as const;
const INTERACTION_PREFIX = '/interaction/';

/**
 * Starts a real oidc-provider in this process on 127.0.0.1 (`options.port`,
 * default any free port). Everything stays in memory: grants and refresh
 * tokens live in one memory adapter shared across key rotations.
 */
export async function startAuthorizationServer(options: AuthorizationServerOptions): Promise<AuthorizationServer> {
  const ttl = options.accessTokenTtlSeconds ?? 5;
  if (!Number.isInteger(ttl) || ttl < 1) throw new TypeError(`accessTokenTtlSeconds must be a positive integer, got ${ttl}`);
  const jwtResources = new Set<string>();
  const opaqueResources = new Set<string>();
  const addResource = (resource: string, opaque = false): void => {
    const url = URL.parse(resource);
    if (url === null || url.hash !== '' || resource.includes('#')) throw new TypeError(`resource must be an absolute URI without a fragment, got ${JSON.stringify(resource)}`);
    (opaque ? opaqueResources : jwtResources).add(resource);
    (opaque ? jwtResources : opaqueResources).delete(resource);
  };
  for (const resource of options.resources) addResource(resource);
  for (const resource of options.opaqueResources ?? []) addResource(resource, true);
  const defaultResource = [...jwtResources, ...opaqueResources][0];
  const scopes = [...(options.scopes ?? DEFAULT_SCOPES)];
  const clients = (options.clients ?? [{ clientId: 'client-a' }, { clientId: 'client-b' }]).map((c) => ({
    clientId: c.clientId,
    clientSecret: 'clientSecret' in c ? c.clientSecret : randomBytes(24).toString('base64url'),
    scope: ('scope' in c ? c.scope : undefined) ?? ['openid', 'offline_access', ...scopes].join(' '),
  }));
  const exchangeClient = options.tokenExchange;
  if (new Set([...clients.map((c) => c.clientId), ...(exchangeClient === undefined ? [] : [exchangeClient.clientId])]).size !== clients.length + (exchangeClient === undefined ? 0 : 1)) {
    throw new TypeError('clients: duplicate clientId');
  }
  const signingAlg = options.signingAlg ?? 'RS256';

  // Loaded here, not at the top: on Node 20, importing oidc-provider prints an
  // "Unsupported runtime" warning, which only files that use it should see.
  const [{ Provider: OidcProvider, errors }, { createMemoryAdapter }] = await Promise.all([
    import('oidc-provider'),
    import('oidc-provider/lib/adapters/memory_adapter.js'),
  ]);
  // Passing one adapter keeps state across `rotateSigningKey()`, which builds a
  // new Provider: the default adapter makes fresh storage per Provider.
  const adapter = createMemoryAdapter(0);
  const cookieKeys = [randomBytes(32).toString('base64url')];
  const keys: JWK[] = [await newSigningKey(signingAlg)];

  const server = createServer((req, res) => route(req, res));
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await listen(server, options.port ?? 0);
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('authorization server: no TCP address after listen');
  const port = address.port;
  const issuer = `http://${LOOPBACK}:${port}`;

  const resourceServerInfo = (resource: string) => {
    const format = jwtResources.has(resource) ? 'jwt' : opaqueResources.has(resource) ? 'opaque' : undefined;
    if (format === undefined) throw new errors.InvalidTarget(`unknown resource ${resource}`);
    return {
      audience: resource,
      scope: scopes.join(' '),
      accessTokenTTL: ttl,
      accessTokenFormat: format,
      ...(format === 'jwt' ? { jwt: { sign: { alg: signingAlg } } } : {}),
    };
  };
  let exchanges = 0;
  const exchange = createTokenExchangeGrant({ issuer, algorithm: signingAlg, keys: () => keys, resourceServerInfo, onRequest: () => void exchanges++ });

  const buildProvider = (): { provider: Provider; handle: (req: IncomingMessage, res: ServerResponse) => void } => {
    const provider = new OidcProvider(issuer, {
      adapter,
      clients: [
        ...clients.map((c) => ({
          client_id: c.clientId,
          client_secret: c.clientSecret,
          scope: c.scope,
          grant_types: ['client_credentials', 'authorization_code', 'refresh_token'],
          response_types: ['code'],
          redirect_uris: [TEST_REDIRECT_URI],
          token_endpoint_auth_method: 'client_secret_basic',
          id_token_signed_response_alg: signingAlg,
        })),
        ...(exchangeClient === undefined
          ? []
          : [{ client_id: exchangeClient.clientId, client_secret: exchangeClient.clientSecret, grant_types: [TOKEN_EXCHANGE_GRANT], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' }]),
      ],
      extraTokenClaims: (_ctx: unknown, token: object) => exchange.claimsOf(token),
      clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
      responseTypes: ['code'],
      // The default 15 s keeps expired opaque tokens active at introspection.
      clockTolerance: 0,
      clientDefaults: { id_token_signed_response_alg: signingAlg },
      jwks: { keys: structuredClone(keys) },
      cookies: { keys: cookieKeys },
      scopes: ['openid', 'offline_access', ...scopes],
      findAccount: (_ctx: unknown, sub: string) => ({ accountId: sub, claims: () => ({ sub }) }),
      pkce: { required: () => true },
      ttl: {
        AccessToken: ttl,
        ClientCredentials: ttl,
        AuthorizationCode: 60,
        IdToken: 3600,
        RefreshToken: 24 * 3600,
        Grant: 24 * 3600,
        Session: 24 * 3600,
        Interaction: 600,
      },
      clientBasedCORS: () => true,
      renderError: (ctx: { type: string; body: unknown }, out: Record<string, string>) => {
        ctx.type = 'json';
        ctx.body = out;
      },
      features: {
        devInteractions: { enabled: false },
        clientCredentials: { enabled: true },
        introspection: { enabled: true, allowedPolicy: () => true },
        resourceIndicators: {
          enabled: true,
          defaultResource: (_ctx: unknown, _client: unknown, oneOf?: string[]) => oneOf ?? defaultResource,
          useGrantedResource: () => true,
          getResourceServerInfo: (_ctx: unknown, resource: string) => resourceServerInfo(resource),
        },
      },
    });
    if (options.introspectionTokenTypes === 'rfc8693') provider.use(labelIntrospectedTokenTypes);
    // Errors the provider turns into 500s would otherwise leave no trace.
    provider.on('server_error', (_ctx, err) => console.error('authorization server: server_error', err));
    if (exchangeClient !== undefined) exchange.register(provider, errors);
    return { provider, handle: provider.callback() };
  };
  let current = buildProvider();

  const requestCounts = new Map<string, number>();
  function route(req: IncomingMessage, res: ServerResponse): void {
    // No keep-alive: a client's pooled socket would make the first request
    // after stop() fail with "other side closed" instead of ECONNREFUSED.
    res.setHeader('connection', 'close');
    const url = req.url ?? '/';
    const pathname = new URL(url, issuer).pathname;
    requestCounts.set(pathname, (requestCounts.get(pathname) ?? 0) + 1);
    if (url.startsWith(INTERACTION_PREFIX)) {
      finishInteraction(current.provider, req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`interaction failed: ${err instanceof Error ? err.message : String(err)}`);
      });
      return;
    }
    // RFC 8414's location of the same metadata; oidc-provider serves only the OIDC one.
    if (url === '/.well-known/oauth-authorization-server') req.url = '/.well-known/openid-configuration';
    current.handle(req, res);
  }

  const clientOf = (clientId: string) => {
    const client = clients.find((c) => c.clientId === clientId);
    if (client === undefined) throw new TypeError(`unknown client ${JSON.stringify(clientId)}; known: ${clients.map((c) => c.clientId).join(', ')}`);
    return client;
  };
  const tokenEndpoint = `${issuer}/token`;
  const tokenRequest = async (clientId: string, params: Record<string, string>, authMethod: ClientAuthMethod = 'client_secret_basic') => {
    const client = clientOf(clientId);
    const body = new URLSearchParams(params);
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
    if (authMethod === 'client_secret_post') {
      body.set('client_id', client.clientId);
      body.set('client_secret', client.clientSecret);
    } else {
      headers.authorization = basicAuth(client.clientId, client.clientSecret);
    }
    const res = await fetch(tokenEndpoint, { method: 'POST', headers, body });
    const text = await res.text();
    if (!res.ok) throw new OAuthRequestError('token', res.status, text);
    return JSON.parse(text) as TokenResponse;
  };

  let closed = false;
  return {
    issuer,
    port,
    jwksUri: `${issuer}/jwks`,
    tokenEndpoint,
    introspectionEndpoint: `${issuer}/token/introspection`,
    metadataUrl: `${issuer}/.well-known/openid-configuration`,
    clients: clients.map(({ clientId, clientSecret }) => ({ clientId, clientSecret })),
    clientCredentials: (clientId, { resource, scope, authMethod }) =>
      tokenRequest(clientId, { grant_type: 'client_credentials', resource, ...(scope === undefined ? {} : { scope }) }, authMethod),
    async authorizationCode(clientId, { resource, scope, accountId = DEFAULT_ACCOUNT }) {
      clientOf(clientId);
      return authorizationCodeFlow({ issuer, clientId, resource, scope, accountId, tokenRequest });
    },
    refresh: (clientId, refreshToken, { resource }) => tokenRequest(clientId, { grant_type: 'refresh_token', refresh_token: refreshToken, resource }),
    tokenExchanges: () => exchanges,
    addResource: (resource, { opaque = false } = {}) => addResource(resource, opaque),
    async rotateSigningKey() {
      keys.unshift(await newSigningKey(signingAlg));
      // oidc-provider fixes its keystore at construction, so the next Provider
      // takes over; the adapter, clients and cookie keys carry over. Requests
      // already inside the old one finish there.
      current = buildProvider();
    },
    signingKeys: () => structuredClone(keys),
    requestCount: (pathname) => requestCounts.get(pathname) ?? 0,
    stop: () => stopListening(server, sockets),
    async start() {
      if (closed) throw new Error('authorization server: start() after close()');
      if (!server.listening) await listen(server, port);
    },
    async close() {
      closed = true;
      await stopListening(server, sockets);
    },
  };
}

/** The introspection answer's token, as oidc-provider registers it on the context. */
interface IntrospectedToken {
  readonly resource?: string | readonly string[];
}

/**
 * Koa middleware (`introspectionTokenTypes: 'rfc8693'`): after oidc-provider
 * answered an introspection request for an active token, relabels its
 * `token_type` with the RFC 8693 identifier of the token's kind and gives a
 * refresh token the `aud` of its granted resources.
 */
async function labelIntrospectedTokenTypes(ctx: ProviderContext, next: () => Promise<void>): Promise<void> {
  await next();
  if (ctx.path !== '/token/introspection' || ctx.body === null || typeof ctx.body !== 'object') return;
  const body = ctx.body as Record<string, unknown>;
  if (body.active !== true) return;
  const entities = ctx.oidc?.entities ?? {};
  const refresh = entities.RefreshToken as IntrospectedToken | undefined;
  if (refresh !== undefined) {
    body.token_type = 'urn:ietf:params:oauth:token-type:refresh_token';
    if (refresh.resource !== undefined) body.aud = refresh.resource;
  } else if (entities.AccessToken !== undefined || entities.ClientCredentials !== undefined) {
    body.token_type = 'urn:ietf:params:oauth:token-type:access_token';
  }
}

/** Finishes whichever interaction (login, then consent) the provider asks for, as the `login_hint` account. */
async function finishInteraction(provider: Provider, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const details = await provider.interactionDetails(req, res);
  const { name, details: missing } = details.prompt;
  let result: Record<string, unknown>;
  if (name === 'login') {
    const hint = details.params.login_hint;
    result = { login: { accountId: typeof hint === 'string' && hint !== '' ? hint : DEFAULT_ACCOUNT } };
  } else if (name === 'consent') {
    const accountId = details.session?.accountId;
    const clientId = details.params.client_id;
    if (accountId === undefined || typeof clientId !== 'string') throw new Error('consent without a session or client_id');
    const grant = new provider.Grant({ accountId, clientId });
    if (missing.missingOIDCScope !== undefined) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    for (const [resource, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(resource, scopes.join(' '));
    result = { consent: { grantId: await grant.save() } };
  } else {
    throw new Error(`unexpected prompt ${name}`);
  }
  await provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
}
