import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { identityPrincipal } from '@tether/session-log';
import { getFreePort, startAuthorizationServer, startMcpUpstream } from '@tether/testing';
import type { AuthorizationServer, McpUpstream } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';
import { callTool, initialize, request } from './e2e/raw-client.js';
import { WHOAMI, whoamiServer } from './whoami-upstream.js';

/**
 * `--auth introspect` (RFC 7662, opaque tokens) and what the upstream is
 * told of the caller (`--upstream-auth forward|strip`), against a real
 * authorization server and an SDK upstream whose one tool reports the
 * headers it was called with.
 */
let as: AuthorizationServer;
let upstream: McpUpstream;
let opaqueResource: string;
let jwtResource: string;
const stacks: InProcessStack[] = [];

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });

async function gateway(args: string[]): Promise<string> {
  const stack = await startInProcessStack({ upstreamUrl: upstream.url, args });
  stacks.push(stack);
  return stack.urls[0]!;
}

async function whoami(url: string, token: string): Promise<{ authorization: string | null; principal: string | null; identity: string | null }> {
  const sessionId = await initialize(url, bearer(token));
  const res = await request(url, { method: 'POST', sessionId, body: callTool(1, WHOAMI, {}), headers: bearer(token) });
  for await (const m of res.messages) {
    const msg = JSON.parse(m.data || '{}') as { result?: { content: { text: string }[] } };
    if (msg.result !== undefined) return JSON.parse(msg.result.content[0]!.text);
  }
  throw new Error('no result');
}

beforeAll(async () => {
  opaqueResource = `http://127.0.0.1:${await getFreePort()}/mcp`;
  jwtResource = `http://127.0.0.1:${await getFreePort()}/mcp`;
  as = await startAuthorizationServer({ resources: [jwtResource], opaqueResources: [opaqueResource], accessTokenTtlSeconds: 30 });
  upstream = await startMcpUpstream({ createServer: whoamiServer });
});

afterAll(async () => {
  for (const s of stacks) await s.teardown();
  await upstream?.close();
  await as?.close();
});

describe('--auth introspect', () => {
  const introspectArgs = (): string[] => {
    const gw = as.clients.find((c) => c.clientId === 'client-a')!;
    return [
      '--auth', 'introspect', '--auth-issuer', as.issuer, '--auth-audience', opaqueResource, '--auth-introspection-url', as.introspectionEndpoint,
      '--auth-introspection-client-id', gw.clientId, '--auth-introspection-client-secret', gw.clientSecret,
      // Client-credentials answers name the client, not a subject (oidc-provider sends no sub for them).
      '--auth-principal-claim', 'client_id',
    ];
  };

  it('accepts an active opaque token, refuses an unknown one, and keeps serving from its cache while the issuer is down', async () => {
    const url = await gateway(introspectArgs());
    const token = (await as.clientCredentials('client-b', { resource: opaqueResource })).access_token;
    expect(token.split('.')).toHaveLength(1); // opaque, not a JWT
    const sessionId = await initialize(url, bearer(token));
    const unknown = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer('no-such-token-0123456789') }, body: '{}' });
    expect(unknown.status).toBe(401);
    expect(unknown.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token", error_description="the access token is not active/);

    await as.stop();
    try {
      // The answer for this token is cached (until its exp, at most 60 s): the issuer is not asked.
      const cached = await request(url, { method: 'POST', sessionId, body: callTool(2, WHOAMI, {}), headers: bearer(token) });
      expect(cached.status).toBe(200);
      cached.cancel();
      // A token never seen needs the issuer: 503, never 401.
      const fresh = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer('another-unseen-token-abcdef') }, body: '{}' });
      expect(fresh.status).toBe(503);
      expect(fresh.headers.get('retry-after')).not.toBeNull();
      expect(((await fresh.json()) as { error: { message: string } }).error.message).toMatch(/introspection endpoint could not be reached/);
    } finally {
      await as.start();
    }
  });

  it('a token for another resource is refused by its audience', async () => {
    const url = await gateway(introspectArgs());
    as.addResource('https://elsewhere.example/mcp', { opaque: true });
    const other = (await as.clientCredentials('client-b', { resource: 'https://elsewhere.example/mcp' })).access_token;
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...bearer(other) }, body: '{}' });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/not meant for this resource/);
  });
});

describe('--upstream-auth', () => {
  const jwtArgs = (extra: string[] = []): string[] => ['--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri, '--auth-audience', jwtResource, ...extra];

  it('forward (opt-in): the upstream gets the caller\'s Authorization unchanged and no Tether-Principal', async () => {
    const url = await gateway(jwtArgs(['--upstream-auth', 'forward']));
    const token = (await as.clientCredentials('client-a', { resource: jwtResource })).access_token;
    expect(await whoami(url, token)).toEqual({ authorization: `Bearer ${token}`, principal: null, identity: null });
  });

  it('strip (default): no Authorization upstream; the verified principal and identity instead, and a client cannot forge them', async () => {
    const url = await gateway(jwtArgs());
    const token = (await as.clientCredentials('client-a', { resource: jwtResource })).access_token;
    const sessionId = await initialize(url, bearer(token));
    const res = await request(url, { method: 'POST', sessionId, body: callTool(1, WHOAMI, {}), headers: { ...bearer(token), 'tether-principal': 'forged', 'tether-identity': 'forged' } });
    let seen: { authorization: string | null; principal: string | null; identity: string | null } | undefined;
    for await (const m of res.messages) {
      const msg = JSON.parse(m.data || '{}') as { result?: { content: { text: string }[] } };
      if (msg.result !== undefined) seen = JSON.parse(msg.result.content[0]!.text);
    }
    expect(seen?.authorization).toBeNull();
    expect(seen?.principal).toBe(identityPrincipal(as.issuer, 'client-a'));
    expect(JSON.parse(Buffer.from(seen!.identity!, 'base64url').toString('utf8'))).toEqual({ iss: as.issuer, sub: 'client-a', scope: '' });
  });
});
