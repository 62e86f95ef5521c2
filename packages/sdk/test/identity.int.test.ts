import { createServer } from 'node:http';
import type { IncomingMessage, Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { McpServer as McpServerV1 } from '@modelcontextprotocol/sdk/server/mcp.js';
import { McpServer as McpServerV2 } from '@modelcontextprotocol/server';
import { identityPrincipal, principalDigest, SessionLog } from '@tether/session-log';
import { startNatsServer } from '@tether/testing';
import type { NatsServer } from '@tether/testing';
import { clientPrincipalOf, createSessionRouter } from '@tether/sdk';
import type { SdkAuthInfo, SdkServer, SessionRouter, SessionRouterOptions } from '@tether/sdk';
import { isolatedNames, transportClass } from './router-fixtures.js';
import type { SdkMajor } from './router-fixtures.js';

// Sessions that outlive their access tokens: with a verified token
// (`authInfo`), a session is bound to the identity it names (issuer and
// subject), never to the token. A refreshed token continues the session on
// any instance; another subject gets the unknown session's 404, byte for
// byte; the token reaches the handlers and nothing else.

let nats: NatsServer;
const closers: (() => Promise<void>)[] = [];
beforeAll(async () => {
  nats = await startNatsServer();
});
afterAll(async () => {
  for (const close of closers.reverse()) await close().catch(() => undefined);
  await nats?.cleanup();
});

const ISSUER = 'https://as.example.test';
/** What a verifier gives for a JWT: the claims that name the caller in `extra`. */
function tokenOf(token: string, sub: string, options: { iss?: string; clientId?: string } = {}): SdkAuthInfo {
  return { token, clientId: options.clientId ?? 'client-a', scopes: ['mcp'], expiresAt: Math.floor(Date.now() / 1000) + 300, extra: { iss: options.iss ?? ISSUER, sub } };
}

/** `whoami`: what the handler sees of the request's token (v1 `extra.authInfo`, v2 `ctx.http.authInfo`). */
function buildServer(major: SdkMajor): SdkServer {
  const describe = (auth: { token: string; extra?: Record<string, unknown> } | undefined): { content: { type: 'text'; text: string }[] } => ({
    content: [{ type: 'text', text: auth === undefined ? 'anonymous' : `${String(auth.extra?.['sub'])} with ${auth.token}` }],
  });
  if (major === 'v1') {
    const server = new McpServerV1({ name: 'tether-identity-test', version: '1.0.0' });
    server.registerTool('whoami', {}, (extra) => describe(extra.authInfo));
    return server;
  }
  const server = new McpServerV2({ name: 'tether-identity-test', version: '2.0.0' });
  server.registerTool('whoami', {}, (ctx) => describe(ctx.http?.authInfo));
  return server;
}

interface Instance {
  readonly log: SessionLog;
  readonly router: SessionRouter;
}

/** One "instance": its own NATS connection and router on the shared log names. */
async function startInstance(major: SdkMajor, names: ReturnType<typeof isolatedNames>, options: Partial<SessionRouterOptions> = {}): Promise<Instance> {
  const log = await SessionLog.create({ servers: nats.url, ...names });
  const router = createSessionRouter({ log, transport: transportClass(major), createServer: () => buildServer(major), ...options });
  closers.push(async () => {
    await router.close();
    await log.close();
  });
  return { log, router };
}

/** `router.node` behind node:http, with a stand-in bearer gate that sets `req.auth` as the SDK v1's `requireBearerAuth` does. */
async function serveNode(router: SessionRouter, tokens: ReadonlyMap<string, SdkAuthInfo>): Promise<string> {
  const http: Server = createServer((req: IncomingMessage & { auth?: SdkAuthInfo }, res) => {
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const auth = token === undefined ? undefined : tokens.get(token);
    if (auth !== undefined) req.auth = auth;
    router.node(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise<void>((resolve) => http.close(() => resolve())));
  http.on('connection', (socket) => closers.push(async () => void socket.destroy()));
  return `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`;
}

const URL_B = 'http://instance-b.test/mcp';
const POST_HEADERS = { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2025-11-25' };

function post(url: string, body: unknown, headers: Record<string, string> = {}): Request {
  return new Request(url, { method: 'POST', headers: { ...POST_HEADERS, ...headers }, body: JSON.stringify(body) });
}

const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'identity-test', version: '1.0.0' } } };
const initialized = { jsonrpc: '2.0', method: 'notifications/initialized' };
const whoami = (id: number): unknown => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'whoami', arguments: {} } });

/** The JSON-RPC message with `id` in an SSE or JSON answer. */
async function messageOf(response: Response, id: number): Promise<{ result?: { content: { text: string }[] }; error?: unknown }> {
  const text = await response.text();
  const bodies = text.trimStart().startsWith('{') ? [text] : text.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim());
  for (const body of bodies) {
    if (body === '') continue;
    const message = JSON.parse(body) as { id?: unknown };
    if (message.id === id) return message as never;
  }
  throw new Error(`no message ${id} in ${text}`);
}

const textOf = (message: { result?: { content: { text: string }[] } }): string | undefined => message.result?.content[0]?.text;

