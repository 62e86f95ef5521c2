import { ConfigError, duration, list, matching } from '@tether/config';

/**
 * How the gateway learns who a caller is (docs/design.md, "Identity").
 * - `none`: the digest of a header's raw value (default `Authorization`);
 *   the header is trusted as is.
 * - `jwt`: a Bearer JWT access token verified against the issuer's keys.
 * - `introspect`: an opaque Bearer token asked of the issuer (RFC 7662).
 */
export type AuthConfig = NoAuth | JwtAuth | IntrospectionAuth;

export const AuthMode = { none: 'none', jwt: 'jwt', introspect: 'introspect' } as const;
export type AuthMode = (typeof AuthMode)[keyof typeof AuthMode];

/**
 * What a route's upstream gets of the caller (docs/security.md, "No token
 * passthrough"): `strip` (the default) sends no `Authorization`, and the
 * verified principal in `Tether-Principal` and `Tether-Identity`; `forward`
 * sends the caller's `Authorization` unchanged, for an upstream that is the
 * same protected resource as its route and validates the token itself;
 * `exchange` sends a token the issuer minted for the upstream's own
 * resource in exchange for the caller's (RFC 8693), never the caller's.
 */
export const UpstreamAuth = { forward: 'forward', strip: 'strip', exchange: 'exchange' } as const;
export type UpstreamAuth = (typeof UpstreamAuth)[keyof typeof UpstreamAuth];

export interface NoAuth {
  readonly mode: 'none';
  /** Header whose raw value is the credential (lower case). */
  readonly identityHeader: string;
}

/** What both token modes share. */
interface TokenAuthBase {
  /** The token's `iss` must equal this exactly (introspection: when the answer names one). */
  readonly issuer: string;
  /**
   * Every route's resource URI (RFC 8707), in flag order: a token whose
   * `aud` names none of them is refused before anything else. Which route
   * it may be used on is `resources`' business.
   */
  readonly audiences: readonly string[];
  /**
   * Each route's canonical resource URI, by route path (`--auth-audience
   * URI` is the default route `/mcp`'s, `/path=URI` another's). A token is
   * accepted on a route only when its `aud` holds that route's URI: each
   * route is its own protected resource, and a token minted for one is
   * refused on every other (RFC 8707, the MCP spec's audience rule).
   */
  readonly resources: Readonly<Record<string, string>>;
  /** Scopes every request's token must carry. */
  readonly scopes: readonly string[];
  /** The claim that names the subject, digested with the issuer into the principal. Default `sub`. */
  readonly principalClaim: string;
  readonly clockSkewMs: number;
  /** Listed in the protected resource metadata (RFC 9728). Default: the issuer. */
  readonly authorizationServers: readonly string[];
  /** What each route's upstream gets, by route path; a route not named gets `strip`. */
  readonly upstreamAuth: Readonly<Record<string, UpstreamAuth>>;
  /** Present when some route's `upstreamAuth` is `exchange`. */
  readonly exchange?: TokenExchangeConfig;
}

/** RFC 8693 token exchange at the issuer, for the routes whose upstream gets a token of its own. */
export interface TokenExchangeConfig {
  /** The issuer's token endpoint. */
  readonly tokenEndpoint: string;
  /** The gateway's client at the token endpoint (`client_secret_basic`). */
  readonly clientId: string;
  readonly clientSecret: string;
  /**
   * Each exchange route's upstream resource URI (RFC 8707), by route path:
   * the `resource` asked for, so the exchanged token's `aud`. Never a
   * route's own `--auth-audience` URI (checked at startup).
   */
  readonly audiences: Readonly<Record<string, string>>;
}

/** The route a bare `--auth-audience URI` or `--upstream-auth MODE` applies to: the one `--upstream` serves. */
export const DEFAULT_ROUTE = '/mcp';

export interface JwtAuth extends TokenAuthBase {
  readonly mode: 'jwt';
  readonly jwksUrl: string;
  readonly algorithms: readonly string[];
  /** `at+jwt`: the JWS header's `typ` must be `at+jwt` (RFC 9068 section 4), so an ID token or another JWT of the issuer is no access token. Default `any`. */
  readonly tokenType: JwtTokenType;
}

export const JwtTokenType = { any: 'any', accessToken: 'at+jwt' } as const;
export type JwtTokenType = (typeof JwtTokenType)[keyof typeof JwtTokenType];

