import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { derivedAuthorization, Expect, malformedAuthorization, materializeAuth } from './auth-arbitraries.js';
import type { AuthRecipe, MaterializedAuth } from './auth-arbitraries.js';
import { CaseCounter, FUZZ_SEED, fuzzParams } from './fuzz-kit.js';
import { authAnswerProblems, INITIALIZE_ID, leaks, refusalLines, secretPieces } from './gateway-auth-checks.js';
import { startAuthGatewayStack } from './gateway-auth-stack.js';
import type { AuthGatewayStack } from './gateway-auth-stack.js';
import { report } from './gateway-checks.js';
import { NoAnswer, PROTOCOL_VERSION } from './gateway-stack.js';
import type { WireRequest, WireResponse } from './gateway-stack.js';

/**
 * Fuzzing the gateway's token validation (`--auth jwt`): fast-check
 * `Authorization` values against a gateway whose keys come from a real
 * issuer (oidc-provider, `@tether/testing`), on a real nats-server, in front
 * of the SDK upstream. The gateway runs in this process with its root
 * logger at `trace` into an array, so every line a request caused is read.
 *
 * Values: malformed ones (empty, a scheme alone, other schemes and cases,
 * non-token68 bytes, Unicode and latin1, 1–5 random segments, credentials
 * near the header limit) and ones made from real tokens (segments shuffled
 * or mixed, the header swapped to `alg: none`/HS256/an unknown or huge
 * `kid`, claims edited under the real signature, the signature cut, junk
 * added), with real tokens mixed in.
 *
 * Properties, checked on every answer:
 * - no 5xx, not even a 503 (the issuer is up the whole run);
 * - a refusal is a 401 with `WWW-Authenticate: Bearer error="invalid_token"`,
 *   a JSON-RPC error body and one `request refused` line at debug; edited
 *   claims under the real signature are refused for `signature`;
 * - a real token still gets the upstream's `initialize` result (200);
 * - no log line, and no refusal, holds the credential or a segment of it;
 * and every few cases the server still answers /healthz, and a real token
 * still goes through at the end.
 *
 * Seed: TETHER_FUZZ_SEED (printed); scale: TETHER_FUZZ_RUNS.
 */

const RUNS = { malformed: 150, derived: 200 } as const;
const HEALTH_EVERY = 10;
/** Real tokens the derived values start from: two per client, so segments of different tokens and subjects mix. */
const BANK_CLIENTS = ['client-a', 'client-b', 'client-a', 'client-b'] as const;

const counter = new CaseCounter();
const started = performance.now();
let stack: AuthGatewayStack;
let bank: string[] = [];

beforeAll(async () => {
  console.log(`gateway auth fuzz: seed ${FUZZ_SEED} (TETHER_FUZZ_SEED to change it)`);
  stack = await startAuthGatewayStack();
  bank = await Promise.all(BANK_CLIENTS.map((c) => stack.mint(c)));
});

afterAll(async () => {
  // A drain that throws is a finding too.
  await stack?.stop();
  console.log(counter.summary('gateway-auth', performance.now() - started));
});

const INITIALIZE = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: INITIALIZE_ID, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'fuzz-auth', version: '0' } } }));

