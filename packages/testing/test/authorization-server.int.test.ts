import { createServer } from 'node:http';
import { auth, discoverAuthorizationServerMetadata } from '@modelcontextprotocol/sdk/client/auth.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { createRemoteJWKSet, decodeProtectedHeader, importJWK, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { OAuthRequestError, startAuthorizationServer, type AuthorizationServer, type AuthorizationServerOptions } from '@tether/testing';

// A real oidc-provider per test, in this process on port 0; tokens are checked
// the way a resource server checks them: jose against the served JWKS, or the
// introspection endpoint. Nothing is mocked.

const RESOURCE = 'http://127.0.0.1:1/mcp';
const OPAQUE_RESOURCE = 'http://127.0.0.1:1/opaque';

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});
async function start(options: Partial<AuthorizationServerOptions> = {}): Promise<AuthorizationServer> {
  const as = await startAuthorizationServer({ resources: [RESOURCE], opaqueResources: [OPAQUE_RESOURCE], ...options });
  cleanups.push(() => as.close());
  return as;
}

/** What a resource server does with a JWT access token. `cooldownDuration: 0`: refetch the JWKS at once for an unknown kid. */
async function verify(as: AuthorizationServer, token: string, jwks = createRemoteJWKSet(new URL(as.jwksUri), { cooldownDuration: 0 })): Promise<JWTPayload> {
  const { payload, protectedHeader } = await jwtVerify(token, jwks, { issuer: as.issuer, audience: RESOURCE, typ: 'at+jwt', algorithms: ['RS256'] });
  expect(protectedHeader.kid).toEqual(expect.any(String));
  return payload;
}

