import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import type { CryptoKey, JWK } from 'jose';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import { createBearerGate, createJwtVerifier, createResourceMetadata, JwksUnavailableError } from '../src/auth.js';
import { parseConfig } from '../src/config.js';

// The example's bearer check in one process: tokens signed here with jose,
// their keys served by a tiny JWKS server on loopback. The gate is the SDK
// v1's requireBearerAuth, run on node:http.

const ISSUER = 'https://as.example.test';
const AUDIENCE = 'https://mcp.example.test/mcp';

interface Loopback {
  readonly url: string;
  close(): Promise<void>;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<Loopback> {
  const server: Server = createServer(handler);
  const sockets = new Set<Socket>();
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

let key: CryptoKey;
let jwk: JWK;
let jwks: Loopback;
let jwksStatus = 200;
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  const pair = await generateKeyPair('ES256');
  key = pair.privateKey;
  jwk = { ...(await exportJWK(pair.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwks = await listen((_req, res) => {
    res.writeHead(jwksStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] }));
  });
  closers.push(() => jwks.close());
});
afterAll(async () => {
  for (const close of closers.reverse()) await close();
});

interface TokenOptions {
  /** null: no `sub` claim. */
  sub?: string | null;
  iss?: string;
  aud?: string;
  scope?: string;
  clientId?: string;
  expiresIn?: number;
  kid?: string;
  signWith?: CryptoKey;
}

async function sign(options: TokenOptions = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ client_id: options.clientId ?? 'client-a', ...(options.scope === undefined ? {} : { scope: options.scope }) })
    .setProtectedHeader({ alg: 'ES256', kid: options.kid ?? 'k1', typ: 'at+jwt' })
    .setIssuer(options.iss ?? ISSUER)
    .setAudience(options.aud ?? AUDIENCE);
  if (options.sub !== null) jwt.setSubject(options.sub ?? 'alice');
  jwt
    .setIssuedAt(now)
    .setExpirationTime(now + (options.expiresIn ?? 300))
    .setJti(crypto.randomUUID());
  return jwt.sign(options.signWith ?? key);
}

const verifier = () => createJwtVerifier({ jwksUrl: `${jwks.url}/jwks`, issuer: ISSUER, audience: AUDIENCE });

describe('createJwtVerifier', () => {
  it('gives the SDK AuthInfo with the identity in extra: iss, sub, client_id', async () => {
    const token = await sign({ scope: 'mcp:tools mcp:read' });
    const info = await verifier().verifyAccessToken(token);
    expect(info).toMatchObject({ token, clientId: 'client-a', scopes: ['mcp:tools', 'mcp:read'], extra: { iss: ISSUER, sub: 'alice', client_id: 'client-a' } });
    expect(info.resource?.href).toBe(AUDIENCE);
    expect(info.expiresAt).toBeGreaterThan(Date.now() / 1000);
  });

  it('tolerates 30 s of clock difference on exp, not more', async () => {
    await expect(verifier().verifyAccessToken(await sign({ expiresIn: -10 }))).resolves.toMatchObject({ extra: { sub: 'alice' } });
    await expect(verifier().verifyAccessToken(await sign({ expiresIn: -60 }))).rejects.toThrow(/expired/);
  });

  it.each<[string, () => Promise<string>, RegExp]>([
    ['another issuer', () => sign({ iss: 'https://evil.example.test' }), /iss claim is invalid/],
    ['another audience', () => sign({ aud: 'https://other.example.test/mcp' }), /aud claim is invalid/],
    // Required by RFC 9068 §2.2; the client id in its place would make every user of a public client one principal.
    ['no sub', () => sign({ sub: null }), /sub claim is invalid/],
    ['an unknown key id', () => sign({ kid: 'k2' }), /key the issuer does not publish/],
    ['a forged signature', async () => sign({ signWith: (await generateKeyPair('ES256')).privateKey }), /signature does not verify/],
    ['HS256', () => new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setIssuer(ISSUER).setAudience(AUDIENCE).setSubject('alice').setExpirationTime('5m').sign(new TextEncoder().encode('x'.repeat(32))), /algorithm is not accepted/],
    ['not a JWT', async () => 'opaque-token-value', /not a well-formed signed JWT/],
  ])('refuses %s: InvalidTokenError, never quoting the token', async (_name, make, message) => {
    const token = await make();
    const err = await verifier().verifyAccessToken(token).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidTokenError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain(token);
  });

  it('keys that cannot be fetched are the issuer\'s failure (JwksUnavailableError), not the token\'s', async () => {
    const token = await sign();
    jwksStatus = 500;
    try {
      await expect(verifier().verifyAccessToken(token)).rejects.toBeInstanceOf(JwksUnavailableError);
    } finally {
      jwksStatus = 200;
    }
    const gone = await listen(() => undefined);
    await gone.close();
    const unreachable = createJwtVerifier({ jwksUrl: `${gone.url}/jwks`, issuer: ISSUER, audience: AUDIENCE });
    const err = await unreachable.verifyAccessToken(token).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(JwksUnavailableError);
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });
});