export interface IntrospectionAuth extends TokenAuthBase {
  readonly mode: 'introspect';
  readonly introspectionUrl: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Longest an introspection answer is reused (never past the token's `exp`). */
  readonly cacheMs: number;
}

/** Asymmetric signatures only: `none` and HMAC (whose key would be the issuer's public key) are never accepted. */
export const ALLOWED_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;
export const DEFAULT_ALGORITHMS = 'RS256,ES256,EdDSA';

/** The auth flags of FLAGS (config.ts), in help order. */
export const AUTH_FLAGS = [
  { flag: 'auth', env: 'TETHER_AUTH', help: 'how callers are identified: none (the --identity-header value, trusted as is), jwt (verify Bearer JWT access tokens), introspect (RFC 7662, opaque tokens)', fallback: 'none' },
  { flag: 'identity-header', env: 'TETHER_IDENTITY_HEADER', help: 'with --auth none: the request header whose value identifies the principal; the gateway TRUSTS it, so set it only behind a proxy that authenticates callers and sets it', fallback: 'authorization' },
  { flag: 'auth-issuer', env: 'TETHER_AUTH_ISSUER', help: 'jwt/introspect: the authorization server\'s issuer; a token\'s iss must equal it exactly', fallback: '' },
  { flag: 'auth-audience', env: 'TETHER_AUTH_AUDIENCE', help: 'jwt/introspect: each route\'s canonical resource URI (RFC 8707), one per route: URI for /mcp, /path=URI for another (repeat); a token is accepted on a route only if its aud holds that route\'s URI', fallback: '', repeat: true },
  { flag: 'auth-jwks-url', env: 'TETHER_AUTH_JWKS_URL', help: 'jwt: the issuer\'s JWKS URL (keys cached 10 min; an unknown kid refetches them, at most every 2 s)', fallback: '' },
  { flag: 'auth-algorithms', env: 'TETHER_AUTH_ALGORITHMS', help: `jwt: signature algorithms accepted (asymmetric only: ${ALLOWED_ALGORITHMS.join(', ')})`, fallback: DEFAULT_ALGORITHMS },
  { flag: 'auth-token-type', env: 'TETHER_AUTH_TOKEN_TYPE', help: 'jwt: any, or at+jwt to refuse JWTs whose typ header is not at+jwt or application/at+jwt (RFC 9068), such as ID tokens signed by the same issuer', fallback: 'any' },
  { flag: 'auth-clock-skew', env: 'TETHER_AUTH_CLOCK_SKEW', help: 'jwt/introspect: clock difference tolerated on exp and nbf (ms, or 30s)', fallback: '30s' },
  { flag: 'auth-scopes', env: 'TETHER_AUTH_SCOPES', help: 'jwt/introspect: scopes required on every request, comma separated (also listed as scopes_supported)', fallback: '' },
  { flag: 'auth-principal-claim', env: 'TETHER_AUTH_PRINCIPAL_CLAIM', help: 'jwt/introspect: the claim that identifies the principal with the issuer (sub; client_id for machine clients)', fallback: 'sub' },
  { flag: 'auth-authorization-server', env: 'TETHER_AUTH_AUTHORIZATION_SERVER', help: 'jwt/introspect: authorization server URL(s) in the protected resource metadata (default: --auth-issuer)', fallback: '' },
  { flag: 'auth-introspection-url', env: 'TETHER_AUTH_INTROSPECTION_URL', help: 'introspect: the RFC 7662 introspection endpoint', fallback: '' },
  { flag: 'auth-introspection-client-id', env: 'TETHER_AUTH_INTROSPECTION_CLIENT_ID', help: 'introspect: the gateway\'s client id at the introspection endpoint (HTTP Basic)', fallback: '' },
  { flag: 'auth-introspection-client-secret', env: 'TETHER_AUTH_INTROSPECTION_CLIENT_SECRET', help: 'introspect: the gateway\'s client secret (never printed)', fallback: '' },
  { flag: 'auth-introspection-cache', env: 'TETHER_AUTH_INTROSPECTION_CACHE', help: 'introspect: longest an answer is reused, never past the token\'s exp (ms, or 60s; 0 = ask every time)', fallback: '60s' },
  { flag: 'upstream-auth', env: 'TETHER_UPSTREAM_AUTH', help: 'jwt/introspect: what a route\'s upstream gets: strip (no Authorization; the verified principal in Tether-Principal and Tether-Identity), forward (the caller\'s token, for an upstream that is the same protected resource and validates it) or exchange (a token the issuer mints for --upstream-audience in exchange for the caller\'s, RFC 8693); MODE for /mcp, /path=MODE for another (repeat); a route not named: strip', fallback: '', repeat: true },
  { flag: 'upstream-audience', env: 'TETHER_UPSTREAM_AUDIENCE', help: 'each exchange route\'s upstream resource URI (RFC 8707), the audience of the token exchanged for it: URI for /mcp, /path=URI for another (repeat); never a route\'s --auth-audience', fallback: '', repeat: true },
  { flag: 'auth-token-endpoint', env: 'TETHER_AUTH_TOKEN_ENDPOINT', help: 'with --upstream-auth exchange: the issuer\'s token endpoint (RFC 8693 token exchange)', fallback: '' },
  { flag: 'auth-exchange-client-id', env: 'TETHER_AUTH_EXCHANGE_CLIENT_ID', help: 'with --upstream-auth exchange: the gateway\'s client id at the token endpoint (HTTP Basic)', fallback: '' },
  { flag: 'auth-exchange-client-secret', env: 'TETHER_AUTH_EXCHANGE_CLIENT_SECRET', help: 'with --upstream-auth exchange: the gateway\'s client secret (never printed)', fallback: '' },
] as const;

export const AUTH_SECRET_FLAGS = ['auth-introspection-client-secret', 'auth-exchange-client-secret'] as const;

type AuthFlag = (typeof AUTH_FLAGS)[number]['flag'];

/** Validates the auth flags together: every missing or conflicting one is named with what to give. */
export function parseAuthConfig(raw: (flag: AuthFlag) => string): AuthConfig {
  const mode = raw('auth');
  const identityHeader = raw('identity-header').toLowerCase();
  if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(identityHeader)) throw new ConfigError(`invalid --identity-header ${JSON.stringify(raw('identity-header'))}; allowed: an HTTP header name`);
  const tokenFlags = AUTH_FLAGS.map((f) => f.flag).filter((f) => f.startsWith('auth-') || f.startsWith('upstream-'));
  if (mode === AuthMode.none) {
    const stray = tokenFlags.filter((f) => raw(f) !== AUTH_FLAGS.find((s) => s.flag === f)!.fallback);
    if (stray.length > 0) throw new ConfigError(`--${stray[0]} needs --auth jwt or --auth introspect (--auth is none)`);
    return { mode, identityHeader };
  }
  if (mode !== AuthMode.jwt && mode !== AuthMode.introspect) throw new ConfigError(`invalid --auth ${JSON.stringify(mode)}; allowed: none, jwt or introspect`);
  if (identityHeader !== 'authorization') throw new ConfigError(`--identity-header applies only with --auth none: with --auth ${mode} the principal comes from the verified token`);
  const need = (flag: AuthFlag): string => {
    const value = raw(flag);
    if (value === '') throw new ConfigError(`--auth ${mode} needs --${flag}`);
    return value;
  };
  const issuer = need('auth-issuer');
  const resources = perRoute('auth-audience', need('auth-audience'), (value) => absoluteUrl('auth-audience', value));
  const upstreamAuthByRoute = perRoute('upstream-auth', raw('upstream-auth'), upstreamAuth);
  const exchange = exchangeConfig(raw, upstreamAuthByRoute, resources);
  const base: TokenAuthBase = {
    issuer,
    audiences: [...new Set(Object.values(resources))],
    resources,
    scopes: list(raw('auth-scopes'), ',').map((s) => matching('auth-scopes', s, /^[\x21\x23-\x5b\x5d-\x7e]+$/, 'scope tokens (RFC 6749: printable ASCII without spaces, quotes or backslashes)')),
    principalClaim: matching('auth-principal-claim', raw('auth-principal-claim'), /^[A-Za-z0-9_.:-]{1,64}$/, 'a claim name (letters, digits, _ . : -)'),
    clockSkewMs: duration('auth-clock-skew', raw('auth-clock-skew'), 0),
    authorizationServers: raw('auth-authorization-server') === '' ? [issuer] : list(raw('auth-authorization-server'), ',').map((a) => absoluteUrl('auth-authorization-server', a)),
    upstreamAuth: upstreamAuthByRoute,
    ...(exchange === undefined ? {} : { exchange }),
  };
  if (mode === AuthMode.jwt) {
    for (const flag of ['auth-introspection-url', 'auth-introspection-client-id', 'auth-introspection-client-secret'] as const) {
      if (raw(flag) !== '') throw new ConfigError(`--${flag} needs --auth introspect (--auth is jwt)`);
    }
    return { mode, ...base, jwksUrl: absoluteUrl('auth-jwks-url', need('auth-jwks-url')), algorithms: algorithms(raw('auth-algorithms')), tokenType: tokenType(raw('auth-token-type')) };
  }
  if (raw('auth-jwks-url') !== '') throw new ConfigError('--auth-jwks-url needs --auth jwt (--auth is introspect)');
  if (raw('auth-token-type') !== JwtTokenType.any) throw new ConfigError('--auth-token-type needs --auth jwt (--auth is introspect: the introspection answer\'s token_type is checked instead)');
  return {
    mode,
    ...base,
    introspectionUrl: absoluteUrl('auth-introspection-url', need('auth-introspection-url')),
    clientId: need('auth-introspection-client-id'),
    clientSecret: need('auth-introspection-client-secret'),
    cacheMs: duration('auth-introspection-cache', raw('auth-introspection-cache'), 0),
  };
}