/** Initializes through `url` (node:http, `req.auth` from the token table) and returns the session id. */
async function open(url: string, token: string): Promise<string> {
  const res = await fetch(url, { method: 'POST', headers: { ...POST_HEADERS, authorization: `Bearer ${token}` }, body: JSON.stringify(initialize) });
  expect(res.status).toBe(200);
  const sessionId = res.headers.get('mcp-session-id');
  await res.text();
  expect(sessionId).not.toBeNull();
  const ack = await fetch(url, { method: 'POST', headers: { ...POST_HEADERS, authorization: `Bearer ${token}`, 'mcp-session-id': sessionId! }, body: JSON.stringify(initialized) });
  expect(ack.status).toBe(202);
  return sessionId!;
}

describe.each(['v1', 'v2'] as const)('SDK %s: the principal is the identity, not the token', (major) => {
  let names: ReturnType<typeof isolatedNames>;
  let a: Instance;
  let b: Instance;
  let urlA: string;
  const tokens = new Map<string, SdkAuthInfo>([
    ['token-1', tokenOf('token-1', 'alice')],
    ['token-2', tokenOf('token-2', 'alice')],
    ['token-m', tokenOf('token-m', 'mallory')],
  ]);
  beforeAll(async () => {
    names = isolatedNames();
    a = await startInstance(major, names);
    b = await startInstance(major, names);
    urlA = await serveNode(a.router, tokens);
  });

  it('a refreshed token (same iss and sub) continues the session on another instance; the handler sees the new token', async () => {
    const sessionId = await open(urlA, 'token-1');
    // Instance B has never seen the session: it rebuilds it from the registry, for the refreshed token's identity.
    const refreshed = tokenOf('token-2', 'alice');
    const res = await b.router.fetch(post(URL_B, whoami(1), { authorization: 'Bearer token-2', 'mcp-session-id': sessionId }), { authInfo: refreshed });
    expect(res.status).toBe(200);
    expect(textOf(await messageOf(res, 1))).toBe('alice with token-2');
    // And back on A (node:http, `req.auth`), with the refreshed token too.
    const back = await fetch(urlA, { method: 'POST', headers: { ...POST_HEADERS, authorization: 'Bearer token-2', 'mcp-session-id': sessionId }, body: JSON.stringify(whoami(2)) });
    expect(back.status).toBe(200);
    expect(textOf(await messageOf(back, 2))).toBe('alice with token-2');

    const record = await b.log.getSession(sessionId);
    expect(record?.principal).toBe(identityPrincipal(ISSUER, 'alice'));
    // The token is nowhere in the record: only the identity's digest and the initialize params.
    const stored = JSON.stringify(record);
    for (const token of ['token-1', 'token-2']) expect(stored).not.toContain(token);
  });

  it("another subject, or the same subject of another issuer, gets the unknown session's 404, byte for byte", async () => {
    const sessionId = await open(urlA, 'token-1');
    const ask = (id: string, authInfo: SdkAuthInfo): Promise<Response> => b.router.fetch(post(URL_B, whoami(3), { authorization: `Bearer ${authInfo.token}`, 'mcp-session-id': id }), { authInfo });
    const unknown = await ask('AAAAAAAAAAAAAAAAAAAAAA', tokenOf('token-m', 'mallory'));
    const unknownBody = await unknown.text();
    expect(unknown.status).toBe(404);
    for (const stranger of [tokenOf('token-m', 'mallory'), tokenOf('token-x', 'alice', { iss: 'https://other-as.example.test' })]) {
      const res = await ask(sessionId, stranger);
      expect(res.status).toBe(404);
      expect([...res.headers]).toEqual([...unknown.headers]);
      expect(await res.text()).toBe(unknownBody);
    }
    const get = await b.router.fetch(new Request(URL_B, { headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId } }), { authInfo: tokenOf('token-m', 'mallory') });
    expect(get.status).toBe(404);
    expect(await get.text()).toBe(unknownBody);
    // Through node:http (`req.auth`) too.
    const viaNode = await fetch(urlA, { method: 'POST', headers: { ...POST_HEADERS, authorization: 'Bearer token-m', 'mcp-session-id': sessionId }, body: JSON.stringify(whoami(4)) });
    expect(viaNode.status).toBe(404);
    expect(await viaNode.text()).toBe(unknownBody);
    // Alice is untouched.
    const own = await b.router.fetch(post(URL_B, whoami(5), { 'mcp-session-id': sessionId }), { authInfo: tokenOf('token-2', 'alice') });
    expect(textOf(await messageOf(own, 5))).toBe('alice with token-2');
  });

  it('without authInfo: the Authorization value is the credential, as before (a new token is a stranger)', async () => {
    const res = await b.router.fetch(post(URL_B, initialize, { authorization: 'Bearer raw-1' }));
    expect(res.status).toBe(200);
    await res.text();
    const sessionId = res.headers.get('mcp-session-id')!;
    expect((await b.log.getSession(sessionId))?.principal).toBe(principalDigest('Bearer raw-1'));
    const other = await a.router.fetch(post(URL_B, whoami(6), { authorization: 'Bearer raw-2', 'mcp-session-id': sessionId }));
    expect(other.status).toBe(404);
  });

  it("a token without sub (only a client id, as the SDK's demo verifier gives) is a server fault (500), and no session is created", async () => {
    // Every user of a public client (here a Client ID Metadata Document URL) carries this client id: binding to it would pool them.
    const clientOnly = (token: string): SdkAuthInfo => ({ token, clientId: 'https://app.example.test/client.json', scopes: ['mcp'], extra: { iss: ISSUER } });
    const created = vi.spyOn(b.log, 'createSession');
    try {
      const res = await b.router.fetch(post(URL_B, initialize), { authInfo: clientOnly('token-n') });
      expect(res.status).toBe(500);
      expect(res.headers.get('mcp-session-id')).toBeNull();
      const body = await res.text();
      expect(body).toContain('authInfo.extra.sub');
      expect(body).toContain('clientPrincipalOf');
      expect(body).not.toContain('token-n');
      expect(created).not.toHaveBeenCalled();
    } finally {
      created.mockRestore();
    }
    // Nor can such a token reach a user's session: refused before any lookup.
    const sessionId = await open(urlA, 'token-1');
    const res = await b.router.fetch(post(URL_B, whoami(7), { 'mcp-session-id': sessionId }), { authInfo: clientOnly('token-o') });
    expect(res.status).toBe(500);
    await res.text();
  });
});

