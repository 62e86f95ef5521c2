import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JwtAuth } from '../src/auth/auth-config.js';
import { createJwtVerifier } from '../src/auth/jwt.js';
import type { TokenVerifier } from '../src/auth/jwt.js';
import { newSigningKey, signToken, startJwksEndpoint } from './jwks-endpoint.js';
import type { JwksEndpoint, SigningKey } from './jwks-endpoint.js';

/**
 * The issuer's key set as `--auth jwt` keeps it: stale-if-error for 24 h,
 * one fetch per 2 s cooldown whatever the last fetch did, 503 rather than
 * 401 when an unknown key could be a rotation we cannot see, and tokens
 * without `kid`. The JWKS is served by a real local HTTP server of keys
 * generated here (the test kit's authorization server cannot fail on
 * demand). Only `Date` is faked, to move the clock by hours; sockets and
 * timers are real.
 */
const ISSUER = 'https://idp.example';
const AUDIENCE = 'https://gw.example/mcp';
const MIN = 60_000;
const HOUR = 60 * MIN;

const endpoints: JwksEndpoint[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const e of endpoints.splice(0)) await e.close();
});

async function setup(keys: SigningKey[]): Promise<{ jwks: JwksEndpoint; verifier: TokenVerifier }> {
  const jwks = await startJwksEndpoint(keys);
  endpoints.push(jwks);
  const config: JwtAuth = {
    mode: 'jwt', issuer: ISSUER, audiences: [AUDIENCE], resources: { '/mcp': AUDIENCE }, scopes: [], principalClaim: 'sub', clockSkewMs: 30_000,
    authorizationServers: [ISSUER], upstreamAuth: {}, jwksUrl: jwks.url, algorithms: ['RS256', 'ES256', 'EdDSA'], tokenType: 'any',
  };
  return { jwks, verifier: createJwtVerifier(config) };
}

/** Freezes `Date` at `ms` (only Date: I/O and timers stay real). */
function clockAt(ms: number): void {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(ms);
}

const token = (key: SigningKey, sub = 'user-1', header: { kid?: string | undefined } = {}): Promise<string> => signToken(key, { iss: ISSUER, aud: AUDIENCE, sub }, header);
const unavailable = { code: 'issuer_unavailable' };
const invalid = (reason: string) => ({ code: 'invalid_token', reason });

/** Until the endpoint has seen `count` fetches (a background refresh is not awaited by the request that started it). */
async function fetchesReach(jwks: JwksEndpoint, count: number): Promise<void> {
  for (let i = 0; i < 100 && jwks.fetches < count; i += 1) await sleep(20);
  expect(jwks.fetches).toBe(count);
}

describe('the issuer\'s key set while its endpoint fails', () => {
  it('keeps verifying tokens of keys it holds for 24 h after the last successful fetch, then 503', async () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    clockAt(t0);
    const key = await newSigningKey('k1');
    const { jwks, verifier } = await setup([key]);
    await expect(verifier.verify(await token(key, 'a'))).resolves.toMatchObject({ subject: 'a' });
    expect(jwks.fetches).toBe(1);

    jwks.mode = 'error';
    // Past the 10-minute refresh age: the refresh fails, the held keys still serve.
    vi.setSystemTime(t0 + 11 * MIN);
    await expect(verifier.verify(await token(key, 'b'))).resolves.toMatchObject({ subject: 'b' });
    await fetchesReach(jwks, 2);
    vi.setSystemTime(t0 + 24 * HOUR - MIN);
    await expect(verifier.verify(await token(key, 'c'))).resolves.toMatchObject({ subject: 'c' });
    await fetchesReach(jwks, 3);

    // A day after the last success the held keys are no longer trusted without the issuer.
    vi.setSystemTime(t0 + 24 * HOUR + MIN);
    await expect(verifier.verify(await token(key, 'd'))).rejects.toMatchObject(unavailable);
    expect(jwks.fetches).toBe(4);

    // Back up: after the cooldown, one fetch and the keys are fresh again.
    jwks.mode = 'ok';
    vi.setSystemTime(t0 + 24 * HOUR + MIN + 2_000);
    await expect(verifier.verify(await token(key, 'e'))).resolves.toMatchObject({ subject: 'e' });
    expect(jwks.fetches).toBe(5);
  });

  it('twenty unknown kids cost one fetch per 2 s cooldown, and are 503 while the endpoint fails', async () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    clockAt(t0);
    const key = await newSigningKey('k1');
    const { jwks, verifier } = await setup([key]);
    await verifier.verify(await token(key));
    expect(jwks.fetches).toBe(1);

    jwks.mode = 'error';
    vi.setSystemTime(t0 + 3_000);
    const stranger = await newSigningKey('unused');
    for (let i = 0; i < 20; i += 1) {
      // A key the issuer may have just rotated in, which we cannot see: retry, not re-authenticate.
      await expect(verifier.verify(await token(stranger, 'u', { kid: `unknown-${i}` }))).rejects.toMatchObject(unavailable);
    }
    expect(jwks.fetches).toBe(2);
    // The known key is unaffected.
    await expect(verifier.verify(await token(key, 'known'))).resolves.toMatchObject({ subject: 'known' });

    vi.setSystemTime(t0 + 5_000);
    await expect(verifier.verify(await token(stranger, 'u', { kid: 'unknown-x' }))).rejects.toMatchObject(unavailable);
    expect(jwks.fetches).toBe(3);

    // The endpoint answers again: the kid is not in the fresh set, a 401; within the cooldown no fetch at all.
    jwks.mode = 'ok';
    vi.setSystemTime(t0 + 7_000);
    await expect(verifier.verify(await token(stranger, 'u', { kid: 'unknown-y' }))).rejects.toMatchObject(invalid('key'));
    await expect(verifier.verify(await token(stranger, 'u', { kid: 'unknown-z' }))).rejects.toMatchObject(invalid('key'));
    expect(jwks.fetches).toBe(4);
  });

  it('a cold gateway answers 503 while the endpoint fails, asks once per cooldown, and concurrent misses share one fetch', async () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    clockAt(t0);
    const key = await newSigningKey('k1');
    const { jwks, verifier } = await setup([key]);
    jwks.mode = 'error';
    const tokens = await Promise.all(Array.from({ length: 20 }, (_, i) => token(key, `s${i}`)));
    const answers = await Promise.allSettled(tokens.map((t) => verifier.verify(t)));
    for (const a of answers) expect(a).toMatchObject({ status: 'rejected', reason: unavailable });
    expect(jwks.fetches).toBe(1);
    await expect(verifier.verify(tokens[0]!)).rejects.toMatchObject(unavailable);
    expect(jwks.fetches).toBe(1);

    jwks.mode = 'ok';
    vi.setSystemTime(t0 + 2_000);
    const results = await Promise.all(tokens.map((t) => verifier.verify(t)));
    expect(results.map((r) => r.subject)).toEqual(tokens.map((_, i) => `s${i}`));
    expect(jwks.fetches).toBe(2);
  });

  it('an oversized key set is refused once its size limit is read, not read to its end', async () => {
    const key = await newSigningKey('k1');
    const { jwks, verifier } = await setup([key]);
    jwks.mode = 'oversized';
    const refusal = verifier.verify(await token(key));
    await expect(refusal).rejects.toMatchObject(unavailable);
    await expect(refusal).rejects.toThrow(/larger than/);
  });
});