/** The request a case sends: a valid-looking MCP request of `method` carrying the fuzzed `Authorization`; tokens owed acceptance always send `initialize`. */
function requestOf(auth: MaterializedAuth, method: string, sessionId?: string): WireRequest {
  const owedAnswer = auth.expect === Expect.accepted;
  const m = owedAnswer && sessionId === undefined ? 'POST' : method;
  const headers: Record<string, string> = { authorization: auth.value, 'mcp-protocol-version': PROTOCOL_VERSION, accept: m === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream' };
  if (sessionId !== undefined) headers['mcp-session-id'] = sessionId;
  if (m === 'POST') headers['content-type'] = 'application/json';
  return { method: m, path: '/mcp', headers, body: m === 'POST' ? INITIALIZE : undefined };
}

async function exchange(title: string, req: WireRequest): Promise<WireResponse> {
  try {
    const res = await stack.send(req);
    counter.time(title, res.elapsedMs);
    return res;
  } catch (err) {
    if (err instanceof NoAnswer) throw new Error(report(`${title}: no answer`, req, undefined, [err.message], stack.logLines.slice(-8)));
    throw err;
  }
}

async function runCase(property: string, recipe: AuthRecipe, method: string): Promise<void> {
  counter.hit(property);
  const auth = materializeAuth(recipe, bank);
  const req = requestOf(auth, method);
  const mark = stack.logLines.length;
  const res = await exchange(property, req);
  const lines = stack.logLines.slice(mark);
  const pieces = secretPieces(auth.credential);
  const answer = `${Object.entries(res.headers).map(([k, v]) => `${k}: ${v}`).join('\n')}\n${res.body}`;
  const problems = [
    ...authAnswerProblems(auth, res, lines, stack.origin),
    ...leaks(pieces, lines, 'a log line'),
    ...(res.status === 401 ? leaks(pieces, [answer], 'the refusal') : []),
  ];
  if (problems.length > 0) throw new Error(report(`${property} (${recipe.t}, owed: ${auth.expect})`, req, res, problems, lines.slice(-8)));
  const reason = refusalLines(lines)[0]?.reason;
  counter.note(property, `${recipe.t} ${res.status}${reason === undefined ? '' : ` ${String(reason)}`}`);
  // An accepted token opened a session: end it with the same token (DELETE goes through too), so sessions do not pile up.
  const sessionId = res.headers['mcp-session-id'];
  if (res.status === 200 && sessionId !== undefined) {
    const end = await exchange(property, requestOf(auth, 'DELETE', sessionId));
    if (end.status >= 300) throw new Error(report(`${property}: DELETE with the accepted token`, requestOf(auth, 'DELETE', sessionId), end, [`answered ${end.status}`], []));
  }
  if (counter.count(property) % HEALTH_EVERY === 0) {
    const health = await stack.healthy();
    if (!health.ok) throw new Error(`after ${counter.count(property)} cases of ${property}: ${health.why}`);
  }
}

/** Methods the refusals come on: the auth check runs before the method is looked at, so every one is a 401. */
const method = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT', 'OPTIONS');

async function realTokenGoesThrough(): Promise<void> {
  const auth = materializeAuth({ t: 'valid', scheme: { text: 'Bearer ', ok: true }, pick: 0 }, bank);
  const res = await stack.send(requestOf(auth, 'POST'));
  expect(authAnswerProblems(auth, res, [], stack.origin)).toEqual([]);
}

describe('tether-gateway --auth jwt under fuzzed Authorization headers', () => {
  it('refuses malformed headers and tokens with a 401 invalid_token challenge and a JSON-RPC error, never a 5xx, and never logs them', async () => {
    const property = 'gateway-auth-malformed';
    await fc.assert(
      fc.asyncProperty(malformedAuthorization, method, (recipe, m) => runCase(property, recipe, m)),
      fuzzParams(RUNS.malformed),
    );
    expect((await stack.healthy()).ok).toBe(true);
    await realTokenGoesThrough();
  });

  it('accepts real tokens, refuses every token taken apart, re-headed, re-claimed (for its signature), cut or padded with junk, and never logs one', async () => {
    const property = 'gateway-auth-derived';
    await fc.assert(
      fc.asyncProperty(derivedAuthorization, method, (recipe, m) => runCase(property, recipe, m)),
      fuzzParams(RUNS.derived),
    );
    expect((await stack.healthy()).ok).toBe(true);
    await realTokenGoesThrough();
    // Not vacuous: real tokens went through, and edited claims reached the signature check.
    const outcomes = [...counter.outcomes(property).keys()].join(' | ');
    expect(outcomes).toMatch(/valid 200/);
    expect(outcomes).toMatch(/claims 401 signature/);
  });

  it('logged no piece of any real token in the whole run', () => {
    expect(stack.logLines.length).toBeGreaterThan(0);
    expect(bank.flatMap((token) => leaks(secretPieces(token), stack.logLines, 'a log line'))).toEqual([]);
  });
});