function algorithms(text: string): string[] {
  const names = list(text, ',');
  if (names.length === 0) throw new ConfigError(`invalid --auth-algorithms ""; allowed: ${ALLOWED_ALGORITHMS.join(', ')}`);
  for (const name of names) {
    if (!(ALLOWED_ALGORITHMS as readonly string[]).includes(name)) {
      const why = name.toLowerCase() === 'none' ? ' (unsigned tokens are never accepted)' : name.startsWith('HS') ? ' (HMAC would make the public key a shared secret)' : '';
      throw new ConfigError(`invalid --auth-algorithms ${JSON.stringify(name)}${why}; allowed: ${ALLOWED_ALGORITHMS.join(', ')}`);
    }
  }
  return names;
}

function tokenType(value: string): JwtTokenType {
  if (value === JwtTokenType.any || value === JwtTokenType.accessToken) return value;
  throw new ConfigError(`invalid --auth-token-type ${JSON.stringify(value)}; allowed: any or at+jwt`);
}

function upstreamAuth(value: string): UpstreamAuth {
  if (value === UpstreamAuth.forward || value === UpstreamAuth.strip || value === UpstreamAuth.exchange) return value;
  throw new ConfigError(`invalid --upstream-auth ${JSON.stringify(value)}; allowed: strip, forward or exchange (MODE for /mcp, /path=MODE for another route)`);
}

