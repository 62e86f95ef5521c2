import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, parseConfig, printableConfig } from '@tether/gateway';

const UP = ['--upstream', 'http://a/mcp'];
const JWT = ['--auth', 'jwt', '--auth-issuer', 'https://idp.example', '--auth-audience', 'https://gw.example/mcp', '--auth-jwks-url', 'https://idp.example/jwks'];
const INTROSPECT = [
  '--auth', 'introspect', '--auth-issuer', 'https://idp.example', '--auth-audience', 'https://gw.example/mcp',
  '--auth-introspection-url', 'https://idp.example/introspect', '--auth-introspection-client-id', 'gw', '--auth-introspection-client-secret', 's3cret-value',
];

describe('gateway auth config', () => {
  it('defaults to none: the Authorization header, trusted as is', () => {
    expect(parseConfig(UP, {}).auth).toEqual({ mode: 'none', identityHeader: 'authorization' });
    expect(parseConfig([...UP, '--identity-header', 'X-User'], {}).auth).toEqual({ mode: 'none', identityHeader: 'x-user' });
  });

  it('parses jwt with its defaults', () => {
    expect(parseConfig([...UP, ...JWT], {}).auth).toEqual({
      mode: 'jwt',
      issuer: 'https://idp.example',
      audiences: ['https://gw.example/mcp'],
      resources: { '/mcp': 'https://gw.example/mcp' },
      scopes: [],
      principalClaim: 'sub',
      clockSkewMs: 30_000,
      authorizationServers: ['https://idp.example'],
      upstreamAuth: {},
      jwksUrl: 'https://idp.example/jwks',
      algorithms: ['RS256', 'ES256', 'EdDSA'],
      tokenType: 'any',
    });
  });

  it('parses introspect from the environment, and --print-config masks its secret', () => {
    const config = parseConfig([...UP, '--route', '/b=http://b/mcp'], {
      TETHER_AUTH: 'introspect',
      TETHER_AUTH_ISSUER: 'https://idp.example',
      TETHER_AUTH_AUDIENCE: 'https://gw.example/mcp,/b=https://gw2.example/b',
      TETHER_AUTH_INTROSPECTION_URL: 'https://idp.example/introspect',
      TETHER_AUTH_INTROSPECTION_CLIENT_ID: 'gw',
      TETHER_AUTH_INTROSPECTION_CLIENT_SECRET: 's3cret-value',
      TETHER_AUTH_INTROSPECTION_CACHE: '10s',
      TETHER_AUTH_SCOPES: 'mcp:tools,mcp:read',
      TETHER_UPSTREAM_AUTH: '/b=forward',
    });
    expect(config.auth).toMatchObject({
      mode: 'introspect',
      audiences: ['https://gw.example/mcp', 'https://gw2.example/b'],
      resources: { '/mcp': 'https://gw.example/mcp', '/b': 'https://gw2.example/b' },
      cacheMs: 10_000,
      scopes: ['mcp:tools', 'mcp:read'],
      upstreamAuth: { '/b': 'forward' },
    });
    const printed = printableConfig(config);
    expect(printed).not.toContain('s3cret-value');
    expect(printed).toContain('"clientSecret": "***"');
  });

  it.each([
    [['--auth', 'oauth'], /invalid --auth "oauth"; allowed: none, jwt or introspect/],
    [['--auth', 'jwt'], /--auth jwt needs --auth-issuer/],
    [['--auth', 'jwt', '--auth-issuer', 'https://i'], /--auth jwt needs --auth-audience/],
    [['--auth', 'jwt', '--auth-issuer', 'https://i', '--auth-audience', 'https://gw/mcp'], /--auth jwt needs --auth-jwks-url/],
    [[...JWT, '--auth-audience', 'gw.example'], /invalid --auth-audience "gw.example"; allowed: an absolute http\(s\) URL/],
    [[...JWT, '--auth-algorithms', 'RS256,none'], /invalid --auth-algorithms "none" \(unsigned tokens are never accepted\)/],
    [[...JWT, '--auth-algorithms', 'HS256'], /invalid --auth-algorithms "HS256" \(HMAC would make the public key a shared secret\)/],
    [[...JWT, '--auth-clock-skew', 'a while'], /invalid --auth-clock-skew "a while"/],
    [[...JWT, '--auth-scopes', 'a"b'], /invalid --auth-scopes "a\\"b"/],
    [[...JWT, '--auth-principal-claim', 'a b'], /invalid --auth-principal-claim "a b"/],
    [[...JWT, '--upstream-auth', 'drop'], /invalid --upstream-auth "drop"; allowed: strip, forward or exchange/],
    [[...JWT, '--identity-header', 'x-user'], /--identity-header applies only with --auth none/],
    [[...JWT, '--auth-introspection-url', 'https://i/x'], /--auth-introspection-url needs --auth introspect \(--auth is jwt\)/],
    [[...INTROSPECT, '--auth-jwks-url', 'https://i/jwks'], /--auth-jwks-url needs --auth jwt \(--auth is introspect\)/],
    [[...INTROSPECT.slice(0, -2)], /--auth introspect needs --auth-introspection-client-secret/],
    [['--auth-jwks-url', 'https://i/jwks'], /--auth-jwks-url needs --auth jwt or --auth introspect \(--auth is none\)/],
    [['--upstream-auth', 'forward'], /--upstream-auth needs --auth jwt or --auth introspect/],
    // Each route its own protected resource: exactly one URI per route, and only routes that exist.
    [[...JWT, '--auth-audience', 'https://gw.example/other'], /--auth-audience gives route \/mcp two values \("https:\/\/gw.example\/mcp" and "https:\/\/gw.example\/other"\)/],
    [[...JWT, '--route', '/b=http://b/mcp'], /--auth jwt needs a resource URI for every route: give --auth-audience \/b=https:\/\/host\/b/],
    [[...JWT, '--auth-audience', '/c=https://gw.example/c'], /--auth-audience names route \/c, which the gateway does not serve; routes: \/mcp/],
    [[...JWT, '--upstream-auth', '/c=forward'], /--upstream-auth names route \/c, which the gateway does not serve/],
    [[...JWT, '--upstream-auth', 'forward', '--upstream-auth', 'strip'], /--upstream-auth gives route \/mcp two values/],
    [[...JWT, '--upstream-auth', '/mcp=swap'], /invalid --upstream-auth "swap"; allowed: strip, forward or exchange/],
    [[...JWT, '--auth-audience', '/=https://gw.example/x'], /--auth-audience names route \/, which the gateway does not serve/],
  ])('refuses %j naming the flag and what is allowed', (argv, message) => {
    expect(() => parseConfig([...UP, ...argv], {})).toThrow(ConfigError);
    expect(() => parseConfig([...UP, ...argv], {})).toThrow(message);
  });

  describe('--upstream-auth exchange (RFC 8693)', () => {
    const ROUTES = ['--route', '/b=http://b/mcp', '--auth-audience', '/b=https://gw.example/b'];
    const EXCHANGE = [
      ...ROUTES, '--upstream-auth', '/b=exchange', '--upstream-audience', '/b=https://b.internal/mcp',
      '--auth-token-endpoint', 'https://idp.example/token', '--auth-exchange-client-id', 'gw', '--auth-exchange-client-secret', 'x-s3cret-value',
    ];
    const without = (flag: string): string[] => {
      const at = EXCHANGE.indexOf(flag);
      return [...EXCHANGE.slice(0, at), ...EXCHANGE.slice(at + 2)];
    };

    it('parses the exchange per route, and --print-config masks its secret', () => {
      const config = parseConfig([...UP, ...JWT, ...EXCHANGE], {});
      expect(config.auth).toMatchObject({
        upstreamAuth: { '/b': 'exchange' },
        exchange: { tokenEndpoint: 'https://idp.example/token', clientId: 'gw', clientSecret: 'x-s3cret-value', audiences: { '/b': 'https://b.internal/mcp' } },
      });
      const printed = printableConfig(config);
      expect(printed).not.toContain('x-s3cret-value');
      expect(printed).toContain('"clientSecret": "***"');
      // The default route takes a bare URI; without an exchange route there is no exchange.
      const bare = parseConfig([...UP, ...JWT, '--upstream-auth', 'exchange', '--upstream-audience', 'https://a.internal/mcp', ...EXCHANGE.slice(-6)], {});
      expect(bare.auth).toMatchObject({ exchange: { audiences: { '/mcp': 'https://a.internal/mcp' } } });
      expect(parseConfig([...UP, ...JWT], {}).auth).not.toHaveProperty('exchange');
    });

    it.each([
      [without('--upstream-audience'), /--upstream-auth exchange needs the upstream's resource URI for every exchange route: give --upstream-audience \/b=https:\/\/upstream.example\/mcp/],
      [without('--auth-token-endpoint'), /--upstream-auth exchange needs --auth-token-endpoint/],
      [without('--auth-exchange-client-id'), /--upstream-auth exchange needs --auth-exchange-client-id/],
      [without('--auth-exchange-client-secret'), /--upstream-auth exchange needs --auth-exchange-client-secret/],
      [[...EXCHANGE, '--upstream-audience', 'https://a.internal/mcp'], /--upstream-audience names route \/mcp, whose --upstream-auth is strip \(the default\); it applies only to a route with --upstream-auth exchange/],
      [[...EXCHANGE, '--upstream-auth', 'forward', '--upstream-audience', 'https://a.internal/mcp'], /--upstream-audience names route \/mcp, whose --upstream-auth is forward/],
      [[...without('--upstream-audience'), '--upstream-audience', '/b=https://gw.example/mcp'], /--upstream-audience for route \/b is route \/mcp's --auth-audience https:\/\/gw.example\/mcp: the upstream could replay/],
      [[...without('--upstream-audience'), '--upstream-audience', '/b=b.internal'], /invalid --upstream-audience "b.internal"; allowed: an absolute http\(s\) URL/],
      [[...without('--auth-token-endpoint'), '--auth-token-endpoint', 'idp/token'], /invalid --auth-token-endpoint "idp\/token"/],
      [[...ROUTES, '--auth-token-endpoint', 'https://idp.example/token'], /--auth-token-endpoint needs a route with --upstream-auth exchange/],
      [[...ROUTES, '--upstream-audience', '/b=https://b.internal/mcp'], /--upstream-audience needs a route with --upstream-auth exchange/],
      [[...EXCHANGE, '--upstream-auth', '/c=exchange', '--upstream-audience', '/c=https://c.internal/mcp'], /--upstream-auth names route \/c, which the gateway does not serve/],
    ])('refuses %j naming the flag and what to give', (argv, message) => {
      expect(() => parseConfig([...UP, ...JWT, ...argv], {})).toThrow(ConfigError);
      expect(() => parseConfig([...UP, ...JWT, ...argv], {})).toThrow(message);
    });

    it('needs --auth jwt or introspect, and a refused config never echoes the secret', () => {
      expect(() => parseConfig([...UP, '--auth-exchange-client-secret', 'x-s3cret-value'], {})).toThrow(/--auth-exchange-client-secret needs --auth jwt or --auth introspect/);
      expect(() => parseConfig([...UP, '--upstream-audience', 'https://a.internal/mcp'], {})).toThrow(/--upstream-audience needs --auth jwt or --auth introspect/);
      let message = '';
      try {
        parseConfig([...UP, ...JWT, ...without('--auth-token-endpoint'), '--auth-token-endpoint', 'bad'], {});
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toMatch(/--auth-token-endpoint/);
      expect(message).not.toContain('x-s3cret-value');
    });
  });

  it('a refused secret is never echoed', () => {
    let message = '';
    try {
      parseConfig([...UP, ...INTROSPECT, '--auth-introspection-cache', 'x'], {});
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/invalid --auth-introspection-cache "x"/);
    expect(message).not.toContain('s3cret-value');
  });

  it('--help says the identity header is trusted', () => {
    expect(helpText()).toMatch(/--identity-header[^\n]*TRUSTS it/);
    expect(helpText()).toContain('--auth-jwks-url');
    expect(helpText()).toContain('TETHER_UPSTREAM_AUTH');
  });
});
