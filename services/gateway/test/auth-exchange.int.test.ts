import { createServer } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createRemoteJWKSet, importJWK, jwtVerify, SignJWT } from 'jose';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { getFreePort, startAuthorizationServer, startMcpUpstream, startNatsServer } from '@tether/testing';
import type { AuthorizationServer, McpUpstream, NatsServer } from '@tether/testing';
import { callTool, initialize, request } from './e2e/raw-client.js';
import { WHOAMI, whoamiServer } from './whoami-upstream.js';
import type { Seen } from './whoami-upstream.js';

/**
 * `--upstream-auth exchange` (RFC 8693): the upstream gets a token the
 * issuer minted for it, never the caller's. One gateway, the real
 * authorization server (oidc-provider, with the test kit's token exchange
 * grant), and routes `/a` (strip) and `/x` (exchange) on SDK upstreams that
 * report the Authorization they saw; `/y` exchanges for a resource the
 * issuer does not know, `/z` for a plain upstream that answers 401.
 */
let as: AuthorizationServer;
let nats: NatsServer;
let gateway: Gateway;
let base: string;
let upstreamA: McpUpstream;
let upstreamX: McpUpstream;
let plain: Server;
let plainUrl: string;
const logLines: string[] = [];
/** Every token a test saw (callers' and exchanged): none may reach a log line. */
const seenTokens = new Set<string>();
const GATEWAY_CLIENT = 'tether-gateway';
const EXCHANGE_SECRET = 'x-SECRET-exchange';
const UNKNOWN_UPSTREAM = 'http://127.0.0.1:1/unregistered';

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const resource = (path: string): string => `${base}${path}`;
const seen = (token: string): string => (seenTokens.add(token), token);
const tokenFor = async (path: string, clientId = 'client-a'): Promise<string> => seen((await as.clientCredentials(clientId, { resource: resource(path), scope: 'mcp:tools' })).access_token);

async function whoami(path: string, token: string): Promise<{ authorization: string | null; principal: string | null }> {
  const url = resource(path);
  const sessionId = await initialize(url, bearer(token));
  const res = await request(url, { method: 'POST', sessionId, body: callTool(1, WHOAMI, {}), headers: bearer(token) });
  for await (const m of res.messages) {
    const msg = JSON.parse(m.data || '{}') as { result?: { content: { text: string }[] } };
    if (msg.result !== undefined) {
      const { authorization, principal } = JSON.parse(msg.result.content[0]!.text) as Seen;
      if (authorization !== null) seen(authorization.replace(/^Bearer /, ''));
      return { authorization, principal };
    }
  }
  throw new Error('no result');
}

async function statelessPost(path: string, headers: Record<string, string>): Promise<Response> {
  return fetch(resource(path), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
}

/** A JWT access token signed with the issuer's own key, with the times a test needs (clock skew between issuer and gateway). */
async function signedByIssuer(path: string, times: { nbf?: number; exp: number }): Promise<string> {
  const key = as.signingKeys()[0]!;
  const jwt = new SignJWT({ client_id: 'client-a', scope: 'mcp:tools' })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid: key.kid! })
    .setIssuer(as.issuer).setAudience(resource(path)).setSubject('client-a').setIssuedAt().setExpirationTime(times.exp);
  if (times.nbf !== undefined) jwt.setNotBefore(times.nbf);
  return seen(await jwt.sign(await importJWK(key, 'RS256')));
}

const nowS = (): number => Math.floor(Date.now() / 1000);