async function introspect(as: AuthorizationServer, token: string, by = as.clients[1]!): Promise<Record<string, unknown>> {
  const res = await fetch(as.introspectionEndpoint, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${by.clientId}:${by.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Record<string, unknown>;
}

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

describe('authorization server', () => {
  it('issues client_credentials JWTs that verify against its JWKS, with either secret method', async () => {
    const as = await start();
    expect(as.issuer).toBe(`http://127.0.0.1:${as.port}`);
    for (const authMethod of ['client_secret_basic', 'client_secret_post'] as const) {
      const tokens = await as.clientCredentials('client-a', { resource: RESOURCE, scope: 'mcp:tools', authMethod });
      expect(tokens).toMatchObject({ token_type: 'Bearer', expires_in: 5, scope: 'mcp:tools' });
      const claims = await verify(as, tokens.access_token);
      expect(claims).toMatchObject({ iss: as.issuer, aud: RESOURCE, sub: 'client-a', client_id: 'client-a', scope: 'mcp:tools' });
      expect(claims.exp! - claims.iat!).toBe(5);
    }
    // No scope asked, none given.
    const bare = await as.clientCredentials('client-b', { resource: RESOURCE });
    const claims = await verify(as, bare.access_token);
    expect(claims).toMatchObject({ sub: 'client-b', client_id: 'client-b' });
    expect(claims).not.toHaveProperty('scope');
  });

  it('issues opaque tokens that introspect as active', async () => {
    const as = await start();
    const tokens = await as.clientCredentials('client-a', { resource: OPAQUE_RESOURCE, scope: 'mcp:tools' });
    expect(tokens.access_token.split('.')).toHaveLength(1);
    const info = await introspect(as, tokens.access_token);
    expect(info).toMatchObject({ active: true, client_id: 'client-a', iss: as.issuer, aud: OPAQUE_RESOURCE, scope: 'mcp:tools', token_type: 'Bearer' });
    // oidc-provider puts no `sub` on a client_credentials introspection (a JWT's sub is the client_id).
    expect(info).not.toHaveProperty('sub');
    expect(await introspect(as, 'not-a-token')).toEqual({ active: false });
  });

  it('runs a user authorization-code grant and refreshes it for the same subject', async () => {
    const as = await start();
    const first = await as.authorizationCode('client-b', { resource: RESOURCE, scope: 'mcp:tools', accountId: 'alice' });
    expect(first).toMatchObject({ token_type: 'Bearer', scope: 'mcp:tools', refresh_token: expect.any(String) });
    const refreshed = await as.refresh('client-b', first.refresh_token, { resource: RESOURCE });
    expect(refreshed.access_token).not.toBe(first.access_token);
    const [a, b] = [await verify(as, first.access_token), await verify(as, refreshed.access_token)];
    expect(a).toMatchObject({ iss: as.issuer, aud: RESOURCE, sub: 'alice', client_id: 'client-b', scope: 'mcp:tools' });
    expect(b).toMatchObject({ sub: 'alice', client_id: 'client-b', scope: 'mcp:tools' });
    expect(b.jti).not.toBe(a.jti);
    // Two users in parallel keep their subjects apart.
    const [x, y] = await Promise.all([
      as.authorizationCode('client-a', { resource: OPAQUE_RESOURCE, scope: 'mcp:admin', accountId: 'bob' }),
      as.authorizationCode('client-a', { resource: RESOURCE, accountId: 'carol' }),
    ]);
    expect(await introspect(as, x.access_token)).toMatchObject({ active: true, sub: 'bob', client_id: 'client-a', scope: 'mcp:admin' });
    expect(await verify(as, y.access_token)).toMatchObject({ sub: 'carol' });
  });

  it('rotates the signing key and keeps old tokens and grants valid', async () => {
    const as = await start();
    const jwks = createRemoteJWKSet(new URL(as.jwksUri), { cooldownDuration: 0 });
    const before = await as.authorizationCode('client-a', { resource: RESOURCE, scope: 'mcp:tools' });
    await verify(as, before.access_token, jwks);
    const oldKid = decodeProtectedHeader(before.access_token).kid;

    await as.rotateSigningKey();
    const after = await as.clientCredentials('client-a', { resource: RESOURCE });
    const newKid = decodeProtectedHeader(after.access_token).kid;
    expect(newKid).not.toBe(oldKid);
    expect(as.signingKeys().map((k) => k.kid)).toEqual([newKid, oldKid]);
    const served = (await (await fetch(as.jwksUri)).json()) as { keys: { kid: string; d?: string }[] };
    expect(served.keys.map((k) => k.kid)).toEqual([newKid, oldKid]);
    expect(served.keys.some((k) => k.d !== undefined)).toBe(false);
    // The same JWKS set picks the new kid up, and the old token still verifies.
    await verify(as, after.access_token, jwks);
    await verify(as, before.access_token, jwks);
    // A refresh token from before the rotation still works; its token has the new kid.
    const refreshed = await as.refresh('client-a', before.refresh_token, { resource: RESOURCE });
    expect(decodeProtectedHeader(refreshed.access_token).kid).toBe(newKid);
    expect(await verify(as, refreshed.access_token, jwks)).toMatchObject({ sub: 'user-1' });
  });

  it('stop() refuses connections and start() serves again on the same port with the same keys', async () => {
    const as = await start();
    const token = (await as.clientCredentials('client-a', { resource: RESOURCE })).access_token;
    expect((await fetch(as.jwksUri)).status).toBe(200);

    await as.stop();
    const refused = await fetch(as.jwksUri).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect((refused as { cause?: { code?: string } } | undefined)?.cause?.code).toBe('ECONNREFUSED');
    await expect(verify(as, token)).rejects.toThrow();
    await expect(as.clientCredentials('client-a', { resource: RESOURCE })).rejects.toThrow();

    await as.start();
    expect((await fetch(as.jwksUri)).status).toBe(200);
    await verify(as, token);
    await verify(as, (await as.clientCredentials('client-a', { resource: RESOURCE })).access_token);
  });

  it('lets tokens expire after the TTL, JWT and opaque alike', async () => {
    const as = await start({ accessTokenTtlSeconds: 2 });
    const jwt = await as.clientCredentials('client-a', { resource: RESOURCE });
    const opaque = await as.clientCredentials('client-a', { resource: OPAQUE_RESOURCE });
    expect(jwt.expires_in).toBe(2);
    await verify(as, jwt.access_token);
    expect(await introspect(as, opaque.access_token)).toMatchObject({ active: true });
    await sleep(3_000);
    await expect(verify(as, jwt.access_token)).rejects.toMatchObject({ code: 'ERR_JWT_EXPIRED' });
    expect(await introspect(as, opaque.access_token)).toEqual({ active: false });
  });

  it('refuses unknown resources and clients with clear errors', async () => {
    const as = await start();
    const err = await as.clientCredentials('client-a', { resource: 'http://127.0.0.1:1/other' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OAuthRequestError);
    expect(err).toMatchObject({ code: 'oauth_request_failed', status: 400, error: 'invalid_target' });
    as.addResource('http://127.0.0.1:1/other');
    expect(await as.clientCredentials('client-a', { resource: 'http://127.0.0.1:1/other' })).toMatchObject({ token_type: 'Bearer' });
    await expect(as.clientCredentials('nobody', { resource: RESOURCE })).rejects.toThrow(/unknown client "nobody"/);
  });

  it('is discovered by the official MCP SDK client, which gets a token with client_credentials', async () => {
    const as = await start();
    // Root issuer: the SDK tries /.well-known/oauth-authorization-server, then /.well-known/openid-configuration.
    const metadata = await discoverAuthorizationServerMetadata(as.issuer);
    expect(metadata).toMatchObject({ issuer: as.issuer, token_endpoint: as.tokenEndpoint });
    for (const path of ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration']) {
      expect(await (await fetch(`${as.issuer}${path}`)).json()).toMatchObject({ issuer: as.issuer, introspection_endpoint: as.introspectionEndpoint });
    }

    // A resource server that only publishes RFC 9728 metadata naming this issuer.
    const rs = createServer((req, res) => {
      if (req.url?.startsWith('/.well-known/oauth-protected-resource')) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ resource: rsResource, authorization_servers: [as.issuer], scopes_supported: ['mcp:tools'] }));
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((done) => rs.listen({ host: '127.0.0.1', port: 0 }, done));
    cleanups.push(() => new Promise<void>((done) => { rs.closeAllConnections(); rs.close(() => done()); }));
    const address = rs.address();
    if (address === null || typeof address === 'string') throw new Error('no address');
    const rsResource = `http://127.0.0.1:${address.port}/mcp`;
    as.addResource(rsResource);

    const client = as.clients[0]!;
    // The SDK sends `scope` only from its own option (it ignores the PRM's scopes_supported for this grant).
    const provider = new ClientCredentialsProvider({ clientId: client.clientId, clientSecret: client.clientSecret, expectedIssuer: as.issuer, scope: 'mcp:tools' });
    expect(await auth(provider, { serverUrl: rsResource })).toBe('AUTHORIZED');
    const tokens = provider.tokens();
    expect(tokens).toMatchObject({ token_type: 'Bearer', scope: 'mcp:tools' });
    const { payload } = await jwtVerify(tokens!.access_token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: rsResource });
    expect(payload).toMatchObject({ sub: client.clientId, client_id: client.clientId, aud: rsResource, scope: 'mcp:tools' });
  });

  it('signs with ES256 when asked', async () => {
    const as = await start({ signingAlg: 'ES256' });
    const tokens = await as.clientCredentials('client-a', { resource: RESOURCE });
    expect(decodeProtectedHeader(tokens.access_token)).toMatchObject({ alg: 'ES256', typ: 'at+jwt' });
    await jwtVerify(tokens.access_token, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: RESOURCE, algorithms: ['ES256'] });
  });
});

