import { createServer, request as httpRequest } from 'node:http';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGateway, createLocalLog, parseConfig } from '@tether/gateway';
import type { Gateway } from '@tether/gateway';
import { identityPrincipal } from '@tether/session-log';
import { getFreePort, startAuthorizationServer, startMcpUpstream, startNatsServer } from '@tether/testing';
import type { AuthorizationServer, McpUpstream, NatsServer } from '@tether/testing';
import { callTool, initialize, request } from './e2e/raw-client.js';
import { WHOAMI, whoamiServer } from './whoami-upstream.js';
import type { Seen } from './whoami-upstream.js';

/**
 * Issue 31: each route its own protected resource, no token passthrough.
 * One gateway, one real authorization server (oidc-provider), two routes on
 * two SDK upstreams: `/a` (the default, `--upstream-auth strip`) and `/b`
 * (`--upstream-auth /b=forward`); and routes on plain HTTP upstreams that
 * answer with their own challenge and cookies, and on an unreachable
 * upstream whose URL carries secrets.
 */
let as: AuthorizationServer;
let nats: NatsServer;
let gateway: Gateway;
let base: string;
let upstreamA: McpUpstream;
let upstreamB: McpUpstream;
let plain: Server;
const logLines: string[] = [];
const SECRET = 'k3y-SECRET-in-query';
const PASSWORD = 'pw-SECRET-userinfo';

const bearer = (token: string): Record<string, string> => ({ authorization: `Bearer ${token}` });
const resource = (path: string): string => `${base}${path}`;
const tokenFor = async (path: string, clientId = 'client-a'): Promise<string> => (await as.clientCredentials(clientId, { resource: resource(path) })).access_token;

async function whoami(path: string, token: string): Promise<{ authorization: string | null; principal: string | null }> {
  const url = resource(path);
  const sessionId = await initialize(url, bearer(token));
  const res = await request(url, { method: 'POST', sessionId, body: callTool(1, WHOAMI, {}), headers: bearer(token) });
  for await (const m of res.messages) {
    const msg = JSON.parse(m.data || '{}') as { result?: { content: { text: string }[] } };
    if (msg.result === undefined) continue;
    const { authorization, principal } = JSON.parse(msg.result.content[0]!.text) as Seen;
    return { authorization, principal };
  }
  throw new Error('no result');
}

/** A stateless request (no session): the gateway passes it through to the route's upstream. */
async function statelessPost(path: string, headers: Record<string, string>): Promise<Response> {
  return fetch(resource(path), {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
}

beforeAll(async () => {
  const port = await getFreePort();
  base = `http://127.0.0.1:${port}`;
  as = await startAuthorizationServer({ resources: ['/a', '/b', '/c401', '/f401', '/c200', '/s'].map(resource), accessTokenTtlSeconds: 60 });
  nats = await startNatsServer();
  upstreamA = await startMcpUpstream({ createServer: whoamiServer });
  upstreamB = await startMcpUpstream({ createServer: whoamiServer });
  // Not an MCP server: an upstream whose own auth answers the gateway must not relay.
  plain = createServer((req, res) => {
    const cookie = 'upstream_session=abc; Path=/';
    if (req.url === '/401') return void res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="https://evil.example/.well-known/oauth-protected-resource"', 'set-cookie': cookie, 'content-type': 'application/json' }).end('{}');
    res.writeHead(200, { 'content-type': 'application/json', 'set-cookie': cookie, 'www-authenticate': 'Bearer realm="upstream"' }).end(JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tools: [] } }));
  });
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  const plainUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;
  const closedPort = await getFreePort();
  const args = [
    '--port', String(port), '--nats', nats.url, '--instance-id', 'gw-routes', '--tasks', 'off',
    '--route', `/a=${upstreamA.url}`, '--route', `/b=${upstreamB.url}`,
    '--route', `/c401=${plainUrl}/401`, '--route', `/f401=${plainUrl}/401`, '--route', `/c200=${plainUrl}/200`,
    '--route', `/s=http://user:${PASSWORD}@127.0.0.1:${closedPort}/mcp?api_key=${SECRET}`,
    '--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri,
    ...['/a', '/b', '/c401', '/f401', '/c200', '/s'].flatMap((p) => ['--auth-audience', `${p}=${resource(p)}`]),
    '--upstream-auth', '/b=forward', '--upstream-auth', '/f401=forward',
  ];
  const config = parseConfig(args, {});
  const log = await createLocalLog({ servers: nats.url, streamName: `ROUTES_${process.pid}`, subjectPrefix: `routes${process.pid}`, sessionsBucket: `s_routes_${process.pid}`, leasesBucket: `l_routes_${process.pid}`, principalsBucket: `p_routes_${process.pid}`, tasksStream: `t_routes_${process.pid}` });
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => (logLines.push(chunk.toString('utf8')), done()) });
  gateway = createGateway(config, log, pino({ level: 'debug' }, sink));
  await gateway.listen();
});

