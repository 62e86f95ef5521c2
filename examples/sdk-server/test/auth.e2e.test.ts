import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { HttpHeader } from '@tether/protocol';
import { startAuthorizationServer, startNatsServer, startRoundRobinProxy } from '@tether/testing';
import type { AuthorizationServer, NatsServer, RoundRobinProxy, ServiceProcess } from '@tether/testing';
import { connectClient, connectTaskClient, createTask, textOf } from './clients.js';
import type { TestClient } from './clients.js';
import { startFleet, startInstance, upTo } from './fleet.js';
import type { Fleet } from './fleet.js';

// Sessions that outlive their access tokens, across real processes: a real
// OAuth authorization server (oidc-provider, `startAuthorizationServer`)
// issues JWT access tokens for the balancer's URL; two example instances
// with `--auth jwt` verify them. The session is bound to the token's
// identity (iss + sub), so a refreshed token continues it on any instance,
// and every other identity gets the unknown session's 404.

let nats: NatsServer;
let proxy: RoundRobinProxy;
let as: AuthorizationServer;
let fleet: Fleet;
/** The canonical resource URI: the balancer's `/mcp`, the tokens' `aud`. */
let resource: string;
let authArgs: string[];
const clients: { close(): Promise<void> }[] = [];
const processes: ServiceProcess[] = [];

beforeAll(async () => {
  nats = await startNatsServer();
  proxy = await startRoundRobinProxy([]);
  resource = `${proxy.url}/mcp`;
  as = await startAuthorizationServer({ resources: [resource], accessTokenTtlSeconds: 120 });
  authArgs = ['--auth', 'jwt', '--auth-jwks-url', as.jwksUri, '--auth-issuer', as.issuer, '--auth-audience', resource, '--auth-scopes', 'mcp:tools'];
  fleet = await startFleet(nats, 2, 'auth', { proxy, args: authArgs });
});
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => undefined);
  for (const process of processes) await process.stop().catch(() => undefined);
  await fleet?.close();
  await as?.close();
  await nats?.cleanup();
});

async function client(major: 'v1' | 'v2', token: string, sessionId?: string): Promise<TestClient> {
  const c = await connectClient(major, fleet.url, { authorization: `Bearer ${token}`, ...(sessionId === undefined ? {} : { sessionId }) });
  clients.push(c);
  return c;
}

/** A user's token (authorization code grant with PKCE, `sub` = the account) and its refresh token. */
const login = (accountId: string, clientId = 'client-a') => as.authorizationCode(clientId, { resource, scope: 'mcp:tools', accountId });

function rawPost(token: string | undefined, sessionId: string | undefined, body: unknown, url = fleet.url): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: {
      accept: 'application/json, text/event-stream',
      'content-type': 'application/json',
      [HttpHeader.protocolVersion]: '2025-11-25',
      ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      ...(sessionId === undefined ? {} : { [HttpHeader.sessionId]: sessionId }),
    },
    body: JSON.stringify(body),
  });
}

const initialize = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'auth-e2e', version: '1.0.0' } } };
const toolsList = { jsonrpc: '2.0', id: 1, method: 'tools/list' };

