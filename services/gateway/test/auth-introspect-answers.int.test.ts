import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startAuthorizationServer } from '@tether/testing';
import type { AuthorizationServer } from '@tether/testing';
import type { IntrospectionAuth } from '../src/auth/auth-config.js';
import { createIntrospectionVerifier, isAccessTokenType } from '../src/auth/introspection.js';
import type { IntrospectionCacheLimits } from '../src/auth/introspection.js';
import { newSigningKey, startJwksEndpoint } from './jwks-endpoint.js';
import type { JwksEndpoint } from './jwks-endpoint.js';

/**
 * What `--auth introspect` makes of the issuer's answers: only access
 * tokens (RFC 7662 token_type), refusals cached apart from active answers
 * and briefly, and an answer read within one deadline and a size limit.
 * Two real authorization servers (oidc-provider): one answering as it does
 * (token_type Bearer; a refresh token without token_type or aud), one
 * labelling token types the RFC 8693 way with a refresh token's aud, as
 * labelling issuers do. A misbehaving endpoint is a real local HTTP server.
 */
const RESOURCE = 'https://gw.example/mcp';
const INTROSPECTION = '/token/introspection';
let plain: AuthorizationServer;
let labelled: AuthorizationServer;
let broken: JwksEndpoint;

beforeAll(async () => {
  [plain, labelled, broken] = await Promise.all([
    startAuthorizationServer({ resources: [], opaqueResources: [RESOURCE], accessTokenTtlSeconds: 300 }),
    startAuthorizationServer({ resources: [], opaqueResources: [RESOURCE], accessTokenTtlSeconds: 300, introspectionTokenTypes: 'rfc8693' }),
    newSigningKey('unused').then((k) => startJwksEndpoint([k])),
  ]);
});
afterAll(async () => {
  await Promise.all([plain?.close(), labelled?.close(), broken?.close()]);
});
afterEach(() => {
  vi.useRealTimers();
});

function verifier(as: AuthorizationServer, limits?: IntrospectionCacheLimits, url = as.introspectionEndpoint) {
  const gw = as.clients[0]!;
  const config: IntrospectionAuth = {
    mode: 'introspect', issuer: as.issuer, audiences: [RESOURCE], resources: { '/mcp': RESOURCE }, scopes: [], principalClaim: 'sub', clockSkewMs: 0,
    authorizationServers: [as.issuer], upstreamAuth: {}, introspectionUrl: url, clientId: gw.clientId, clientSecret: gw.clientSecret, cacheMs: 60_000,
  };
  return createIntrospectionVerifier(config, limits);
}

const userTokens = (as: AuthorizationServer, accountId = 'alice') => as.authorizationCode('client-b', { resource: RESOURCE, accountId });
const refused = (reason: string) => ({ code: 'invalid_token', reason });

describe('token_type', () => {
  it('a refresh token the issuer labels refresh_token is refused, its access token accepted', async () => {
    const { access_token, refresh_token } = await userTokens(labelled);
    const v = verifier(labelled);
    await expect(v.verify(access_token)).resolves.toMatchObject({ subject: 'alice' });
    // The answer is active, for this issuer and this audience: only its token_type gives it away.
    await expect(v.verify(refresh_token)).rejects.toMatchObject(refused('token_type'));
  });

  it('oidc-provider as it answers: an access token (token_type Bearer) passes, a refresh token (no token_type, no aud) is refused by its audience', async () => {
    const { access_token, refresh_token } = await userTokens(plain);
    const v = verifier(plain);
    await expect(v.verify(access_token)).resolves.toMatchObject({ subject: 'alice' });
    await expect(v.verify(refresh_token)).rejects.toMatchObject(refused('audience'));
  });

  it.each([
    [undefined, true],
    ['access_token', true],
    ['urn:ietf:params:oauth:token-type:access_token', true],
    ['Bearer', true],
    ['bearer', true],
    ['refresh_token', false],
    ['urn:ietf:params:oauth:token-type:refresh_token', false],
    ['urn:ietf:params:oauth:token-type:id_token', false],
    ['DPoP', false],
    ['', false],
    [42, false],
  ])('token_type %j is an access token: %s', (tokenType, expected) => {
    expect(isAccessTokenType(tokenType)).toBe(expected);
  });
});

describe('refusals are cached apart', () => {
  it('a repeated junk token costs the issuer one call for 10 s, then one more', async () => {
    const t0 = Date.now();
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(t0);
    const v = verifier(plain);
    const before = plain.requestCount(INTROSPECTION);
    for (let i = 0; i < 5; i += 1) await expect(v.verify('junk-token-0123456789')).rejects.toMatchObject(refused('inactive'));
    expect(plain.requestCount(INTROSPECTION) - before).toBe(1);
    vi.setSystemTime(t0 + 9_000);
    await expect(v.verify('junk-token-0123456789')).rejects.toMatchObject(refused('inactive'));
    expect(plain.requestCount(INTROSPECTION) - before).toBe(1);
    // Past the refusal's 10 s (the active answers' 60 s would still hold it): asked again.
    vi.setSystemTime(t0 + 11_000);
    await expect(v.verify('junk-token-0123456789')).rejects.toMatchObject(refused('inactive'));
    expect(plain.requestCount(INTROSPECTION) - before).toBe(2);
  });

  it('a flood of junk tokens does not evict real users\' answers', async () => {
    const v = verifier(plain, { activeEntries: 3, refusalEntries: 10 });
    const users = await Promise.all(['u1', 'u2', 'u3'].map((u) => userTokens(plain, u)));
    for (const u of users) await v.verify(u.access_token);
    for (let i = 0; i < 40; i += 1) await expect(v.verify(`junk-${i}-0123456789`)).rejects.toMatchObject(refused('inactive'));
    const before = plain.requestCount(INTROSPECTION);
    const subjects = await Promise.all(users.map((u) => v.verify(u.access_token).then((id) => id.subject)));
    expect(subjects).toEqual(['u1', 'u2', 'u3']);
    expect(plain.requestCount(INTROSPECTION)).toBe(before);
  });
});

describe('the answer is read within bounds', () => {
  it('an oversized answer fails once 64 KiB are read: 503', async () => {
    broken.mode = 'oversized';
    const answer = verifier(plain, {}, broken.url).verify('some-token-0123456789');
    await expect(answer).rejects.toMatchObject({ code: 'issuer_unavailable' });
    await expect(answer).rejects.toThrow(/larger than 65536 bytes/);
  });

  it('an answer that trickles fails at the exchange\'s one deadline (5 s): 503', async () => {
    broken.mode = 'trickle';
    const answer = verifier(plain, {}, broken.url).verify('other-token-0123456789');
    await expect(answer).rejects.toMatchObject({ code: 'issuer_unavailable' });
    await expect(answer).rejects.toThrow(/timed out after 5000 ms/);
  }, 15_000);
});
