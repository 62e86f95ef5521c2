/**
 * `npm run bench:auth`: what identifying a caller costs the gateway per
 * request, in-process, for each `--auth` mode: `none` (the digest of the
 * Authorization value, as before), `jwt` with a warm token (verified once,
 * then found by its SHA-256: what a client that reuses its token pays), and
 * `jwt` with a fresh token every time (jose's signature verification). The
 * keys and tokens come from a real issuer (oidc-provider from
 * @tether/testing, RS256, on loopback; idle while calls are timed).
 *
 * The calls of each kind are timed in batches (one hrtime pair per batch,
 * so the clock's cost stays out), rounds alternate the kinds, and the
 * figure is the median of the batches' per-call times. The end-to-end view
 * (a gateway's latency with and without `--auth jwt`) is figure 6 of
 * `npm run bench:gateway`. Never asserts.
 *
 * Knobs: BENCH_AUTH_BATCH (calls per batch, default 2000), BENCH_AUTH_ROUNDS
 * (default 15), BENCH_AUTH_FRESH (fresh tokens minted, default 3000).
 */
import type { IncomingMessage } from 'node:http';
import { cpus } from 'node:os';
import { createAuthenticator, parseConfig } from '@tether/gateway';
import type { Authenticator } from '@tether/gateway';
import { startAuthorizationServer } from '@tether/testing';
import { median } from './stats.js';

const BATCH = Number(process.env.BENCH_AUTH_BATCH ?? 2000);
const ROUNDS = Number(process.env.BENCH_AUTH_ROUNDS ?? 15);
const FRESH = Number(process.env.BENCH_AUTH_FRESH ?? 3000);
const AUDIENCE = 'http://127.0.0.1:8080/mcp';

const request = (authorization: string): IncomingMessage => ({ headers: { authorization }, rawHeaders: ['Authorization', authorization] }) as unknown as IncomingMessage;

/** µs per call over one batch of `requests`. */
async function batch(auth: Authenticator, requests: readonly IncomingMessage[]): Promise<number> {
  const start = process.hrtime.bigint();
  for (const req of requests) await auth.authenticate(req, '/mcp');
  return Number(process.hrtime.bigint() - start) / 1000 / requests.length;
}

const as = await startAuthorizationServer({ resources: [AUDIENCE], accessTokenTtlSeconds: 3600 });
try {
  const none = createAuthenticator(parseConfig(['--upstream', 'http://127.0.0.1:1/mcp'], {}).auth);
  const jwt = createAuthenticator(
    parseConfig(['--upstream', 'http://127.0.0.1:1/mcp', '--auth', 'jwt', '--auth-issuer', as.issuer, '--auth-jwks-url', as.jwksUri, '--auth-audience', AUDIENCE], {}).auth,
  );
  const mint = async (n: number): Promise<string[]> => {
    const out: string[] = [];
    while (out.length < n) out.push(...(await Promise.all(Array.from({ length: Math.min(16, n - out.length) }, async () => (await as.clientCredentials('client-a', { resource: AUDIENCE })).access_token))));
    return out;
  };
  const warmToken = (await mint(1))[0]!;
  const warm = Array.from({ length: BATCH }, () => request(`Bearer ${warmToken}`));
  const fresh = (await mint(FRESH)).map((t) => request(`Bearer ${t}`));
  await jwt.authenticate(warm[0]!, '/mcp'); // the key set is fetched once, here
  const freshBatch = Math.min(BATCH, Math.floor(FRESH / ROUNDS));
  const samples: Record<string, number[]> = { none: [], warm: [], fresh: [] };
  for (let round = 0; round < ROUNDS; round += 1) {
    samples.none!.push(await batch(none, warm));
    samples.warm!.push(await batch(jwt, warm));
    samples.fresh!.push(await batch(jwt, fresh.slice(round * freshBatch, (round + 1) * freshBatch)));
  }
  const base = median(samples.none!);
  console.log(`auth cost per request, in-process (${cpus()[0]?.model ?? 'cpu'} x${cpus().length}, Node ${process.version}); median of ${ROUNDS} batches; µs`);
  console.log('| --auth | calls per batch | µs per call | added to none |');
  console.log('|---|---:|---:|---:|');
  for (const [kind, label, n] of [['none', 'none (digest of the header)', BATCH], ['warm', 'jwt, warm token (cached by SHA-256)', BATCH], ['fresh', 'jwt, fresh token (RS256 verification)', freshBatch]] as const) {
    const value = median(samples[kind]!);
    console.log(`| ${label} | ${n} | ${value.toFixed(2)} | ${kind === 'none' ? '' : `+${(value - base).toFixed(2)}`} |`);
  }
} finally {
  await as.close();
}
