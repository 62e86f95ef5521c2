/**
 * Figure 6: what token validation (`--auth jwt`) adds per request. The rows
 * of figure 1, each called directly, through a gateway without auth, through
 * a second one without auth, and through a third on `--auth jwt` that
 * verifies a Bearer JWT from a real issuer (oidc-provider from
 * `@tether/testing`, RS256) on every request, in one rotation, so drift and
 * GC hit every side alike. The three start together with the same flags but
 * the auth ones, so none is warmer or carries more state (figure 1's gateway
 * has served its rows by then). The two without auth differ by noise only:
 * their gap (A/A) is the resolution against which the added time is read.
 *
 * Warm: one token per client, reused, as a real client does (the gateway
 * verifies it once, then finds its SHA-256 in its cache). Fresh: a new token
 * on every request, minted up front, so each pays a signature verification.
 */
import { getFreePort, startAuthorizationServer } from '@tether/testing';
import type { AuthorizationServer } from '@tether/testing';
import { ms, progress, table } from '../stats.js';
import type { Processes } from './cpu.js';
import { withCpu } from './cpu.js';
import { caller, LATENCY_ROWS } from './latency.js';
import type { UpstreamAnswer } from './latency.js';
import type { BenchStack, GatewayProcess } from './stack.js';
import { summarize95 } from './summary.js';
import type { Summary95 } from './summary.js';

/** Outlives any run: an expiry mid-run would measure a refusal. */
const TOKEN_TTL_S = 3 * 3600;
const CLIENT_ID = 'client-a';
const MINT_CONCURRENCY = 16;

export type TokenUse = 'warm' | 'fresh';

export interface AuthLatencyRow {
  readonly name: string;
  readonly tokens: TokenUse;
  readonly direct: Summary95;
  /** Both gateways without auth, their calls pooled (n twice the others'). */
  readonly gateway: Summary95;
  /** The gateway on `--auth jwt`. */
  readonly jwt: Summary95;
  /** jwt − gateway, per percentile. */
  readonly addedP50Ms: number;
  readonly addedP99Ms: number;
  /** The second gateway without auth minus the first: what two gateways differ by in the same rotation. */
  readonly aaP50Ms: number;
  readonly aaP99Ms: number;
  /** CPU ms per call: the gateways without auth (their mean), the `--auth jwt` one. */
  readonly gatewayCpuMs: number;
  readonly jwtCpuMs: number;
  readonly otherCores: number;
}

export interface JwtGateways {
  /** On `--auth jwt`. */
  readonly gateway: GatewayProcess;
  /** The same flags without auth, started with it: the baseline, and the A/A control. */
  readonly plain: readonly [GatewayProcess, GatewayProcess];
  readonly issuer: AuthorizationServer;
  /** The `--auth jwt` gateway's URL per upstream answer (`/mcp`, `/json`): also each route's resource URI (`--auth-audience`), the `aud` of its tokens. */
  readonly url: Readonly<Record<UpstreamAnswer, string>>;
  /** One access token for the route's resource (client_credentials). */
  mint(answer: UpstreamAnswer): Promise<string>;
  close(): Promise<void>;
}