describe('createBearerGate (the SDK v1 requireBearerAuth on node:http)', () => {
  let url: string;
  let down: string;
  beforeAll(async () => {
    const serve = (gate: ReturnType<typeof createBearerGate>) => async (req: IncomingMessage & { auth?: AuthInfo }, res: ServerResponse) => {
      if (!(await gate(req, res))) return;
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ sub: req.auth?.extra?.['sub'] }));
    };
    const ok = await listen((req, res) => void serve(createBearerGate({ verifier: verifier(), requiredScopes: ['mcp:tools'], audience: AUDIENCE }))(req, res));
    const gone = await listen(() => undefined);
    await gone.close();
    const unreachable = createJwtVerifier({ jwksUrl: `${gone.url}/jwks`, issuer: ISSUER, audience: AUDIENCE });
    const failing = await listen((req, res) => void serve(createBearerGate({ verifier: unreachable, requiredScopes: [], audience: AUDIENCE }))(req, res));
    closers.push(ok.close, failing.close);
    url = `${ok.url}/mcp`;
    down = `${failing.url}/mcp`;
  });

  const call = (target: string, token?: string): Promise<Response> => fetch(target, { method: 'POST', headers: token === undefined ? {} : { authorization: `Bearer ${token}` }, body: '{}' });

  it('a valid token passes with req.auth set', async () => {
    const res = await call(url, await sign({ scope: 'mcp:tools' }));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ sub: 'alice' });
  });

  it('no token: 401 invalid_token, WWW-Authenticate naming the RFC 9728 metadata URL', async () => {
    const res = await call(url);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(
      'Bearer error="invalid_token", error_description="Missing Authorization header", scope="mcp:tools", resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"',
    );
    expect(await res.json()).toEqual({ error: 'invalid_token', error_description: 'Missing Authorization header' });
  });

  it('a token without the required scope: 403 insufficient_scope', async () => {
    const res = await call(url, await sign({ scope: 'other' }));
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer error="insufficient_scope"/);
  });

  it('keys that cannot be fetched: 503 with Retry-After, not 401 (the token may be fine) and not 500', async () => {
    const res = await call(down, await sign());
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('2');
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(await res.json()).toMatchObject({ error: 'temporarily_unavailable' });
  });
});

describe('createResourceMetadata', () => {
  it('serves RFC 9728 metadata at the resource\'s well-known path and the bare prefix', async () => {
    const metadata = createResourceMetadata({ audience: AUDIENCE, authorizationServer: ISSUER, scopes: ['mcp:tools'] });
    expect([...metadata.paths]).toEqual(['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']);
    const server = await listen((req, res) => metadata.serve(req, res));
    closers.push(server.close);
    const res = await fetch(`${server.url}/.well-known/oauth-protected-resource/mcp`);
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(await res.json()).toEqual({
      resource: AUDIENCE,
      authorization_servers: [ISSUER],
      scopes_supported: ['mcp:tools'],
      bearer_methods_supported: ['header'],
      resource_name: 'tether-sdk-example',
    });
    expect((await fetch(server.url, { method: 'POST' })).status).toBe(405);
  });
});

describe('--auth flags', () => {
  const parse = (...argv: string[]) => parseConfig(argv, {}, () => '{}');
  const jwt = ['--auth', 'jwt', '--auth-jwks-url', 'https://as.example.test/jwks', '--auth-issuer', ISSUER, '--auth-audience', AUDIENCE];

  it('default none; jwt with its three flags; the authorization server defaults to the issuer', () => {
    expect(parse().auth).toEqual({ mode: 'none' });
    expect(parse(...jwt, '--auth-scopes', 'mcp:tools,mcp:read').auth).toEqual({
      mode: 'jwt',
      jwksUrl: 'https://as.example.test/jwks',
      issuer: ISSUER,
      audience: AUDIENCE,
      scopes: ['mcp:tools', 'mcp:read'],
      authorizationServer: ISSUER,
    });
    expect(parse(...jwt, '--auth-authorization-server', 'https://login.example.test').auth).toMatchObject({ authorizationServer: 'https://login.example.test' });
  });

  it.each<[string[], RegExp]>([
    [['--auth', 'jwt'], /^--auth jwt needs --auth-jwks-url and --auth-issuer and --auth-audience$/],
    [['--auth', 'jwt', '--auth-jwks-url', 'https://as.example.test/jwks', '--auth-issuer', ISSUER], /^--auth jwt needs --auth-audience$/],
    [['--auth', 'oauth'], /invalid --auth "oauth"; allowed: none or jwt/],
    [['--auth-issuer', ISSUER], /--auth-issuer needs --auth jwt \(--auth is none\)/],
    [[...jwt.slice(0, 6), '--auth-audience', 'https://mcp.example.test/mcp#x'], /invalid --auth-audience .*without a fragment/],
    [[...jwt.slice(0, 2), '--auth-jwks-url', 'file:///jwks', ...jwt.slice(4)], /invalid --auth-jwks-url "file:\/\/\/jwks"/],
    [[...jwt, '--auth-scopes', 'a b'], /invalid --auth-scopes "a b"/],
  ])('%j: a ConfigError naming the flag', (argv, message) => {
    expect(() => parse(...argv)).toThrow(message);
  });
});
