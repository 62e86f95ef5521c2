import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { derivedAuthorization, malformedAuthorization } from './auth-arbitraries.js';
import type { BankToken } from './auth-arbitraries.js';
import { credentialOf, HEADER_LIMIT_SLACK, headerCase, materializeCase, refusedMethod, route, singleLineCase } from './auth-header-arbitraries.js';
import type { HeaderCase } from './auth-header-arbitraries.js';
import { answerProblems, leaks, received, refusalLines, secretPieces, upstreamProblems } from './gateway-auth-checks.js';
import { ROUTES, startAuthGatewayStack } from './gateway-auth-stack.js';
import type { AuthGatewayStack } from './gateway-auth-stack.js';
import { report } from './gateway-checks.js';
import { NoAnswer, PROTOCOL_VERSION } from './gateway-stack.js';
import type { WireResponse } from './gateway-stack.js';
import { CaseCounter, FUZZ_SEED, fuzzParams } from './fuzz-kit.js';
import { rawRequest } from './raw-request.js';
import type { RawRequest } from './raw-request.js';

/**
 * Fuzzing the gateway's token validation (`--auth jwt`): fast-check
 * requests against a gateway whose keys come from a real issuer
 * (oidc-provider, `@tether/testing`), on a real nats-server, with two
 * routes, each its own protected resource on its own SDK upstream: `/mcp`
 * (strip: the upstream gets the verified principal, no token) and `/b`
 * (forward: the upstream gets the caller's token). Requests go out on
 * node:http with raw header lines (fetch would join two `Authorization`
 * values). The gateway runs in this process with its root logger at
 * `trace` into an array, so every line a request caused is read.
 *
 * Values: malformed ones (empty, a scheme alone, other schemes and cases,
 * non-token68 bytes, Unicode and latin1, 1–5 random segments, credentials
 * near the header limit) and ones made from real tokens (segments shuffled
 * or mixed, the header swapped to `alg: none`/HS256/an unknown or huge
 * `kid`, claims edited under the real signature, the signature cut, junk
 * added), with real tokens of either route mixed in, sent to either route.
 * Header lines: 0–3 `Authorization` in any case with spaces and tabs
 * around, `Tether-Principal`/`Tether-Identity` and proxies' identity
 * headers from the client, a line padded under, at and past
 * `--max-header-bytes`.
 *
 * Properties, checked on every answer (gateway-auth-checks.ts): a real
 * token on its own route gets its upstream's `initialize` result (200),
 * and that upstream alone is called: with no `Authorization` and exactly
 * the token's principal (strip), or exactly that token (forward); on the
 * other route it is a 401 with that route's challenge and no upstream
 * hears of it; two `Authorization` lines are a 400 invalid_request; none
 * or an empty one a 401 without an error code; a block past the limit a
 * 431; every refusal has its challenge, a JSON-RPC error body and one
 * `request refused` line, and no upstream is called; never a 5xx; no log
 * line or answer holds a credential or a segment of it. Every few cases
 * the server still answers /healthz; real tokens go through at the end;
 * the strip route's upstream saw no `Authorization` in the whole run.
 *
 * Seed: TETHER_FUZZ_SEED (printed); scale: TETHER_FUZZ_RUNS.
 */

const RUNS = { malformed: 100, derived: 120, headers: 120 } as const;
const HEALTH_EVERY = 10;
/** Real tokens the derived values start from: two per client and route, so segments of different tokens, subjects and audiences mix. */
const BANK_CLIENTS = ['client-a', 'client-b', 'client-a', 'client-b'] as const;

const counter = new CaseCounter();
const started = performance.now();
let stack: AuthGatewayStack;
let bank: BankToken[] = [];

beforeAll(async () => {
  console.log(`gateway auth fuzz: seed ${FUZZ_SEED} (TETHER_FUZZ_SEED to change it)`);
  stack = await startAuthGatewayStack();
  bank = await Promise.all(ROUTES.flatMap((r) => BANK_CLIENTS.map(async (clientId) => ({ token: await stack.mint(clientId, r), route: r, clientId }))));
});

afterAll(async () => {
  // A drain that throws is a finding too.
  await stack?.stop();
  console.log(counter.summary('gateway-auth', performance.now() - started));
});

async function exchange(title: string, req: RawRequest): Promise<WireResponse> {
  try {
    const res = await stack.send(req);
    counter.time(title, res.elapsedMs);
    return res;
  } catch (err) {
    if (err instanceof NoAnswer) throw new Error(report(`${title}: no answer`, req, undefined, [err.message], stack.logLines.slice(-8)));
    throw err;
  }
}