/** A gateway on `--auth jwt` and two twins without auth, beside the stack's other gateways, and the issuer in this process (idle while calls are timed). */
export async function startJwtGateways(stack: BenchStack, nodeArgs: readonly string[]): Promise<JwtGateways> {
  const port = await getFreePort();
  const url = { sse: `http://127.0.0.1:${port}/mcp`, json: `http://127.0.0.1:${port}/json` };
  const issuer = await startAuthorizationServer({ resources: [url.sse, url.json], accessTokenTtlSeconds: TOKEN_TTL_S });
  const route = ['--route', `/json=${stack.jsonUpstream.url}`];
  const started: GatewayProcess[] = [];
  const close = async (): Promise<void> => {
    await Promise.all(started.map((g) => g.process.stop('SIGTERM', 15_000)));
    await issuer.close();
  };
  try {
    const auth = ['--auth', 'jwt', '--auth-issuer', issuer.issuer, '--auth-audience', url.sse, '--auth-audience', `/json=${url.json}`, '--auth-jwks-url', issuer.jwksUri];
    // Started in the order plain, jwt, plain: the two plain ones bracket the jwt one (start order can matter on two cores).
    const start = async (name: string, extra: { port?: number; args: readonly string[] }): Promise<GatewayProcess> => {
      const g = await stack.startGateway({ name, nodeArgs, ...extra });
      started.push(g);
      return g;
    };
    const first = await start('gw-plain', { args: route });
    const gateway = await start('gw-jwt', { port, args: [...route, ...auth] });
    const second = await start('gw-plain-2', { args: route });
    return {
      gateway,
      plain: [first, second],
      issuer,
      url,
      mint: async (answer) => (await issuer.clientCredentials(CLIENT_ID, { resource: url[answer] })).access_token,
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

export interface AuthLatencyOptions {
  readonly stack: BenchStack;
  /** Node flags of the three gateways (those of the other gateways). */
  readonly nodeArgs: readonly string[];
  /** The processes to account CPU to, given the upstream of the row; `gateway` is set to the first plain gateway, `gateway-2` and `gateway-jwt` added. */
  readonly processes: (upstreamPid: number) => Processes;
  readonly warmup: number;
  readonly calls: number;
  /** Timed calls of the fresh-token row (as many tokens are minted, plus the warm-up's). */
  readonly freshCalls: number;
  readonly onRow: (row: AuthLatencyRow) => void;
}

export interface FreshTokens {
  readonly count: number;
  readonly mintMs: number;
}

/**
 * Starts the two gateways and the issuer, measures the four rows of figure 1
 * with warm tokens, then the fresh-token row (raw client, JSON upstream: the
 * smallest baseline), and stops them.
 */
export async function measureAuthLatency(options: AuthLatencyOptions): Promise<FreshTokens> {
  const jwt = await startJwtGateways(options.stack, options.nodeArgs);
  try {
    return await measureWith(jwt, options);
  } finally {
    await jwt.close();
  }
}

async function measureWith(jwt: JwtGateways, options: AuthLatencyOptions): Promise<FreshTokens> {
  for (const [name, client, answer] of LATENCY_ROWS) {
    const token = await jwt.mint(answer);
    options.onRow(await measureRow(jwt, options, name, client, answer, 'warm', () => token, options.calls));
  }
  // Opening the session takes two requests (initialize, notifications/initialized), each with a token of its own.
  const count = 2 + options.warmup + options.freshCalls;
  progress(`auth: minting ${count} tokens from the issuer (client_credentials, ${MINT_CONCURRENCY} at a time)`);
  const started = performance.now();
  const fresh: string[] = [];
  while (fresh.length < count) fresh.push(...(await Promise.all(Array.from({ length: Math.min(MINT_CONCURRENCY, count - fresh.length) }, () => jwt.mint('json')))));
  const mintMs = performance.now() - started;
  progress(`auth: minted ${count} tokens in ${(mintMs / 1000).toFixed(1)} s (${ms(mintMs / count)} ms each)`);
  let next = 0;
  const freshToken = (): string => {
    const token = fresh[next];
    if (token === undefined) throw new Error(`the fresh-token row ran out of its ${count} tokens`);
    next += 1;
    return token;
  };
  options.onRow(await measureRow(jwt, options, 'raw client, JSON upstream (pass-through)', 'raw', 'json', 'fresh', freshToken, options.freshCalls));
  return { count, mintMs };
}

async function measureRow(
  jwt: JwtGateways,
  options: AuthLatencyOptions,
  name: string,
  client: 'sdk' | 'raw',
  answer: UpstreamAnswer,
  tokens: TokenUse,
  authorization: () => string,
  calls: number,
): Promise<AuthLatencyRow> {
  progress(`auth: ${name}, ${tokens} token${tokens === 'fresh' ? ' per request' : ''}, ${calls} calls each way`);
  // The fresh row's client opens its session with a token too: the first fresh one.
  const bearer = (): string => `Bearer ${authorization()}`;
  const upstream = answer === 'sse' ? options.stack.sseUpstream : options.stack.jsonUpstream;
  const via = (g: GatewayProcess): string => `${g.origin}${answer === 'sse' ? '/mcp' : '/json'}`;
  const sides = await Promise.all([caller(client, upstream.url), caller(client, via(jwt.plain[0])), caller(client, via(jwt.plain[1])), caller(client, jwt.url[answer], bearer)]);
  const samples: number[][] = sides.map(() => []);
  try {
    for (let i = 0; i < options.warmup; i += 1) for (const side of sides) await side.call();
    const processes = { ...options.processes(upstream.process.pid), gateway: jwt.plain[0].pid, 'gateway-2': jwt.plain[1].pid, 'gateway-jwt': jwt.gateway.pid };
    const run = await withCpu(processes, async () => {
      for (let i = 0; i < calls; i += 1) {
        // Rotate which goes first, so no side always follows the same one (or its GC).
        for (let j = 0; j < sides.length; j += 1) {
          const k = (i + j) % sides.length;
          samples[k]!.push(await sides[k]!.call());
        }
      }
    });
    const [direct, first, second, authed] = samples.map((s) => summarize95(s)) as [Summary95, Summary95, Summary95, Summary95];
    // The baseline pools both gateways without auth: started before and after the jwt one, they bracket it.
    const gateway = summarize95([...samples[1]!, ...samples[2]!]);
    const row: AuthLatencyRow = {
      name,
      tokens,
      direct,
      gateway,
      jwt: authed,
      addedP50Ms: authed.p50 - gateway.p50,
      addedP99Ms: authed.p99 - gateway.p99,
      aaP50Ms: second.p50 - first.p50,
      aaP99Ms: second.p99 - first.p99,
      gatewayCpuMs: ((run.cpuMs['gateway'] ?? Number.NaN) + (run.cpuMs['gateway-2'] ?? Number.NaN)) / 2 / calls,
      jwtCpuMs: (run.cpuMs['gateway-jwt'] ?? Number.NaN) / calls,
      otherCores: run.otherMs / run.wallMs,
    };
    progress(`auth: ${name}, ${tokens}: p50 ${ms(authed.p50)} with --auth jwt vs ${ms(gateway.p50)} ms without: added ${signedMs(row.addedP50Ms)} ms p50, ${signedMs(row.addedP99Ms)} ms p99 (A/A ${signedMs(row.aaP50Ms)} ms p50)`);
    return row;
  } finally {
    await Promise.all(sides.map((s) => s.close()));
  }
}

/** A difference in ms, signed: noise can make it negative. */
export function signedMs(value: number): string {
  return `${value >= 0 ? '+' : '−'}${ms(Math.abs(value))}`;
}

/** Summary lines: the largest added p50 of the warm rows against the target, and the fresh row's for reference. */
export function authSummaryRows(rows: readonly AuthLatencyRow[], targetAddedP50Ms: number, verdict: (met: boolean) => string): string[][] {
  const warm = rows.filter((r) => r.tokens === 'warm');
  const out: string[][] = [];
  if (warm.length > 0) {
    const worst = warm.reduce((a, b) => (b.addedP50Ms > a.addedP50Ms ? b : a));
    out.push([`--auth jwt, added p50 per request, warm token (largest of ${warm.length} rows: ${worst.name})`, `${signedMs(worst.addedP50Ms)} ms`, `${ms(worst.gateway.p50)} ms gw without auth; A/A ${signedMs(worst.aaP50Ms)} ms`, '', `≤ ${targetAddedP50Ms} ms`, verdict(worst.addedP50Ms <= targetAddedP50Ms)]);
  }
  for (const r of rows.filter((x) => x.tokens === 'fresh')) {
    out.push([`--auth jwt, added p50 per request, fresh token each (${r.name})`, `${signedMs(r.addedP50Ms)} ms`, `${ms(r.gateway.p50)} ms gw without auth; A/A ${signedMs(r.aaP50Ms)} ms`, '', 'reference', '']);
  }
  return out;
}

/** Section 6 of the report. */
export function renderAuthLatency(rows: readonly AuthLatencyRow[], fresh: FreshTokens | undefined, targetAddedP50Ms: number): string[] {
  if (rows.length === 0) return [];
  return [
    '## 6. Token validation (`--auth jwt`): tools/call `echo` latency (ms), with and without auth, in one rotation',
    '',
    table(
      ['client, upstream answer', 'token', 'n', 'direct p50', 'gw p50', 'gw p99', 'gw+jwt p50', 'gw+jwt p99', 'added p50', 'added p99', 'A/A p50', 'A/A p99', 'gw CPU per call', 'gw+jwt CPU per call', 'other load'],
      rows.map((r) => [
        r.name,
        r.tokens === 'warm' ? 'warm (reused)' : 'fresh per request',
        String(r.jwt.n),
        ms(r.direct.p50),
        ms(r.gateway.p50),
        ms(r.gateway.p99),
        ms(r.jwt.p50),
        ms(r.jwt.p99),
        signedMs(r.addedP50Ms),
        signedMs(r.addedP99Ms),
        signedMs(r.aaP50Ms),
        signedMs(r.aaP99Ms),
        `${ms(r.gatewayCpuMs)} ms`,
        `${ms(r.jwtCpuMs)} ms`,
        `${r.otherCores.toFixed(2)} cores`,
      ]),
    ),
    '',
    'n calls to each side. gw: two gateways without auth, their 2n calls pooled. gw+jwt: one started between them, same flags plus',
    '`--auth jwt` (issuer, audience = its own /mcp and /json URLs, JWKS URL), keys from a real issuer in the benchmark process',
    '(oidc-provider, RS256 2048-bit, idle while calls are timed). added = gw+jwt − gw at that percentile. A/A: the second gateway',
    'without auth minus the first, in the same rotation: the noise of this comparison.',
    `Warm: one client_credentials token per client, reused (verified once, then found by its SHA-256). Target: ≤ ${targetAddedP50Ms} ms added p50.`,
    ...(fresh === undefined
      ? []
      : [`Fresh: a new token on every request (a signature verification each time); ${fresh.count} tokens minted up front in ${(fresh.mintMs / 1000).toFixed(1)} s (${ms(fresh.mintMs / fresh.count)} ms each, ${MINT_CONCURRENCY} at a time).`]),
    '',
  ];
}