describe('the issuer\'s key set while its endpoint answers', () => {
  it('a rotated-in key is found on its first use; a withdrawn one stops verifying once the aged keys are refreshed', async () => {
    const t0 = Date.parse('2026-01-01T00:00:00Z');
    clockAt(t0);
    const old = await newSigningKey('old');
    const { jwks, verifier } = await setup([old]);
    await verifier.verify(await token(old));
    const fresh = await newSigningKey('new');
    jwks.keys = [fresh, old];
    vi.setSystemTime(t0 + 2_000);
    await expect(verifier.verify(await token(fresh, 'n'))).resolves.toMatchObject({ subject: 'n' });
    expect(jwks.fetches).toBe(2);

    // The issuer withdraws the old key. Within the refresh age it is still held.
    jwks.keys = [fresh];
    vi.setSystemTime(t0 + 5 * MIN);
    await expect(verifier.verify(await token(old, 'o1'))).resolves.toMatchObject({ subject: 'o1' });
    expect(jwks.fetches).toBe(2);
    // Past it, the request goes on with the held keys while the refresh runs; then the old key is gone.
    vi.setSystemTime(t0 + 11 * MIN);
    await verifier.verify(await token(fresh, 'n2'));
    await fetchesReach(jwks, 3);
    let refused: unknown;
    for (let i = 0; i < 50 && refused === undefined; i += 1) {
      refused = await verifier.verify(await token(old, `o${i + 2}`)).then(() => undefined, (err: unknown) => err);
      if (refused === undefined) await sleep(20);
    }
    expect(refused).toMatchObject(invalid('key'));
  });
});

describe('tokens without kid', () => {
  it('verify with whichever key of their algorithm signed them', async () => {
    const [k1, k2, k3] = await Promise.all([newSigningKey('k1'), newSigningKey('k2'), newSigningKey('k3')]);
    const { verifier } = await setup([k1!, k2!, k3!]);
    await expect(verifier.verify(await token(k2!, 'two', { kid: undefined }))).resolves.toMatchObject({ subject: 'two' });
    await expect(verifier.verify(await token(k3!, 'three', { kid: undefined }))).resolves.toMatchObject({ subject: 'three' });
  });

  it('are 401 signature when no key verifies, and keep their own refusal when one does', async () => {
    const [k1, k2, outsider] = await Promise.all([newSigningKey('k1'), newSigningKey('k2'), newSigningKey('x')]);
    const { verifier } = await setup([k1!, k2!]);
    await expect(verifier.verify(await token(outsider!, 'x', { kid: undefined }))).rejects.toMatchObject(invalid('signature'));
    const nowS = Math.floor(Date.now() / 1000);
    const expired = await signToken(k2!, { iss: ISSUER, aud: AUDIENCE, iat: nowS - 7200, exp: nowS - 3600 }, { kid: undefined });
    await expect(verifier.verify(expired)).rejects.toMatchObject(invalid('expired'));
    const foreign = await signToken(k1!, { iss: ISSUER, aud: 'https://other.example/mcp' }, { kid: undefined });
    await expect(verifier.verify(foreign)).rejects.toMatchObject(invalid('audience'));
  });
});
