import fc from 'fast-check';
import { identityPrincipal } from '@tether/session-log';
import { derivedAuthorization, Expect, goodScheme, malformedAuthorization, materializeAuth } from './auth-arbitraries.js';
import type { AuthRecipe, BankToken, MaterializedAuth } from './auth-arbitraries.js';
import { ROUTES } from './gateway-auth-stack.js';
import type { RouteName } from './gateway-auth-stack.js';
import { PROTOCOL_VERSION } from './gateway-stack.js';
import { fieldText } from './http-arbitraries.js';
import { fieldBytes, rawRequest } from './raw-request.js';
import type { RawRequest } from './raw-request.js';

/**
 * Arbitraries of whole requests to the two-route `--auth jwt` stack: which
 * route, which method, and the header lines, as recipes. Each recipe is
 * materialized against the bank of real tokens into the request on the
 * wire and what the gateway owes it (`Owed`), which the checks hold the
 * answer, the log and both upstreams to.
 */

/** The `initialize` every request that may be accepted sends (so its answer is the upstream's). */
export const INITIALIZE_ID = 1;
const INITIALIZE = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: INITIALIZE_ID, method: 'initialize', params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'fuzz-auth', version: '0' } } }));

/** One `Authorization` line: the name in some case, the value with optional whitespace (OWS, RFC 9110 5.6.3) around it. */
export interface AuthLine {
  readonly name: string;
  readonly recipe: AuthRecipe;
  readonly before: string;
  readonly after: string;
}

/** A header a client might hope the upstream takes for its identity: the gateway's own `Tether-*` ones, a proxy's. */
export interface IdentityLine {
  readonly name: string;
  readonly value: { readonly t: 'text'; readonly text: string } | { readonly t: 'principal'; readonly clientId: string };
}

/**
 * A header line sized to bring the request's field bytes to `limit +
 * offset`: on an `Authorization` line (appended to the last one's value,
 * or a new line when there is none) or another line.
 */
export interface Padding {
  readonly on: 'authorization' | 'x-fuzz-padding' | 'mcp-param-padding' | 'tether-identity';
  readonly offset: number;
  readonly fill: string;
}

export interface HeaderCase {
  readonly route: RouteName;
  readonly method: string;
  readonly auth: readonly AuthLine[];
  readonly identity: readonly IdentityLine[];
  readonly padding: Padding | undefined;
}

/**
 * Bytes either side of `--max-header-bytes` where Node may or may not
 * answer 431: it counts names and values and a little more, by how many
 * lines there are (raw-request.ts, `fieldBytes`).
 */
export const HEADER_LIMIT_SLACK = 256;

/** Methods the refusals come on: the auth check runs before the method is looked at, so each is refused the same. */
export const refusedMethod = fc.constantFrom('POST', 'POST', 'POST', 'GET', 'DELETE', 'PUT', 'OPTIONS');
export const route = fc.constantFrom(...ROUTES);

const ows = fc.constantFrom('', '', '', '', ' ', '\t', '  ', ' \t', '\t \t');
const authName = fc.constantFrom('authorization', 'authorization', 'Authorization', 'AUTHORIZATION', 'aUTHORIZATION', 'AuThOrIzAtIoN');
/** A real token as a client sends it (half of them minted for the other route). */
const realToken: fc.Arbitrary<AuthRecipe> = fc.record({ t: fc.constant('valid' as const), scheme: goodScheme, pick: fc.nat() });
const emptyValue: fc.Arbitrary<AuthRecipe> = fc.constantFrom('', ' ', '\t', ' \t ').map((value) => ({ t: 'free' as const, value }));

const authLine: fc.Arbitrary<AuthLine> = fc.record({
  name: authName,
  recipe: fc.oneof({ weight: 5, arbitrary: realToken }, { weight: 2, arbitrary: malformedAuthorization }, { weight: 2, arbitrary: derivedAuthorization }, { weight: 2, arbitrary: emptyValue }),
  before: ows,
  after: ows,
});