describe('principalOf', () => {
  it('written the old way (one argument, a credential string) still binds by that credential', async () => {
    const names = isolatedNames();
    const principalOf = (request: Request): string => request.headers.get('x-user') ?? '';
    const a = await startInstance('v1', names, { principalOf });
    const b = await startInstance('v1', names, { principalOf });
    const res = await a.router.fetch(post(URL_B, initialize, { 'x-user': 'carol' }), { authInfo: tokenOf('token-c1', 'carol') });
    expect(res.status).toBe(200);
    await res.text();
    const sessionId = res.headers.get('mcp-session-id')!;
    expect((await b.log.getSession(sessionId))?.principal).toBe(principalDigest('carol'));
    // The user's function decides, whatever the token says; the token still reaches the handler.
    const same = await b.router.fetch(post(URL_B, whoami(1), { 'x-user': 'carol', 'mcp-session-id': sessionId }), { authInfo: tokenOf('token-z', 'zed') });
    expect(textOf(await messageOf(same, 1))).toBe('zed with token-z');
    const other = await b.router.fetch(post(URL_B, whoami(2), { 'x-user': 'dave', 'mcp-session-id': sessionId }), { authInfo: tokenOf('token-c1', 'carol') });
    expect(other.status).toBe(404);
  });

  it('may answer an identity: bound by identityPrincipal(issuer, subject)', async () => {
    const names = isolatedNames();
    const a = await startInstance('v2', names, { principalOf: (_request, authInfo) => ({ issuer: 'tenant-1', subject: String(authInfo?.extra?.['email']) }) });
    const auth = (token: string, email: string): SdkAuthInfo => ({ token, clientId: 'c', scopes: [], extra: { email } });
    const res = await a.router.fetch(post(URL_B, initialize), { authInfo: auth('t1', 'erin@example.test') });
    await res.text();
    const sessionId = res.headers.get('mcp-session-id')!;
    expect((await a.log.getSession(sessionId))?.principal).toBe(identityPrincipal('tenant-1', 'erin@example.test'));
    const next = await a.router.fetch(post(URL_B, whoami(1), { 'mcp-session-id': sessionId }), { authInfo: auth('t2', 'erin@example.test') });
    expect(next.status).toBe(200);
    await next.text();
  });
});

describe.each(['v1', 'v2'] as const)('SDK %s, principalOf: clientPrincipalOf (chosen explicitly)', (major) => {
  it("binds to the client: two users' tokens of one client share a principal, another client's is a stranger", async () => {
    const names = isolatedNames();
    const a = await startInstance(major, names, { principalOf: clientPrincipalOf });
    const b = await startInstance(major, names, { principalOf: clientPrincipalOf });
    const res = await a.router.fetch(post(URL_B, initialize), { authInfo: tokenOf('token-u1', 'ursula', { clientId: 'client-svc' }) });
    expect(res.status).toBe(200);
    await res.text();
    const sessionId = res.headers.get('mcp-session-id')!;
    expect((await b.log.getSession(sessionId))?.principal).toBe(identityPrincipal(ISSUER, 'client-svc'));
    // Another subject of the same client, on another instance: the same principal, by choice.
    const same = await b.router.fetch(post(URL_B, whoami(1), { 'mcp-session-id': sessionId }), { authInfo: tokenOf('token-v1', 'victor', { clientId: 'client-svc' }) });
    expect(same.status).toBe(200);
    expect(textOf(await messageOf(same, 1))).toBe('victor with token-v1');
    // The same subject through another client is not.
    const other = await b.router.fetch(post(URL_B, whoami(2), { 'mcp-session-id': sessionId }), { authInfo: tokenOf('token-u2', 'ursula', { clientId: 'client-other' }) });
    expect(other.status).toBe(404);
    await other.text();
  });
});