describe('token exchange (RFC 8693)', () => {
  const UPSTREAM = 'http://127.0.0.1:1/upstream';
  const EXCHANGER = { clientId: 'tether-gateway', clientSecret: 'exchange-secret' };
  const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

  /** The token request a gateway sends: client_secret_basic, one resource. */
  async function exchange(as: AuthorizationServer, subject: string, extra: Record<string, string> = {}, by = EXCHANGER): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(as.tokenEndpoint, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${by.clientId}:${by.clientSecret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: subject, subject_token_type: ACCESS_TOKEN, resource: UPSTREAM, ...extra }),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  it('exchanges a user\'s token for one meant for another resource: same sub, act names the client, no wider scope', async () => {
    const as = await start({ resources: [RESOURCE, UPSTREAM], tokenExchange: EXCHANGER });
    const user = await as.authorizationCode('client-b', { resource: RESOURCE, scope: 'mcp:tools', accountId: 'alice' });
    const { status, body } = await exchange(as, user.access_token);
    expect(status).toBe(200);
    expect(body).toMatchObject({ issued_token_type: ACCESS_TOKEN, token_type: 'Bearer', expires_in: 5, scope: 'mcp:tools' });
    const { payload, protectedHeader } = await jwtVerify(body.access_token as string, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: UPSTREAM, typ: 'at+jwt' });
    expect(protectedHeader.kid).toBe(as.signingKeys()[0]!.kid);
    expect(payload).toMatchObject({ sub: 'alice', aud: UPSTREAM, client_id: EXCHANGER.clientId, scope: 'mcp:tools', act: { sub: EXCHANGER.clientId } });
    // Down-scoping only.
    expect(await exchange(as, user.access_token, { scope: 'mcp:tools mcp:admin' })).toMatchObject({ status: 400, body: { error: 'invalid_scope' } });
    expect(as.tokenExchanges()).toBe(2);
  });

  it('refuses what it should, with the error codes the gateway maps', async () => {
    const as = await start({ resources: [RESOURCE, UPSTREAM], tokenExchange: EXCHANGER });
    const subject = (await as.clientCredentials('client-a', { resource: RESOURCE })).access_token;
    expect(await exchange(as, subject, { resource: 'http://127.0.0.1:1/unknown' })).toMatchObject({ status: 400, body: { error: 'invalid_target' } });
    const [head, payload] = subject.split('.');
    expect(await exchange(as, `${head}.${payload}.${'A'.repeat(342)}`)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    // Signed with the server's own key, but expired: no clock skew here.
    const key = as.signingKeys()[0]!;
    const expired = await new SignJWT({ client_id: 'client-a' })
      .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid! })
      .setIssuer(as.issuer).setAudience(RESOURCE).setSubject('client-a').setIssuedAt().setExpirationTime(Math.floor(Date.now() / 1000) - 1)
      .sign(await importJWK(key, 'RS256'));
    expect(await exchange(as, expired)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    expect(await exchange(as, subject, { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' })).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    // Only the exchange client may exchange, and only with its secret.
    expect(await exchange(as, subject, {}, as.clients[0]!)).toMatchObject({ status: 400, body: { error: 'invalid_request' } });
    expect(await exchange(as, subject, {}, { ...EXCHANGER, clientSecret: 'wrong' })).toMatchObject({ status: 401, body: { error: 'invalid_client' } });
    expect(as.tokenExchanges()).toBe(4);
  });
});