const identityLine: fc.Arbitrary<IdentityLine> = fc.record({
  name: fc.constantFrom('Tether-Principal', 'tether-principal', 'TETHER-PRINCIPAL', 'Tether-Identity', 'tether-identity', 'X-Forwarded-User', 'X-Auth-Request-User', 'X-Tether-Principal'),
  value: fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom('client-a', 'client-b').map((clientId) => ({ t: 'principal' as const, clientId })) },
    { weight: 2, arbitrary: fc.oneof(fc.constantFrom('', ' ', 'admin', 'client-b', 'eyJpc3MiOiJ4Iiwic3ViIjoiYWRtaW4ifQ'), fieldText(40)).map((text) => ({ t: 'text' as const, text })) },
  ),
});

const padding: fc.Arbitrary<Padding> = fc.record({
  on: fc.constantFrom('authorization' as const, 'authorization' as const, 'x-fuzz-padding' as const, 'mcp-param-padding' as const, 'tether-identity' as const),
  offset: fc.oneof(
    // Under: every such request is the gateway's to judge.
    { weight: 2, arbitrary: fc.integer({ min: -3_000, max: -HEADER_LIMIT_SLACK - 1 }) },
    // At the edge: 431 or the gateway's verdict.
    { weight: 1, arbitrary: fc.integer({ min: -HEADER_LIMIT_SLACK, max: HEADER_LIMIT_SLACK }) },
    // Over: 431 from the server's clientError path, never a handler.
    { weight: 2, arbitrary: fc.integer({ min: HEADER_LIMIT_SLACK + 1, max: 48 * 1024 }) },
  ),
  fill: fc.oneof(fc.string({ unit: fc.constantFrom(...'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~+/'), minLength: 1, maxLength: 32 }), fieldText(16).filter((s) => s.trim() !== '')),
});

/** Requests with any header lines: 0–3 `Authorization` (two or more are a 400), identity headers, padding near and past the limit. */
export const headerCase: fc.Arbitrary<HeaderCase> = fc.record({
  route,
  method: refusedMethod,
  auth: fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 3, arbitrary: fc.array(authLine, { minLength: 1, maxLength: 1 }) }, { weight: 4, arbitrary: fc.array(authLine, { minLength: 2, maxLength: 3 }) }),
  identity: fc.oneof({ weight: 1, arbitrary: fc.constant([]) }, { weight: 2, arbitrary: fc.array(identityLine, { minLength: 1, maxLength: 3 }) }),
  padding: fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: padding }),
});

/** A request of one plain `Authorization` line (the value recipes' own properties). */
export function singleLineCase(recipe: AuthRecipe, to: RouteName, method: string): HeaderCase {
  return { route: to, method, auth: [{ name: 'authorization', recipe, before: '', after: '' }], identity: [], padding: undefined };
}

/** What the gateway owes a request, by the first rule that applies. */
export type Owed =
  /** The field bytes are past the limit: 431 from the HTTP server, the gateway's handler never runs. */
  | { readonly t: 'too_large' }
  /** Two or more `Authorization` lines: 400 invalid_request. */
  | { readonly t: 'repeated' }
  /** None, or an empty one: 401 with the route's challenge and no error code (RFC 6750 section 3.1). */
  | { readonly t: 'no_credentials' }
  /** 401 invalid_token with the route's challenge; for `reason` when the suite knows it. */
  | { readonly t: 'refused'; readonly reason: 'audience' | 'signature' | undefined }
  /** A real token on the route it was minted for: the route's upstream answers. */
  | { readonly t: 'accepted'; readonly token: BankToken };

export interface MaterializedCase {
  readonly req: RawRequest;
  readonly owed: Owed;
  /** Near the limit: a 431 is as right as `owed`. */
  readonly mayBeTooLarge: boolean;
  /** Every `Authorization` value sent, trimmed as the server reads it. */
  readonly authorization: readonly string[];
}

/** HTTP's optional whitespace, as a server strips it around a field value. */
export const trimOws = (value: string): string => value.replace(/^[ \t]+|[ \t]+$/g, '');