beforeAll(async () => {
  const port = await getFreePort();
  base = `http://127.0.0.1:${port}`;
  nats = await startNatsServer();
  upstreamA = await startMcpUpstream({ createServer: whoamiServer });
  upstreamX = await startMcpUpstream({ createServer: whoamiServer });
  plain = createServer((_req, res) => void res.writeHead(401, { 'www-authenticate': 'Bearer error="invalid_token"', 'content-type': 'application/json' }).end('{}'));
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}/mcp`;
  // The upstreams' own URLs are their resource URIs: what the exchanged tokens' aud names.
  as = await startAuthorizationServer({
    resources: [...['/a', '/x', '/y', '/z'].map(resource), upstreamX.url, plainUrl],
    accessTokenTtlSeconds: 120,
    tokenExchange: { clientId: GATEWAY_CLIENT, clientSecret: EXCHANGE_SECRET },
  });
  const args = [
    '--port', String(port), '--nats', nats.url, '--instance-id', 'gw-exchange', '--tasks', 'off',
    '--route', `/a=${upstreamA.url}`, '--route', `/x=${upstreamX.url}`, '--route', `/y=${upstreamX.url}`, '--route', `/z=${plainUrl}`,
    '--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri,
    ...['/a', '/x', '/y', '/z'].flatMap((p) => ['--auth-audience', `${p}=${resource(p)}`]),
    ...['/x', '/y', '/z'].flatMap((p) => ['--upstream-auth', `${p}=exchange`]),
    '--upstream-audience', `/x=${upstreamX.url}`, '--upstream-audience', `/y=${UNKNOWN_UPSTREAM}`, '--upstream-audience', `/z=${plainUrl}`,
    '--auth-token-endpoint', as.tokenEndpoint, '--auth-exchange-client-id', GATEWAY_CLIENT, '--auth-exchange-client-secret', EXCHANGE_SECRET,
  ];
  const config = parseConfig(args, {});
  const log = await createLocalLog({ servers: nats.url, streamName: `EXCH_${process.pid}`, subjectPrefix: `exch${process.pid}`, sessionsBucket: `s_exch_${process.pid}`, leasesBucket: `l_exch_${process.pid}`, principalsBucket: `p_exch_${process.pid}`, tasksStream: `t_exch_${process.pid}` });
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (logLines.push(chunk.toString('utf8')), done()) });
  gateway = createGateway(config, log, pino({ level: 'debug' }, sink));
  await gateway.listen();
});

afterAll(async () => {
  await gateway?.close();
  await new Promise((resolve) => plain?.close(resolve));
  await upstreamA?.close();
  await upstreamX?.close();
  await nats?.cleanup();
  await as?.close();
});

describe('--upstream-auth exchange', () => {
  it('/x\'s upstream gets a token the issuer minted for it (aud its URI, sub the caller\'s, act the gateway), never the caller\'s', async () => {
    const caller = seen((await as.authorizationCode('client-b', { resource: resource('/x'), scope: 'mcp:tools', accountId: 'alice' })).access_token);
    const got = await whoami('/x', caller);
    expect(got.principal).toBeNull();
    const exchanged = got.authorization?.replace(/^Bearer /, '') ?? '';
    expect(exchanged).not.toBe(caller);
    // What the upstream would check: the issuer's signature, and itself as the audience.
    const { payload } = await jwtVerify(exchanged, createRemoteJWKSet(new URL(as.jwksUri)), { issuer: as.issuer, audience: upstreamX.url, typ: 'at+jwt' });
    expect(payload).toMatchObject({ sub: 'alice', aud: upstreamX.url, client_id: GATEWAY_CLIENT, act: { sub: GATEWAY_CLIENT }, scope: 'mcp:tools' });
    // /a (strip) is unchanged: no token at all.
    expect(await whoami('/a', await tokenFor('/a'))).toMatchObject({ authorization: null, principal: expect.any(String) });
  });

  it('the upstream cannot replay its exchanged token at the gateway: its audience is no route\'s', async () => {
    const got = await whoami('/x', await tokenFor('/x'));
    const exchanged = got.authorization!.replace(/^Bearer /, '');
    for (const path of ['/x', '/a']) {
      const res = await statelessPost(path, bearer(exchanged));
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/error="invalid_token", error_description="[^"]*not meant for this resource/);
    }
  });

  it('later requests reuse the exchange, and concurrent first requests share one', async () => {
    const token = await tokenFor('/x', 'client-b');
    const before = as.tokenExchanges();
    const first = await whoami('/x', token);
    const second = await whoami('/x', token);
    // initialize, notifications/initialized and tools/call, twice: one exchange.
    expect(as.tokenExchanges()).toBe(before + 1);
    expect(second.authorization).toBe(first.authorization);

    const fresh = await tokenFor('/x');
    const answers = await Promise.all(Array.from({ length: 6 }, () => statelessPost('/x', bearer(fresh))));
    await Promise.all(answers.map((r) => r.arrayBuffer()));
    expect(answers.map((r) => r.status).filter((s) => s === 401 || s >= 500)).toEqual([]);
    expect(as.tokenExchanges()).toBe(before + 2);
  });

  it('the issuer down: 503 with Retry-After, the upstream not called; back up, the same token is exchanged', async () => {
    const warm = await tokenFor('/x');
    const token = await tokenFor('/x');
    // The gateway holds the issuer's keys from here on: only the exchange needs the issuer.
    expect((await statelessPost('/x', bearer(warm))).status).toBeLessThan(500);
    const calls = upstreamX.requests().length;
    await as.stop();
    try {
      const res = await statelessPost('/x', bearer(token));
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/the token endpoint could not be reached .*retry shortly/);
      expect(upstreamX.requests().length).toBe(calls);
    } finally {
      await as.start();
    }
    expect(await whoami('/x', token)).toMatchObject({ authorization: expect.stringMatching(/^Bearer /) });
  });

  it('the issuer refusing to delegate (invalid_target): 502 naming the route and the issuer\'s code, no challenge, asked once', async () => {
    const token = await tokenFor('/y');
    const before = as.tokenExchanges();
    const calls = upstreamX.requests().length;
    for (let i = 0; i < 2; i++) {
      const res = await statelessPost('/y', bearer(token));
      expect(res.status).toBe(502);
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(res.headers.get('retry-after')).toBeNull();
      const body = (await res.json()) as { error: { message: string; data: { error: string } } };
      expect(body.error.data.error).toBe('exchange_refused');
      expect(body.error.message).toBe('Bad Gateway: route /y: the issuer refused to exchange the access token for the upstream\'s (invalid_target)');
    }
    expect(as.tokenExchanges()).toBe(before + 1);
    expect(upstreamX.requests().length).toBe(calls);
    expect(logLines.some((l) => l.includes('"msg":"token exchange refused"') && l.includes('"route":"/y"'))).toBe(true);
  });

  it('the issuer refusing the caller\'s token (invalid_grant, here its nbf by the issuer\'s clock): 401 with /x\'s challenge', async () => {
    const before = as.tokenExchanges();
    const early = await signedByIssuer('/x', { nbf: nowS() + 10, exp: nowS() + 120 });
    const res = await statelessPost('/x', bearer(early));
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer error="invalid_token", error_description="the issuer no longer accepts the access token/);
    expect(challenge).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/x"`);
    expect(as.tokenExchanges()).toBe(before + 1);
  });

  it('a token expired by the issuer\'s clock but within the gateway\'s skew: 401 without asking the issuer', async () => {
    const before = as.tokenExchanges();
    const lapsed = await signedByIssuer('/x', { exp: nowS() - 5 });
    // Its twin for /a passes there: a route that does not exchange keeps the skew.
    expect((await statelessPost('/a', bearer(await signedByIssuer('/a', { exp: nowS() - 5 })))).status).not.toBe(401);
    const res = await statelessPost('/x', bearer(lapsed));
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/error="invalid_token", error_description="the access token expired"/);
    expect(as.tokenExchanges()).toBe(before);
  });

  it('an upstream that refuses its exchanged token: 502 naming the fix, never its challenge', async () => {
    const res = await statelessPost('/z', bearer(await tokenFor('/z')));
    expect(res.status).toBe(502);
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/the upstream of route \/z answered 401 to the token exchanged for it: .*--upstream-audience/);
  });

  it('no log line holds a token, the caller\'s or an exchanged one, or the exchange secret', () => {
    expect(seenTokens.size).toBeGreaterThan(10);
    const all = logLines.join('');
    expect(all.length).toBeGreaterThan(0);
    for (const token of seenTokens) expect(all).not.toContain(token);
    expect(all).not.toContain(EXCHANGE_SECRET);
  });
});
