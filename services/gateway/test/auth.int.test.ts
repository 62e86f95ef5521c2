import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { decodeJwt, decodeProtectedHeader, importJWK, SignJWT } from 'jose';
import type { JWTHeaderParameters } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getFreePort, startAuthorizationServer, startRoundRobinProxy, UpstreamTools } from '@tether/testing';
import type { AuthorizationServer, RoundRobinProxy } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';
import { callTool, initialize, request } from './e2e/raw-client.js';

/**
 * Issue 22 with a real authorization server (oidc-provider in the test kit):
 * two gateways on `--auth jwt` behind a balancer that sends every request to
 * the other one; tokens that expire in 3 s.
 */
const TTL_S = 3;
let as: AuthorizationServer;
let stack: InProcessStack;
let proxy: RoundRobinProxy;
let audience: string;
let otherResource: string;

const jwtArgs = (extra: string[] = []): string[] => [
  '--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri, '--auth-audience', audience, '--auth-clock-skew', '0', ...extra,
];
const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const tokenOf = async (clientId: string, resource = audience, scope?: string): Promise<string> =>
  (await as.clientCredentials(clientId, { resource, ...(scope === undefined ? {} : { scope }) })).access_token;

beforeAll(async () => {
  const proxyPort = await getFreePort();
  audience = `http://127.0.0.1:${proxyPort}/mcp`;
  otherResource = 'https://other.example/mcp';
  as = await startAuthorizationServer({ resources: [audience, otherResource], accessTokenTtlSeconds: TTL_S });
  stack = await startInProcessStack({ gateways: 2, args: jwtArgs() });
  proxy = await startRoundRobinProxy(stack.urls.map((u) => u.replace(/\/mcp$/, '')), { port: proxyPort });
});

afterAll(async () => {
  await proxy?.close();
  await stack?.teardown();
  await as?.close();
});

/** The progress numbers and the final result of a stream_progress call's SSE messages. */
async function readProgress(stream: Awaited<ReturnType<typeof request>>, stopAfter = Number.POSITIVE_INFINITY): Promise<{ progress: number[]; result: unknown; lastId: string | undefined }> {
  const progress: number[] = [];
  let result: unknown;
  let lastId: string | undefined;
  for await (const m of stream.messages) {
    if (m.id !== undefined && m.id !== '') lastId = m.id;
    if (m.data === '') continue;
    const msg = JSON.parse(m.data) as { method?: string; params?: { progress?: number }; result?: unknown };
    if (msg.method === 'notifications/progress') progress.push(msg.params!.progress!);
    if (msg.result !== undefined) result = msg.result;
    if (progress.length >= stopAfter) {
      stream.cancel();
      break;
    }
  }
  return { progress, result, lastId };
}

