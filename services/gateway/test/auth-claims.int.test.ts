import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from 'jose';
import type { JWTHeaderParameters, JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAuthorizationServer } from '@tether/testing';
import type { AuthorizationServer } from '@tether/testing';
import type { JwtAuth } from '../src/auth/auth-config.js';
import { createJwtVerifier } from '../src/auth/jwt.js';

/**
 * Claims and header checks of `--auth jwt` beyond signature, iss, aud and
 * exp: `iat` not in the future, and with `--auth-token-type at+jwt` the
 * RFC 9068 `typ`. Real tokens from the test kit's authorization server
 * (oidc-provider), and tokens re-signed with its real signing key where a
 * claim or header must be one it would not issue.
 */
const AUDIENCE = 'https://gw.example/mcp';
const SKEW_S = 30;
let as: AuthorizationServer;

beforeAll(async () => {
  as = await startAuthorizationServer({ resources: [AUDIENCE], accessTokenTtlSeconds: 300 });
});
afterAll(async () => {
  await as?.close();
});

const verifier = (tokenType: 'any' | 'at+jwt' = 'any') => {
  const config: JwtAuth = {
    mode: 'jwt', issuer: as.issuer, audiences: [AUDIENCE], resources: { '/mcp': AUDIENCE }, scopes: [], principalClaim: 'client_id', clockSkewMs: SKEW_S * 1000,
    authorizationServers: [as.issuer], upstreamAuth: {}, jwksUrl: as.jwksUri, algorithms: ['RS256'], tokenType,
  };
  return createJwtVerifier(config);
};

const realToken = async (): Promise<string> => (await as.clientCredentials('client-a', { resource: AUDIENCE })).access_token;

/** A real token's claims and header, changed, signed with the issuer's real key. */
async function resigned(change: { claims?: (c: JWTPayload) => JWTPayload; header?: (h: JWTHeaderParameters) => JWTHeaderParameters }): Promise<string> {
  const real = await realToken();
  const header = decodeProtectedHeader(real) as JWTHeaderParameters;
  const claims = decodeJwt(real);
  const key = await importJWK(as.signingKeys()[0]!, header.alg);
  return new SignJWT((change.claims ?? ((c) => c))({ ...claims })).setProtectedHeader((change.header ?? ((h) => h))({ ...header })).sign(key);
}

const nowS = (): number => Math.floor(Date.now() / 1000);

describe('iat', () => {
  it('a token issued beyond the clock skew in the future is refused: issued_in_future', async () => {
    const future = await resigned({ claims: (c) => ({ ...c, iat: nowS() + SKEW_S + 90, exp: nowS() + 3600 }) });
    await expect(verifier().verify(future)).rejects.toMatchObject({ code: 'invalid_token', reason: 'issued_in_future' });
  });

  it('within the skew, or in the past, it is accepted', async () => {
    const v = verifier();
    await expect(v.verify(await resigned({ claims: (c) => ({ ...c, iat: nowS() + SKEW_S - 10 }) }))).resolves.toMatchObject({ subject: 'client-a' });
    await expect(v.verify(await realToken())).resolves.toMatchObject({ subject: 'client-a' });
  });
});

describe('--auth-token-type', () => {
  it('oidc-provider\'s JWT access tokens carry typ at+jwt and pass at+jwt', async () => {
    const real = await realToken();
    expect(decodeProtectedHeader(real).typ).toBe('at+jwt');
    await expect(verifier('at+jwt').verify(real)).resolves.toMatchObject({ subject: 'client-a' });
    await expect(verifier('at+jwt').verify(await resigned({ header: (h) => ({ ...h, typ: 'application/at+jwt' }) }))).resolves.toMatchObject({ subject: 'client-a' });
  });

  it('at+jwt refuses another typ, or none: token_type', async () => {
    const v = verifier('at+jwt');
    const plain = await resigned({ header: (h) => ({ ...h, typ: 'JWT' }) });
    await expect(v.verify(plain)).rejects.toMatchObject({ code: 'invalid_token', reason: 'token_type' });
    const untyped = await resigned({ header: ({ typ: _typ, ...h }) => h });
    await expect(v.verify(untyped)).rejects.toMatchObject({ code: 'invalid_token', reason: 'token_type' });
    // The refusal names the rule, not the token's claims or header values.
    await expect(v.verify(plain)).rejects.toThrow(/typ header must be at\+jwt/);
  });

  it('any (default) accepts them', async () => {
    const v = verifier('any');
    await expect(v.verify(await resigned({ header: (h) => ({ ...h, typ: 'JWT' }) }))).resolves.toMatchObject({ subject: 'client-a' });
    await expect(v.verify(await resigned({ header: ({ typ: _typ, ...h }) => h }))).resolves.toMatchObject({ subject: 'client-a' });
  });
});