/** One case: the request, then what the answer, the log and both upstreams owe it (and a DELETE of the session an accepted one opened). */
async function runCase(property: string, c: HeaderCase, label: string): Promise<void> {
  counter.hit(property);
  const m = materializeCase(c, bank, stack.origin, stack.issuer.issuer, stack.maxHeaderBytes);
  const to = stack.routes[c.route];
  const mark = stack.logLines.length;
  const upstreamMark = stack.upstreamMark();
  const res = await exchange(property, m.req);
  const lines = stack.logLines.slice(mark);
  const pieces = m.authorization.map(credentialOf).flatMap(secretPieces);
  const answer = `${Object.entries(res.headers).map(([k, v]) => `${k}: ${v}`).join('\n')}\n${res.body}`;
  const sent = m.authorization.length === 1 ? m.authorization[0] : undefined;
  const problems = [
    ...answerProblems(m, to, res, lines),
    ...upstreamProblems(res.status === 431 ? { t: 'too_large' } : m.owed, to, stack.routes, stack.upstreamSince(upstreamMark), sent, stack.issuer.issuer),
    ...leaks(pieces, lines, 'a log line'),
    ...leaks(pieces, [answer], 'the answer'),
  ];
  if (problems.length > 0) throw new Error(report(`${property} (${label} to ${to.path}, owed: ${JSON.stringify(m.owed).slice(0, 200)})`, m.req, res, problems, lines.slice(-8)));
  const reason = refusalLines(lines)[0]?.reason;
  counter.note(property, `${label} ${res.status}${reason === undefined ? '' : ` ${String(reason)}`}`);
  // An accepted token opened a session: end it with the same line (DELETE goes through too, to the same upstream), so sessions do not pile up.
  const sessionId = res.headers['mcp-session-id'];
  if (res.status === 200 && sessionId !== undefined) {
    const auth = m.req.headers.find(([name]) => name.toLowerCase() === 'authorization')!;
    const end = rawRequest(stack.origin, 'DELETE', to.path, [auth, ['mcp-session-id', sessionId], ['mcp-protocol-version', PROTOCOL_VERSION]], undefined);
    const endMark = stack.upstreamMark();
    const ended = await exchange(property, end);
    const endProblems = [...(ended.status >= 300 ? [`answered ${ended.status}`] : []), ...upstreamProblems(m.owed, to, stack.routes, stack.upstreamSince(endMark), sent, stack.issuer.issuer)];
    if (endProblems.length > 0) throw new Error(report(`${property}: DELETE with the accepted token`, end, ended, endProblems, []));
  }
  if (counter.count(property) % HEALTH_EVERY === 0) {
    const health = await stack.healthy();
    if (!health.ok) throw new Error(`after ${counter.count(property)} cases of ${property}: ${health.why}`);
  }
}

/** A case's shape for the summary: how many `Authorization` lines, identity lines or not, padded where and to which side of the limit. */
function headerLabel(c: HeaderCase): string {
  const side = (offset: number): string => (offset < -HEADER_LIMIT_SLACK ? 'under' : offset > HEADER_LIMIT_SLACK ? 'over' : 'edge');
  return `${c.auth.length}×auth${c.identity.length > 0 ? '+id' : ''}${c.padding === undefined ? '' : ` ${c.padding.on}-${side(c.padding.offset)}`}`;
}

/** A real token of each route still goes through on its own route. */
async function realTokensGoThrough(): Promise<void> {
  expect((await stack.healthy()).ok).toBe(true);
  for (const r of ROUTES) await runCase('gateway-auth-final', singleLineCase({ t: 'valid', scheme: { text: 'Bearer ', ok: true }, pick: bank.findIndex((b) => b.route === r) }, r, 'POST'), 'valid');
}

describe('tether-gateway --auth jwt, two routes, under fuzzed Authorization headers', () => {
  it('refuses malformed headers and tokens with the route\'s 401 challenge and a JSON-RPC error, never a 5xx, never calls an upstream, and never logs them', async () => {
    const property = 'gateway-auth-malformed';
    await fc.assert(
      fc.asyncProperty(malformedAuthorization, route, refusedMethod, (recipe, r, m) => runCase(property, singleLineCase(recipe, r, m), recipe.t)),
      fuzzParams(RUNS.malformed),
    );
    await realTokensGoThrough();
  });

  it('accepts a real token on its own route only, refuses every token taken apart, re-headed, re-claimed (for its signature), cut or padded with junk, and never logs one', async () => {
    const property = 'gateway-auth-derived';
    await fc.assert(
      fc.asyncProperty(derivedAuthorization, route, refusedMethod, (recipe, r, m) => runCase(property, singleLineCase(recipe, r, m), recipe.t)),
      fuzzParams(RUNS.derived),
    );
    await realTokensGoThrough();
    // Not vacuous: real tokens went through, others were refused on the other route, and edited claims reached the signature check.
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    expect(outcomes).toMatch(/valid 200/);
    expect(outcomes).toMatch(/valid 401 audience/);
    expect(outcomes).toMatch(/claims 401 signature/);
  });

  it('answers any header lines as owed: two Authorization 400, none or empty 401 without an error code, past the limit 431, odd case and whitespace as the name and value they are', async () => {
    const property = 'gateway-auth-headers';
    await fc.assert(
      fc.asyncProperty(headerCase, (c) => runCase(property, c, headerLabel(c))),
      fuzzParams(RUNS.headers),
    );
    await realTokensGoThrough();
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    for (const seen of [/ 400 repeated_header/, / 401 missing/, / 401 audience/, / 431/, /1×auth\+id 200/]) expect(outcomes).toMatch(seen);
  });

  it('sent no Authorization to the strip route\'s upstream and only /b\'s own tokens to /b\'s, and logged no piece of any real token, in the whole run', () => {
    const strip = stack.routes.mcp.upstream.requests();
    const forward = stack.routes.b.upstream.requests();
    expect(strip.length).toBeGreaterThan(0);
    expect(forward.length).toBeGreaterThan(0);
    expect(strip.flatMap((r) => received(r, 'authorization'))).toEqual([]);
    const forB = new Set(bank.filter((b) => b.route === 'b').map((b) => `Bearer ${b.token}`));
    expect(forward.flatMap((r) => received(r, 'authorization').map((v) => v.replace(/^bearer +/i, 'Bearer '))).filter((v) => !forB.has(v))).toEqual([]);
    expect(stack.logLines.length).toBeGreaterThan(0);
    expect(bank.flatMap((b) => leaks(secretPieces(b.token), stack.logLines, 'a log line'))).toEqual([]);
  });
});