describe('--auth jwt: the session belongs to the identity, not the token', () => {
  it('a token obtained after the first expired resumes the cut stream on the other instance, every event once', async () => {
    const t1 = await tokenOf('client-a');
    const sessionId = await initialize(`${proxy.url}/mcp`, bearer(t1));
    const count = 40;
    const call = await request(`${proxy.url}/mcp`, { method: 'POST', sessionId, body: callTool(7, UpstreamTools.StreamProgress, { count, delayMs: 150 }), headers: bearer(t1) });
    expect(call.status).toBe(200);
    const postTarget = proxy.lastTargetOf((r) => r.method === 'POST' && r.sessionId === sessionId);
    const first = await readProgress(call, 5);
    expect(first.progress).toEqual([1, 2, 3, 4, 5]);
    expect(first.lastId).toBeDefined();

    // T1 expires (no clock skew here); the client gets T2 for the same client.
    await sleep(TTL_S * 1000 + 500);
    const expired = await request(`${proxy.url}/mcp`, { method: 'GET', sessionId, lastEventId: first.lastId!, headers: bearer(t1) });
    expect(expired.status).toBe(401);
    expired.cancel();
    const t2 = await tokenOf('client-a');
    expect(t2).not.toBe(t1);
    expect(decodeJwt(t2).sub).toBe(decodeJwt(t1).sub);

    // The resume goes to the instance that did not record the stream.
    const everyTarget = proxy.targets;
    const other = everyTarget.find((t) => t !== postTarget)!;
    proxy.setTargets([other]);
    let rest;
    try {
      const resumed = await request(`${proxy.url}/mcp`, { method: 'GET', sessionId, lastEventId: first.lastId!, headers: bearer(t2) });
      expect(resumed.status).toBe(200);
      expect(resumed.headers.get('tether-resume')).toBe('resumed');
      rest = await readProgress(resumed);
    } finally {
      proxy.setTargets(everyTarget);
    }
    expect(proxy.lastTargetOf((r) => r.method === 'GET' && r.lastEventId === first.lastId && r.status === 200)).toBe(other);
    expect(other).not.toBe(postTarget);
    expect([...first.progress, ...rest.progress]).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    expect(JSON.stringify(rest.result)).toContain(`done ${count}`);
  }, 60_000);

  it('a user\'s refreshed token keeps the session; another user of the same client is a stranger', async () => {
    const alice = await as.authorizationCode('client-a', { resource: audience, accountId: 'alice' });
    const sessionId = await initialize(`${proxy.url}/mcp`, bearer(alice.access_token));
    await sleep(TTL_S * 1000 + 500);
    const refreshed = await as.refresh('client-a', alice.refresh_token, { resource: audience });
    expect(refreshed.access_token).not.toBe(alice.access_token);
    // Both instances take the refreshed token for the session (the proxy alternates).
    for (const id of [1, 2]) {
      const res = await request(`${proxy.url}/mcp`, { method: 'POST', sessionId, body: callTool(id, UpstreamTools.Echo, { text: 'alice' }), headers: bearer(refreshed.access_token) });
      expect(res.status).toBe(200);
      res.cancel();
    }
    const bob = await as.authorizationCode('client-a', { resource: audience, accountId: 'bob' });
    const res = await request(`${proxy.url}/mcp`, { method: 'POST', sessionId, body: callTool(3, UpstreamTools.Echo, { text: 'bob' }), headers: bearer(bob.access_token) });
    expect(res.status).toBe(404);
    res.cancel();
  }, 30_000);

  it('another client\'s valid token gets the very 404 of an unknown session', async () => {
    const a = await tokenOf('client-a');
    const b = await tokenOf('client-b');
    const sessionId = await initialize(`${proxy.url}/mcp`, bearer(a));
    const unknownId = randomBytes(16).toString('base64url').slice(0, 22);
    const answer = async (id: string): Promise<[number, string, string | null]> => {
      const res = await fetch(`${proxy.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': id, ...bearer(b) },
        body: JSON.stringify(callTool(1, UpstreamTools.Echo, { text: 'x' })),
      });
      return [res.status, await res.text(), res.headers.get('content-type')];
    };
    const theirs = await answer(sessionId);
    const unknown = await answer(unknownId);
    expect(theirs[0]).toBe(404);
    expect(theirs).toEqual(unknown);
    // A resume of the session with the other client's token: the unknown-session verdict too.
    const resume = await request(`${proxy.url}/mcp`, { method: 'GET', sessionId, lastEventId: `1-0-1-0`, headers: bearer(b) });
    const resumeUnknown = await request(`${proxy.url}/mcp`, { method: 'GET', sessionId: unknownId, lastEventId: `1-0-1-0`, headers: bearer(b) });
    expect([resume.status, await resume.json()]).toEqual([resumeUnknown.status, await resumeUnknown.json()]);
    // And the owner still has it.
    const mine = await request(`${proxy.url}/mcp`, { method: 'POST', sessionId, body: callTool(2, UpstreamTools.Echo, { text: 'still mine' }), headers: bearer(a) });
    expect(mine.status).toBe(200);
    mine.cancel();
  });
});

describe('--auth jwt: refusals follow the MCP authorization spec', () => {
  const metadataUrl = (): string => `${new URL(audience).origin}/.well-known/oauth-protected-resource/mcp`;

  async function refusal(headers: Record<string, string>, url = `${proxy.url}/mcp`): Promise<{ status: number; challenge: string; retryAfter: string | null; body: { error: { code: number; message: string; data?: { error?: string } } }; text: string }> {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
    });
    const text = await res.text();
    return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '', retryAfter: res.headers.get('retry-after'), body: JSON.parse(text), text };
  }

  function expectInvalid(r: Awaited<ReturnType<typeof refusal>>, reason: RegExp, token?: string): void {
    expect(r.status).toBe(401);
    expect(r.challenge).toMatch(/^Bearer error="invalid_token", error_description="[^"]+", resource_metadata="([^"]+)"$/);
    expect(r.challenge).toContain(`resource_metadata="${metadataUrl()}"`);
    expect(r.body.error.message).toMatch(reason);
    expect(r.body.error.data?.error).toBe('invalid_token');
    if (token !== undefined) {
      for (const part of token.split('.').filter((p) => p.length > 8)) expect(r.text + r.challenge).not.toContain(part);
    }
  }

  it('no token, a malformed header, an expired token', async () => {
    // RFC 6750 section 3.1: no credentials at all, no error code; the challenge still names the metadata.
    const none = await refusal({});
    expect(none.status).toBe(401);
    expect(none.challenge).toBe(`Bearer resource_metadata="${metadataUrl()}"`);
    expect(none.body.error.message).toMatch(/has no access token/);
    expectInvalid(await refusal({ authorization: 'Basic dXNlcjpwYXNz' }), /not of the form Bearer <token>/);
    expectInvalid(await refusal({ authorization: 'Bearer a b' }), /not of the form Bearer <token>/);
    expectInvalid(await refusal({ authorization: 'Bearer not-a-jwt' }), /not a well-formed signed JWT|could not be read/);
    const token = await tokenOf('client-a');
    await sleep(TTL_S * 1000 + 500);
    expectInvalid(await refusal(bearer(token)), /expired/, token);
  }, 20_000);

  it('a wrong audience, a wrong issuer, alg none, HMAC with the public key, a tampered signature', async () => {
    const other = await tokenOf('client-a', otherResource);
    expectInvalid(await refusal(bearer(other)), /not meant for this resource/, other);

    const real = await tokenOf('client-a');
    const header = decodeProtectedHeader(real);
    const claims = decodeJwt(real);
    // The real key, another issuer: only the issuer is wrong.
    const [jwk] = as.signingKeys();
    const key = await importJWK(jwk!, header.alg);
    const foreign = await new SignJWT({ ...claims, iss: 'https://evil.example' }).setProtectedHeader(header as JWTHeaderParameters).sign(key);
    expectInvalid(await refusal(bearer(foreign)), /not issued by/, foreign);

    const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url');
    const unsigned = `${b64({ alg: 'none', typ: 'at+jwt' })}.${b64(claims)}.`;
    expectInvalid(await refusal(bearer(unsigned)), /not a well-formed|algorithm is not accepted/);

    // Algorithm confusion: HS256 keyed with the issuer's public key, as served by its JWKS.
    const jwks = (await (await fetch(as.jwksUri)).json()) as { keys: Record<string, unknown>[] };
    const publicJwk = JSON.stringify(jwks.keys[0]);
    const hmac = await new SignJWT({ ...claims }).setProtectedHeader({ alg: 'HS256', kid: header.kid! }).sign(new TextEncoder().encode(publicJwk));
    expectInvalid(await refusal(bearer(hmac)), /algorithm is not accepted/, hmac);

    const [h, p, s] = real.split('.');
    const flipped = `${h}.${p}.${s!.slice(0, -4)}${s!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    expectInvalid(await refusal(bearer(flipped)), /signature does not verify/);
    const tampered = `${h}.${b64({ ...claims, sub: 'someone-else' })}.${s}`;
    expectInvalid(await refusal(bearer(tampered)), /signature does not verify/);
  });

  it('a missing scope is 403 insufficient_scope naming the scope', async () => {
    const scoped = await startInProcessStack({ args: jwtArgs(['--auth-scopes', 'mcp:admin']) });
    try {
      const without = await tokenOf('client-a', audience, 'mcp:tools');
      const r = await refusal(bearer(without), scoped.urls[0]);
      expect(r.status).toBe(403);
      expect(r.challenge).toMatch(/^Bearer error="insufficient_scope", error_description="[^"]*mcp:admin[^"]*", resource_metadata="[^"]+", scope="mcp:admin"$/);
      expect(r.body.error.data?.error).toBe('insufficient_scope');
      const withScope = await tokenOf('client-a', audience, 'mcp:tools mcp:admin');
      await expect(initialize(scoped.urls[0]!, bearer(withScope))).resolves.toMatch(/^[A-Za-z0-9_-]{22}$/);
    } finally {
      await scoped.teardown();
    }
  });

  it('serves RFC 9728 metadata at the route path and the bare prefix', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/mcp', '/.well-known/oauth-protected-resource']) {
      const res = await fetch(`${proxy.url}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(await res.json()).toEqual({ resource: audience, authorization_servers: [as.issuer], bearer_methods_supported: ['header'] });
    }
  });

  it('the issuer down is 503 with Retry-After, never 401, and recovers by itself', async () => {
    // A fresh gateway has no keys yet: it must ask the issuer.
    const cold = await startInProcessStack({ args: jwtArgs() });
    try {
      const token = await tokenOf('client-a');
      await as.stop();
      const down = await refusal(bearer(token), cold.urls[0]);
      expect(down.status).toBe(503);
      expect(down.body.error.message).toMatch(/issuer's keys could not be fetched/);
      expect(down.challenge).toBe('');
      expect(Number(down.retryAfter)).toBeGreaterThan(0);
      await as.start();
      // The keys are fetched at most once per 2 s, failed or not: a client that waits as Retry-After says is served.
      await sleep(Number(down.retryAfter) * 1000);
      // A fresh token: this file's tokens live TTL_S (3 s), which a slow machine can spend before this line.
      const fresh = await tokenOf('client-a');
      await expect(initialize(cold.urls[0]!, bearer(fresh))).resolves.toMatch(/^[A-Za-z0-9_-]{22}$/);
    } finally {
      await as.start().catch(() => undefined);
      await cold.teardown();
    }
  });

  it('a rotated signing key validates without a restart, and tokens of the old key still do', async () => {
    const before = await tokenOf('client-a');
    await initialize(`${proxy.url}/mcp`, bearer(before));
    await as.rotateSigningKey();
    const after = await tokenOf('client-a');
    expect(decodeProtectedHeader(after).kid).not.toBe(decodeProtectedHeader(before).kid);
    // Both gateways learn the new key on its first use (an unknown kid refetches the keys, at most every 2 s).
    const deadline = Date.now() + 10_000;
    let ok = 0;
    while (ok < 2 && Date.now() < deadline) {
      try {
        await initialize(`${proxy.url}/mcp`, bearer(after));
        ok += 1;
      } catch {
        await sleep(250);
      }
    }
    expect(ok).toBe(2);
    await expect(initialize(`${proxy.url}/mcp`, bearer(before))).resolves.toMatch(/^[A-Za-z0-9_-]{22}$/);
  });
});