/**
 * The credential of an `Authorization` value: what follows the scheme and
 * its spaces or tabs (the whole value when it has none). What must never be
 * logged or echoed; the scheme may be (`Bearer e` is in every challenge).
 */
export const credentialOf = (value: string): string => trimOws(value).replace(/^[^ \t]+[ \t]+/, '');

/** The request on the wire and what it is owed; `issuer` names the principals identity lines may claim. */
export function materializeCase(c: HeaderCase, bank: readonly BankToken[], origin: string, issuer: string, maxHeaderBytes: number): MaterializedCase {
  const auths = c.auth.map((line) => ({ line, auth: materializeAuth(line.recipe, bank) }));
  const values = auths.map(({ line, auth }) => `${line.before}${auth.value}${line.after}`);
  const single = auths.length === 1 ? auths[0]!.auth : undefined;
  let owed = ownedByAuth(c.route, values, single);
  // Only a request the route's upstream may answer sends the initialize it answers.
  const method = owed.t === 'accepted' ? 'POST' : c.method;
  const lines: [string, string][] = auths.map(({ line }, i) => [line.name, values[i]!]);
  for (const id of c.identity) lines.push([id.name, id.value.t === 'text' ? id.value.text : identityPrincipal(issuer, id.value.clientId)]);
  lines.push(['accept', method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream'], ['mcp-protocol-version', PROTOCOL_VERSION]);
  const body = method === 'POST' || method === 'PUT' ? INITIALIZE : undefined;
  if (body !== undefined) lines.push(['content-type', 'application/json']);
  let req = rawRequest(origin, method, `/${c.route}`, lines, body);
  if (c.padding !== undefined) {
    const p = c.padding;
    // The padded line without its fill first, then as much fill as the target needs (ending in a visible
    // character, which no server strips: appended to a token, it makes it no token of the bank).
    const last = lines.findLastIndex(([name]) => name.toLowerCase() === 'authorization');
    const at = p.on === 'authorization' && last >= 0 ? last : lines.length;
    const base = p.on !== 'authorization' ? '' : at === last && trimOws(lines[at]![1]) !== '' ? lines[at]![1] : 'Bearer ';
    lines[at] = [at === last ? lines[at]![0] : p.on, base];
    const missing = Math.max(1, maxHeaderBytes + p.offset - fieldBytes(rawRequest(origin, method, `/${c.route}`, lines, body)));
    lines[at] = [lines[at]![0], `${base}${p.fill.repeat(Math.ceil(missing / p.fill.length)).slice(0, missing - 1)}x`];
    if (p.on === 'authorization') owed = ownedByAuth(c.route, lines.filter(([n]) => n.toLowerCase() === 'authorization').map(([, v]) => v), undefined);
    req = rawRequest(origin, method, `/${c.route}`, lines, body);
  }
  const bytes = fieldBytes(req);
  const authorization = lines.filter(([n]) => n.toLowerCase() === 'authorization').map(([, v]) => trimOws(v));
  if (bytes > maxHeaderBytes + HEADER_LIMIT_SLACK) owed = { t: 'too_large' };
  return { req, owed, mayBeTooLarge: bytes >= maxHeaderBytes - HEADER_LIMIT_SLACK, authorization };
}

/**
 * The gateway's verdict on the `Authorization` lines (`values` as sent),
 * sent to `to`; `single` is the one line's materialized recipe, when it
 * is unchanged (without it a lone non-empty value is refused).
 */
function ownedByAuth(to: RouteName, values: readonly string[], single: MaterializedAuth | undefined): Owed {
  if (values.length >= 2) return { t: 'repeated' };
  if (values.length === 0 || trimOws(values[0]!) === '') return { t: 'no_credentials' };
  if (single === undefined || single.expect === Expect.refused) return { t: 'refused', reason: undefined };
  if (single.expect === Expect.refusedSignature) return { t: 'refused', reason: 'signature' };
  return single.real!.route === to ? { t: 'accepted', token: single.real! } : { t: 'refused', reason: 'audience' };
}
