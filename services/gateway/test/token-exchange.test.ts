import { createServer } from 'node:http';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTokenExchange } from '../src/auth/token-exchange.js';
import type { TokenExchange } from '../src/auth/token-exchange.js';

/**
 * The token exchange client against a token endpoint that misbehaves in
 * ways a real authorization server (auth-exchange.int.test.ts runs against
 * oidc-provider) will not on request: endless or slow answers, server
 * errors, answers that are no usable token. A real HTTP server on port 0;
 * `answer` decides what it says next.
 */
let server: Server;
let endpoint: string;
let requests: { authorization: string | undefined; form: URLSearchParams }[] = [];
let answer: (req: IncomingMessage, res: ServerResponse) => void;

const json = (status: number, body: unknown) => (_req: IncomingMessage, res: ServerResponse) => void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
const TOKEN = 'eyJ.exchanged.token';
const granted = json(200, { access_token: TOKEN, token_type: 'Bearer', issued_token_type: 'urn:ietf:params:oauth:token-type:access_token', expires_in: 300 });

function exchanger(options: { timeoutMs?: number; maxAnswerBytes?: number } = {}): TokenExchange {
  return createTokenExchange({ tokenEndpoint: endpoint, clientId: 'gate way', clientSecret: 's3cr:t', audiences: {} }, options);
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      requests.push({ authorization: req.headers.authorization, form: new URLSearchParams(Buffer.concat(chunks).toString('utf8')) });
      answer(req, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  requests = [];
  answer = granted;
});

describe('token exchange client', () => {
  it('sends RFC 8693 with client_secret_basic and a resource, and caches the token until shortly before expires_in', async () => {
    const exchange = exchanger();
    expect(await exchange.tokenFor('caller-token', 'https://up.example/mcp')).toBe(TOKEN);
    expect(await exchange.tokenFor('caller-token', 'https://up.example/mcp')).toBe(TOKEN);
    expect(requests).toHaveLength(1);
    expect(requests[0]!.authorization).toBe(`Basic ${Buffer.from('gate+way:s3cr%3At').toString('base64')}`);
    expect(Object.fromEntries(requests[0]!.form)).toEqual({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      subject_token: 'caller-token',
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      resource: 'https://up.example/mcp',
    });
    // Another audience or another caller token is another exchange.
    await exchange.tokenFor('caller-token', 'https://other.example/mcp');
    await exchange.tokenFor('other-token', 'https://up.example/mcp');
    expect(requests).toHaveLength(3);
  });

  it('concurrent misses share one exchange; a token without expires_in is never reused', async () => {
    answer = (req, res) => void setTimeout(() => granted(req, res), 50);
    const exchange = exchanger();
    const tokens = await Promise.all(Array.from({ length: 8 }, () => exchange.tokenFor('t', 'https://up.example/mcp')));
    expect(new Set(tokens)).toEqual(new Set([TOKEN]));
    expect(requests).toHaveLength(1);
    answer = json(200, { access_token: TOKEN, token_type: 'bearer' });
    await exchange.tokenFor('u', 'https://up.example/mcp');
    await exchange.tokenFor('u', 'https://up.example/mcp');
    expect(requests).toHaveLength(3);
  });

  it('invalid_grant is the caller\'s 401, any other refusal exchange_refused, remembered for a while', async () => {
    answer = json(400, { error: 'invalid_grant', error_description: 'subject token revoked' });
    const exchange = exchanger();
    await expect(exchange.tokenFor('t', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'invalid_token', reason: 'exchange_invalid_grant' });
    answer = json(400, { error: 'invalid_target', error_description: 'unknown resource https://up.example/other' });
    const refused = await exchange.tokenFor('t', 'https://up.example/other').catch((err: unknown) => err);
    expect(refused).toMatchObject({ code: 'exchange_refused', description: 'the issuer refused to exchange the access token for the upstream\'s (invalid_target)' });
    answer = json(401, { error: 'invalid_client' });
    await expect(exchange.tokenFor('u', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'exchange_refused', description: expect.stringContaining('(invalid_client)') });
    answer = json(403, { error: 'bad "code"\nwith\\stuff' });
    await expect(exchange.tokenFor('v', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'exchange_refused', description: expect.stringContaining('(unknown)') });
    // Each refusal was asked once; asking again within the refusal cache costs nothing.
    answer = granted;
    await expect(exchange.tokenFor('t', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'invalid_token' });
    expect(requests).toHaveLength(4);
  });

  it.each([
    ['a 500', json(500, { error: 'server_error' }), /answered HTTP 500/],
    ['a 429', json(429, { error: 'slow_down' }), /answered HTTP 429/],
    ['a redirect', (_req: IncomingMessage, res: ServerResponse) => void res.writeHead(302, { location: '/elsewhere' }).end(), /answered HTTP 302/],
    ['an HTML page', (_req: IncomingMessage, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<html>login</html>'), /not a JSON object/],
    ['a DPoP token', json(200, { access_token: TOKEN, token_type: 'DPoP', expires_in: 60 }), /not a Bearer token/],
    ['a token a header cannot carry', json(200, { access_token: 'abc\r\nx-injected: 1', token_type: 'Bearer' }), /no access_token the gateway can send/],
    ['an ID token', json(200, { access_token: TOKEN, token_type: 'Bearer', issued_token_type: 'urn:ietf:params:oauth:token-type:id_token' }), /something other than an access token/],
  ])('%s is issuer_unavailable, and is not cached', async (_name, respond, message) => {
    answer = respond;
    const exchange = exchanger();
    await expect(exchange.tokenFor('t', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'issuer_unavailable', description: expect.stringMatching(message) });
    answer = granted;
    expect(await exchange.tokenFor('t', 'https://up.example/mcp')).toBe(TOKEN);
  });

  it('an endless answer is cut at the size bound, a slow one at the deadline', async () => {
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const more = (): void => void (res.destroyed || res.write(`{"pad":"${'x'.repeat(16 * 1024)}"}`, () => setImmediate(more)));
      more();
    };
    await expect(exchanger({ maxAnswerBytes: 64 * 1024 }).tokenFor('t', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'issuer_unavailable', description: expect.stringContaining('exceeds 65536 bytes') });
    // Headers at once, then one byte every 100 ms: each read is quick, the whole is not.
    answer = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write(' ')), 100);
    };
    const started = Date.now();
    await expect(exchanger({ timeoutMs: 500 }).tokenFor('t', 'https://up.example/mcp')).rejects.toMatchObject({ code: 'issuer_unavailable', description: expect.stringContaining('no answer within 500 ms') });
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
