import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getFreePort } from '@tether/testing';
import { issuerRequest } from '../src/auth/issuer-request.js';
import { newSigningKey, startJwksEndpoint } from './jwks-endpoint.js';
import type { JwksEndpoint } from './jwks-endpoint.js';

/**
 * The one bounded exchange the gateway has with an issuer: one deadline for
 * connect + headers + body, a size limit enforced while reading. Against
 * real local HTTP servers that misbehave.
 */
let jwks: JwksEndpoint;
/** Declares a 10 MB body, sends its headers, then nothing. */
const declaresHuge = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(10 * 1024 * 1024) });
  res.flushHeaders();
});
let declaresHugeUrl: string;

beforeAll(async () => {
  jwks = await startJwksEndpoint([await newSigningKey('k1')]);
  declaresHuge.listen(0, '127.0.0.1');
  await once(declaresHuge, 'listening');
  declaresHugeUrl = `http://127.0.0.1:${(declaresHuge.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await jwks?.close();
  declaresHuge.closeAllConnections();
  declaresHuge.close();
});

const get = { method: 'GET', headers: {}, timeoutMs: 2_000, maxBytes: 64 * 1024 } as const;

describe('issuerRequest', () => {
  it('returns any status with its body', async () => {
    jwks.mode = 'ok';
    const ok = await issuerRequest(jwks.url, get);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toMatchObject({ keys: [{ kid: 'k1' }] });
    jwks.mode = 'error';
    await expect(issuerRequest(jwks.url, get)).resolves.toEqual({ status: 500, text: 'down' });
  });

  it('a body past the limit fails while it is read', async () => {
    jwks.mode = 'oversized';
    await expect(issuerRequest(jwks.url, get)).rejects.toMatchObject({ code: 'too_large', message: 'the answer is larger than 65536 bytes' });
  });

  it('a declared content-length past the limit fails before any of the body arrives', async () => {
    // The body never comes: only the header can have refused it (well before the deadline's timed_out).
    await expect(issuerRequest(declaresHugeUrl, { ...get, timeoutMs: 10_000 })).rejects.toMatchObject({ code: 'too_large' });
  });

  it('a body that trickles hits the one deadline of the whole exchange', async () => {
    jwks.mode = 'trickle';
    // Headers come at once, then a byte every 200 ms for ever: per-phase timeouts of 500 ms would never fire.
    await expect(issuerRequest(jwks.url, { ...get, timeoutMs: 500 })).rejects.toMatchObject({ code: 'timed_out', message: 'timed out after 500 ms' });
  });

  it('a refused connection is unreachable, named by its code', async () => {
    const port = await getFreePort();
    await expect(issuerRequest(`http://127.0.0.1:${port}/jwks`, get)).rejects.toMatchObject({ code: 'unreachable', message: 'ECONNREFUSED' });
  });
});