describe.each(['v1', 'v2'] as const)('SDK %s client', (major) => {
  it('a refreshed access token continues the session on every instance', async () => {
    const first = await login(`user-${major}`);
    const alice = await client(major, first.access_token);
    const sessionId = alice.sessionId!;
    expect(await alice.call('ping', {})).toBe('pong');

    const refreshed = await as.refresh('client-a', first.refresh_token, { resource });
    expect(refreshed.access_token).not.toBe(first.access_token);
    const again = await client(major, refreshed.access_token, sessionId);
    for (let i = 0; i < 3; i += 1) expect(await again.call('ping', {})).toBe('pong');
    const progress: number[] = [];
    expect(await again.call('stream', { count: 20, delayMs: 0 }, { onProgress: (p) => progress.push(p) })).toBe('streamed 20');
    expect(progress).toEqual(upTo(20));
    // The refreshed token's requests were served by both instances, and none was refused.
    const served = proxy.history().filter((r) => r.sessionId === sessionId && r.method === 'POST');
    expect(new Set(served.map((r) => r.target)).size).toBe(2);
    expect(served.every((r) => r.status !== 401 && r.status !== 404)).toBe(true);
  });

  it("another user of the same client, and another client, presenting the session id: the unknown session's 404, byte for byte", async () => {
    const alice = await client(major, (await login(`owner-${major}`)).access_token);
    const sessionId = alice.sessionId!;
    const strangers = [(await login(`other-${major}`)).access_token, (await as.clientCredentials('client-b', { resource, scope: 'mcp:tools' })).access_token];
    for (const token of strangers) {
      const unknown = await rawPost(token, 'AAAAAAAAAAAAAAAAAAAAAA', toolsList);
      const unknownBody = await unknown.text();
      expect(unknown.status).toBe(404);
      for (let i = 0; i < 2; i += 1) {
        const res = await rawPost(token, sessionId, toolsList);
        expect(res.status).toBe(404);
        expect(await res.text()).toBe(unknownBody);
      }
      const stranger = await client(major, token, sessionId);
      await expect(stranger.call('ping', {})).rejects.toThrow(/404|session not found/i);
    }
    expect(await alice.call('ping', {})).toBe('pong');
  });
});

describe('the bearer check', () => {
  it('no token: 401 whose WWW-Authenticate names the protected resource metadata, served through the balancer', async () => {
    const res = await rawPost(undefined, undefined, initialize);
    expect(res.status).toBe(401);
    const metadataUrl = `${proxy.url}/.well-known/oauth-protected-resource/mcp`;
    expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${metadataUrl}"`);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    for (const url of [metadataUrl, `${proxy.url}/.well-known/oauth-protected-resource`]) {
      const metadata = await fetch(url);
      expect(metadata.status).toBe(200);
      expect(await metadata.json()).toMatchObject({ resource, authorization_servers: [as.issuer], scopes_supported: ['mcp:tools'], bearer_methods_supported: ['header'] });
    }
  });

  it('a token for another resource: 401; without the required scope: 403', async () => {
    const other = 'http://other.example.test/mcp';
    as.addResource(other);
    const foreign = await as.clientCredentials('client-a', { resource: other, scope: 'mcp:tools' });
    const res = await rawPost(foreign.access_token, undefined, initialize);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'invalid_token' });
    const unscoped = await as.clientCredentials('client-a', { resource });
    const forbidden = await rawPost(unscoped.access_token, undefined, initialize);
    expect(forbidden.status).toBe(403);
    expect(forbidden.headers.get('www-authenticate')).toMatch(/error="insufficient_scope".*scope="mcp:tools"/);
  });

  it('a durable task outlives the token that created it: read back with the refreshed one, through either instance', async () => {
    const first = await login('task-owner');
    const { client: creator, transport } = await connectTaskClient(fleet.url, `Bearer ${first.access_token}`);
    clients.push(creator);
    const taskId = await createTask(creator, 10);
    const refreshed = await as.refresh('client-a', first.refresh_token, { resource });
    const { client: reader } = await connectTaskClient(fleet.url, `Bearer ${refreshed.access_token}`, transport.sessionId);
    clients.push(reader);
    for (;;) {
      const { status } = await reader.experimental.tasks.getTask(taskId);
      if (status === 'completed') break;
      expect(status).toBe('working');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(textOf(await reader.experimental.tasks.getTaskResult(taskId, CallToolResultSchema))).toBe('slept 10 ms');
    expect((await reader.experimental.tasks.listTasks()).tasks.map((t) => t.taskId)).toEqual([taskId]);
  });

  it("the issuer's keys unreachable: 503 with Retry-After (not 401), and served again once it is back", async () => {
    const token = (await login('jwks-user')).access_token;
    // A fresh instance has no keys cached: its first token needs the JWKS.
    await as.stop();
    try {
      const lone = await startInstance(nats, 'auth-lone', authArgs);
      processes.push(lone);
      const url = `http://127.0.0.1:${lone.port}/mcp`;
      const res = await rawPost(token, undefined, initialize, url);
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('2');
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(await res.json()).toMatchObject({ error: 'temporarily_unavailable' });
      await as.start();
      const ok = await rawPost(token, undefined, initialize, url);
      expect(ok.status).toBe(200);
      await ok.text();
    } finally {
      await as.start();
    }
  });
});