const EXCHANGE_FLAGS = ['upstream-audience', 'auth-token-endpoint', 'auth-exchange-client-id', 'auth-exchange-client-secret'] as const;

/**
 * The token exchange flags, checked against the routes that exchange:
 * each exchange route names its upstream's resource URI and no other route
 * does; the endpoint and the client are given exactly when some route
 * exchanges.
 */
function exchangeConfig(raw: (flag: AuthFlag) => string, modes: Readonly<Record<string, UpstreamAuth>>, resources: Readonly<Record<string, string>>): TokenExchangeConfig | undefined {
  const routes = Object.keys(modes).filter((route) => modes[route] === UpstreamAuth.exchange);
  if (routes.length === 0) {
    const stray = EXCHANGE_FLAGS.find((flag) => raw(flag) !== '');
    if (stray !== undefined) throw new ConfigError(`--${stray} needs a route with --upstream-auth exchange (e.g. --upstream-auth /b=exchange)`);
    return undefined;
  }
  const audiences = perRoute('upstream-audience', raw('upstream-audience'), (value) => absoluteUrl('upstream-audience', value));
  for (const [route, audience] of Object.entries(audiences)) {
    if (modes[route] !== UpstreamAuth.exchange) {
      throw new ConfigError(`--upstream-audience names route ${route}, whose --upstream-auth is ${modes[route] ?? 'strip (the default)'}; it applies only to a route with --upstream-auth ${route === DEFAULT_ROUTE ? '' : `${route}=`}exchange`);
    }
    // A token minted for the upstream must be good at the upstream only: if
    // its audience were a route's, the upstream could replay it at the
    // gateway as the caller.
    const route2 = Object.keys(resources).find((r) => resources[r] === audience);
    if (route2 !== undefined) {
      throw new ConfigError(`--upstream-audience for route ${route} is route ${route2}'s --auth-audience ${audience}: the upstream could replay a token exchanged for it at the gateway; give the upstream's own resource URI`);
    }
  }
  const missing = routes.filter((route) => audiences[route] === undefined);
  if (missing.length > 0) {
    throw new ConfigError(`--upstream-auth exchange needs the upstream's resource URI for every exchange route: give ${missing.map((r) => `--upstream-audience ${r === DEFAULT_ROUTE ? '' : `${r}=`}https://upstream.example/mcp`).join(' ')}`);
  }
  const need = (flag: (typeof EXCHANGE_FLAGS)[number]): string => {
    if (raw(flag) === '') throw new ConfigError(`--upstream-auth exchange needs --${flag}`);
    return raw(flag);
  };
  return {
    tokenEndpoint: absoluteUrl('auth-token-endpoint', need('auth-token-endpoint')),
    clientId: need('auth-exchange-client-id'),
    clientSecret: need('auth-exchange-client-secret'),
    audiences,
  };
}

const ROUTE_PATH = /^\/[A-Za-z0-9._~/-]*$/;

/**
 * A repeated per-route flag: `VALUE` is the default route's (`/mcp`),
 * `/path=VALUE` another's. One value per route: a second for the same
 * route is refused, naming both, rather than one silently winning.
 */
function perRoute<T>(flag: string, text: string, parse: (value: string) => T): Record<string, T> {
  const out: Record<string, T> = {};
  for (const item of list(text, ',')) {
    const eq = item.startsWith('/') ? item.indexOf('=') : -1;
    const route = eq < 0 ? DEFAULT_ROUTE : item.slice(0, eq);
    if (eq >= 0 && (eq === 0 || !ROUTE_PATH.test(route))) throw new ConfigError(`invalid --${flag} ${JSON.stringify(item)}; allowed: VALUE for ${DEFAULT_ROUTE}, or /path=VALUE for another route`);
    const value = parse(eq < 0 ? item : item.slice(eq + 1));
    if (Object.hasOwn(out, route)) throw new ConfigError(`--${flag} gives route ${route} two values (${JSON.stringify(String(out[route]))} and ${JSON.stringify(String(value))}); give each route one (${DEFAULT_ROUTE} takes a bare VALUE, another route /path=VALUE)`);
    out[route] = value;
  }
  return out;
}

/**
 * Checks the per-route auth flags against the routes the gateway serves:
 * every route has exactly one resource URI, and no flag names a route
 * that does not exist (a typo would leave a route on a default nobody chose).
 */
export function checkRouteAuth(auth: AuthConfig, routePaths: readonly string[]): void {
  if (auth.mode === AuthMode.none) return;
  for (const [flag, byRoute] of [['auth-audience', auth.resources], ['upstream-auth', auth.upstreamAuth]] as const) {
    for (const route of Object.keys(byRoute)) {
      if (routePaths.includes(route)) continue;
      const how = route === DEFAULT_ROUTE ? ` (a bare value is the default route ${DEFAULT_ROUTE}'s, served only with --upstream; give /path=VALUE)` : '';
      throw new ConfigError(`--${flag} names route ${route}, which the gateway does not serve${how}; routes: ${routePaths.join(', ')}`);
    }
  }
  const missing = routePaths.filter((route) => auth.resources[route] === undefined);
  if (missing.length > 0) {
    throw new ConfigError(`--auth ${auth.mode} needs a resource URI for every route: give --auth-audience ${missing.map((r) => (r === DEFAULT_ROUTE ? 'https://host/mcp' : `${r}=https://host${r}`)).join(' --auth-audience ')} (each route is its own protected resource)`);
  }
}

function absoluteUrl(flag: string, value: string): string {
  try {
    const parsed = new URL(value);
    if ((parsed.protocol === 'http:' || parsed.protocol === 'https:') && parsed.hash === '') return value;
  } catch {
    // fall through to the error naming the value
  }
  throw new ConfigError(`invalid --${flag} ${JSON.stringify(value)}; allowed: an absolute http(s) URL without a fragment`);
}
