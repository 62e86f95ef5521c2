import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createResumeGuard } from '@tether/resume-guard';
import { getFreePort, startAuthorizationServer, startRoundRobinProxy, UpstreamTools } from '@tether/testing';
import type { AuthorizationServer, RoundRobinProxy } from '@tether/testing';
import { startInProcessStack } from './fixtures.js';
import type { InProcessStack } from './fixtures.js';

/**
 * The official SDK v1 client with its own OAuth support, as a user runs it:
 * it finds the authorization server through the gateway's RFC 9728
 * metadata, gets its tokens by client credentials, and keeps a long call
 * going across token expiries and cut connections, on two gateways that
 * take turns.
 */
const TTL_S = 2;
let as: AuthorizationServer;
let stack: InProcessStack;
let proxy: RoundRobinProxy;
let audience: string;

beforeAll(async () => {
  const proxyPort = await getFreePort();
  audience = `http://127.0.0.1:${proxyPort}/mcp`;
  as = await startAuthorizationServer({ resources: [audience], accessTokenTtlSeconds: TTL_S });
  stack = await startInProcessStack({
    gateways: 2,
    args: ['--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri, '--auth-audience', audience, '--auth-clock-skew', '0', '--auth-scopes', 'mcp:tools'],
  });
  proxy = await startRoundRobinProxy(stack.urls.map((u) => u.replace(/\/mcp$/, '')), { port: proxyPort });
});

afterAll(async () => {
  await proxy?.close();
  await stack?.teardown();
  await as?.close();
});

interface OAuthClient {
  readonly sdk: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** Digests of the bearer tokens the client sent. */
  readonly tokensSeen: Set<string>;
  /** The client's requests to the MCP endpoint: method, status, and the Last-Event-ID it sent. */
  readonly requests: { method: string; status: number; lastEventId: string | null }[];
}

/** The SDK v1 client with ClientCredentialsProvider; its fetch is the resume guard's when `guarded`. */
async function connectOAuthClient(guarded: boolean): Promise<OAuthClient> {
  const credentials = as.clients.find((c) => c.clientId === 'client-a')!;
  const tokensSeen = new Set<string>();
  const requests: OAuthClient['requests'] = [];
  const recordingFetch = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const headers = new Headers(input instanceof Request ? input.headers : init?.headers);
    if (init?.headers !== undefined) for (const [k, v] of new Headers(init.headers)) headers.set(k, v);
    const auth = headers.get('authorization');
    if (auth?.startsWith('Bearer ') === true) tokensSeen.add(createHash('sha256').update(auth).digest('hex'));
    const res = await fetch(input, init);
    const url = String(input instanceof Request ? input.url : input);
    if (url === audience) requests.push({ method: init?.method ?? (input instanceof Request ? input.method : 'GET'), status: res.status, lastEventId: headers.get('last-event-id') });
    return res;
  };
  const transport = new StreamableHTTPClientTransport(new URL(audience), {
    authProvider: new ClientCredentialsProvider({ clientId: credentials.clientId, clientSecret: credentials.clientSecret, scope: 'mcp:tools', expectedIssuer: as.issuer }),
    fetch: guarded ? createResumeGuard({ fetch: recordingFetch }).fetch : recordingFetch,
    reconnectionOptions: { initialReconnectionDelay: 50, maxReconnectionDelay: 500, reconnectionDelayGrowFactor: 1.5, maxRetries: 30 },
  });
  const sdk = new Client({ name: 'oauth-client', version: '0.0.0' }, { capabilities: {} });
  await sdk.connect(transport);
  return { sdk, transport, tokensSeen, requests };
}

describe('SDK v1 client with ClientCredentialsProvider through --auth jwt gateways', () => {
  it('discovers the issuer through the gateway and completes a long call across token expiries and cuts, every progress event once', async () => {
    const { sdk, transport, tokensSeen, requests } = await connectOAuthClient(true);
    // The client was refused first, then found its way to a token through the gateway's metadata.
    expect(requests[0]?.status).toBe(401);
    expect(tokensSeen.size).toBe(1);

    const count = 70;
    const progress: number[] = [];
    const cuts = (async () => {
      // Cut every connection three times while the call runs; tokens expire in between.
      for (const waitMs of [1_200, 1_400, 1_700]) {
        await sleep(waitMs);
        proxy.cutAll();
      }
    })();
    const result = await sdk.callTool({ name: UpstreamTools.StreamProgress, arguments: { count, delayMs: 100 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      resetTimeoutOnProgress: true,
      timeout: 30_000,
    });
    await cuts;
    expect(JSON.stringify(result.content)).toContain(`done ${count}`);
    expect(progress).toEqual(Array.from({ length: count }, (_, i) => i + 1));
    // Several tokens: expiries were met by a 401 and a new token for the same client, resumes among them.
    expect(tokensSeen.size).toBeGreaterThanOrEqual(3);
    expect(requests.filter((r) => r.status === 401 && r.lastEventId !== null).length).toBeGreaterThanOrEqual(1);
    // The last token may have expired too; the v1 client does not re-authenticate a DELETE.
    await transport.terminateSession().catch(() => undefined);
    await sdk.close();
  }, 60_000);

  it('without the resume guard, the v1 client drops its cursor when a resume meets an expired token (SDK 1.32 _authThenStart)', async () => {
    const { sdk, transport, requests } = await connectOAuthClient(false);
    const progress: number[] = [];
    const call = sdk.callTool({ name: UpstreamTools.StreamProgress, arguments: { count: 60, delayMs: 100 } }, undefined, {
      onprogress: (p) => progress.push(p.progress),
      timeout: TTL_S * 1000 + 4_000,
    });
    // Past the token's expiry, then a cut: the resume goes out with the expired token.
    await sleep(TTL_S * 1000 + 1_000);
    proxy.cutAll();
    await expect(call).rejects.toThrow(/timed out/);
    // The resume of the call's own stream (not the standalone stream 0; ids are <epoch>-<stream>-<seq>-<pos>) was refused 401 ...
    const refused = requests.findIndex((r) => r.method === 'GET' && r.status === 401 && r.lastEventId !== null && r.lastEventId.split('-')[1] !== '0');
    expect(refused).toBeGreaterThanOrEqual(0);
    // ... and never retried with its cursor: the client re-authenticated and opened a GET without one.
    const later = requests.slice(refused + 1).filter((r) => r.method === 'GET');
    expect(later.some((r) => r.lastEventId === null)).toBe(true);
    expect(later.some((r) => r.lastEventId === requests[refused]!.lastEventId)).toBe(false);
    expect(progress.length).toBeLessThan(60);
    await transport.terminateSession().catch(() => undefined);
    await sdk.close();
  }, 30_000);
});