afterAll(async () => {
  await gateway?.close();
  await new Promise((resolve) => plain?.close(resolve));
  await upstreamA?.close();
  await upstreamB?.close();
  await nats?.cleanup();
  await as?.close();
});

describe('each route is its own protected resource', () => {
  it('a token minted for /a is refused on /b with /b\'s challenge, and /b\'s upstream never hears of it', async () => {
    const forA = await tokenFor('/a');
    const before = upstreamB.requests().length;
    const res = await fetch(resource('/b'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...bearer(forA) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
    });
    expect(res.status).toBe(401);
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).toMatch(/^Bearer error="invalid_token", error_description="[^"]*not meant for this resource[^"]*"/);
    expect(challenge).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/b"`);
    expect(upstreamB.requests().length).toBe(before);
  });

  it('serves each route\'s RFC 9728 metadata at its own well-known path, naming its own resource', async () => {
    for (const path of ['/a', '/b']) {
      const res = await fetch(`${base}/.well-known/oauth-protected-resource${path}`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { resource: string }).resource).toBe(resource(path));
    }
  });

  it('strip (the default): /a\'s upstream gets no token, only the verified principal', async () => {
    const seen = await whoami('/a', await tokenFor('/a'));
    expect(seen).toEqual({ authorization: null, principal: identityPrincipal(as.issuer, 'client-a') });
  });

  it('forward (opt-in per route): /b\'s upstream gets the token minted for /b, unchanged', async () => {
    const forB = await tokenFor('/b');
    expect(await whoami('/b', forB)).toEqual({ authorization: `Bearer ${forB}`, principal: null });
  });
});

describe('the request\'s own credentials', () => {
  it('two Authorization headers are 400 invalid_request, whichever comes first, and the upstream is not called', async () => {
    const good = await tokenFor('/a');
    const before = upstreamA.requests().length;
    for (const pair of [[`Bearer ${good}`, 'Bearer forged'], ['Bearer forged', `Bearer ${good}`]]) {
      const { status, challenge } = await new Promise<{ status: number; challenge: string }>((resolve, reject) => {
        const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
        // Raw header lines (fetch would join the two): Node then adds neither Host nor framing of its own.
        const lines = ['host', new URL(base).host, 'content-type', 'application/json', 'content-length', String(Buffer.byteLength(body)), 'accept', 'application/json, text/event-stream', 'Authorization', pair[0]!, 'authorization', pair[1]!];
        const req = httpRequest(resource('/a'), { method: 'POST', headers: lines }, (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, challenge: String(res.headers['www-authenticate'] ?? '') }));
        });
        req.on('error', reject);
        req.end(body);
      });
      expect(status).toBe(400);
      expect(challenge).toMatch(/^Bearer error="invalid_request", error_description="the request has more than one authorization header"$/);
    }
    expect(upstreamA.requests().length).toBe(before);
  });

  it('no credentials: 401 with the route\'s challenge and no error code (RFC 6750 section 3.1)', async () => {
    const res = await statelessPost('/b', {});
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/b"`);
  });
});

describe('what the upstream answers of its own auth never reaches the client', () => {
  it('a 200 passes without the upstream\'s Set-Cookie and WWW-Authenticate', async () => {
    const res = await statelessPost('/c200', bearer(await tokenFor('/c200')));
    expect(res.status).toBe(200);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { tools: [] } });
  });

  it('strip: the upstream\'s 401 is the gateway\'s 502 naming the fix, with neither its challenge nor its cookie', async () => {
    const res = await statelessPost('/c401', bearer(await tokenFor('/c401')));
    expect(res.status).toBe(502);
    expect(res.headers.get('set-cookie')).toBeNull();
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/the upstream of route \/c401 answered 401: .*--upstream-auth \/c401=forward/);
  });

  it('forward: the upstream\'s 401 becomes the route\'s own challenge, never the upstream\'s', async () => {
    const res = await statelessPost('/f401', bearer(await tokenFor('/f401')));
    expect(res.status).toBe(401);
    expect(res.headers.get('set-cookie')).toBeNull();
    const challenge = res.headers.get('www-authenticate') ?? '';
    expect(challenge).not.toContain('evil.example');
    expect(challenge).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/f401"`);
  });
});

describe('secrets in an upstream URL', () => {
  it('an unreachable upstream\'s 502 names the route, and no answer or log line holds its query or userinfo', async () => {
    const res = await fetch(resource('/s'), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...bearer(await tokenFor('/s')) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 't', version: '0' } } }),
    });
    expect(res.status).toBe(502);
    const text = await res.text();
    expect(text).toContain('upstream route /s did not answer');
    const stateless = await statelessPost('/s', bearer(await tokenFor('/s')));
    expect(stateless.status).toBe(502);
    const all = text + (await stateless.text()) + logLines.join('');
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain(PASSWORD);
  });
});
