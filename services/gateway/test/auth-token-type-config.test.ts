import { describe, expect, it } from 'vitest';
import { ConfigError, helpText, parseConfig } from '@tether/gateway';

/** `--auth-token-type` (`TETHER_AUTH_TOKEN_TYPE`): `any` (default) or `at+jwt` (RFC 9068 `typ`), with `--auth jwt` only. */
const UP = ['--upstream', 'http://a/mcp'];
const JWT = ['--auth', 'jwt', '--auth-issuer', 'https://idp.example', '--auth-audience', 'https://gw.example/mcp', '--auth-jwks-url', 'https://idp.example/jwks'];
const INTROSPECT = [
  '--auth', 'introspect', '--auth-issuer', 'https://idp.example', '--auth-audience', 'https://gw.example/mcp',
  '--auth-introspection-url', 'https://idp.example/introspect', '--auth-introspection-client-id', 'gw', '--auth-introspection-client-secret', 's3cret-value',
];

describe('--auth-token-type', () => {
  it('defaults to any, takes at+jwt from the flag or the environment', () => {
    expect(parseConfig([...UP, ...JWT], {}).auth).toMatchObject({ mode: 'jwt', tokenType: 'any' });
    expect(parseConfig([...UP, ...JWT, '--auth-token-type', 'at+jwt'], {}).auth).toMatchObject({ tokenType: 'at+jwt' });
    expect(parseConfig([...UP, ...JWT], { TETHER_AUTH_TOKEN_TYPE: 'at+jwt' }).auth).toMatchObject({ tokenType: 'at+jwt' });
    expect(parseConfig([...UP, ...JWT, '--auth-token-type', 'any'], { TETHER_AUTH_TOKEN_TYPE: 'at+jwt' }).auth).toMatchObject({ tokenType: 'any' });
  });

  it('introspection answers carry no typ: none of it on an introspect config', () => {
    expect(parseConfig([...UP, ...INTROSPECT], {}).auth).not.toHaveProperty('tokenType');
  });

  it.each([
    [[...JWT, '--auth-token-type', 'jwt'], /invalid --auth-token-type "jwt"; allowed: any or at\+jwt/],
    [[...JWT, '--auth-token-type', 'application/at+jwt'], /invalid --auth-token-type "application\/at\+jwt"; allowed: any or at\+jwt/],
    [[...INTROSPECT, '--auth-token-type', 'at+jwt'], /--auth-token-type needs --auth jwt \(--auth is introspect/],
    [['--auth-token-type', 'at+jwt'], /--auth-token-type needs --auth jwt or --auth introspect \(--auth is none\)/],
  ])('refuses %j naming the flag and what is allowed', (argv, message) => {
    expect(() => parseConfig([...UP, ...argv], {})).toThrow(ConfigError);
    expect(() => parseConfig([...UP, ...argv], {})).toThrow(message);
  });

  it('--help lists it with its variable and values', () => {
    expect(helpText()).toMatch(/--auth-token-type[^\n]*at\+jwt/);
    expect(helpText()).toContain('TETHER_AUTH_TOKEN_TYPE');
  });
});
