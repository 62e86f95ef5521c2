import { identityPrincipal } from '@tether/session-log';
import type { UpstreamRequest } from '@tether/testing';
import type { BankToken } from './auth-arbitraries.js';
import { INITIALIZE_ID, trimOws } from './auth-header-arbitraries.js';
import type { MaterializedCase, Owed } from './auth-header-arbitraries.js';
import type { RouteName, StackRoute } from './gateway-auth-stack.js';
import { jsonRpcError } from './gateway-checks.js';
import type { WireResponse } from './gateway-stack.js';

/** Pieces of a credential no log line may hold: the whole and each `.` segment, 8 characters or more besides whitespace (shorter ones occur in any text). */
export function secretPieces(credential: string): string[] {
  const pieces = new Set<string>();
  for (const piece of [credential.trim(), ...credential.split('.')]) {
    if (piece.trim().length < 8) continue;
    pieces.add(piece);
    // As it would appear inside a JSON string (a log line is JSON): quotes, backslashes and controls escaped.
    pieces.add(JSON.stringify(piece).slice(1, -1));
  }
  return [...pieces];
}

/** Log lines (or any text) holding a piece of the credential, named by the piece's length and where it sits. */
export function leaks(pieces: readonly string[], texts: readonly string[], where: string): string[] {
  const problems: string[] = [];
  for (const piece of pieces) {
    const hit = texts.find((t) => t.includes(piece));
    if (hit !== undefined) problems.push(`${where} holds ${piece.length} characters of the token: ${hit.slice(0, 400)}`);
  }
  return problems;
}

/** The `request refused` lines among `lines` (pino JSON), parsed. */
export function refusalLines(lines: readonly string[]): { level: unknown; reason: unknown; code: unknown }[] {
  return lines.flatMap((line) => {
    try {
      const json = JSON.parse(line) as { msg?: unknown; level?: unknown; reason?: unknown; code?: unknown };
      return json.msg === 'request refused' ? [{ level: json.level, reason: json.reason, code: json.code }] : [];
    } catch {
      return [];
    }
  });
}

/** A quoted-string of RFC 9110 5.6.4, as the challenge's `error_description` is written. */
const QUOTED = '"(?:[^"\\\\]|\\\\.)*"';
const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

/**
 * What the answer owes the request (`c.owed`) on route `to`; never a 5xx
 * (the issuer and both upstreams are up, so not even a 502 or 503):
 * - too large: 431 and a JSON-RPC error, and no handler ran (no `request
 *   refused` line); near the limit a 431 is as right as the rest;
 * - two `Authorization` lines: 400 `Bearer error="invalid_request"`;
 * - none, or an empty one: 401 whose challenge is exactly `Bearer
 *   resource_metadata="<to's metadata>"`, no error code;
 * - refused: 401 `Bearer error="invalid_token", error_description=…,
 *   resource_metadata="<to's metadata>"` (the route asked, never the one
 *   the token was minted for), for `audience` or `signature` when owed;
 * - every refusal has a JSON-RPC error body and exactly one `request
 *   refused` line at debug with its code;
 * - accepted: 200 with the route's upstream's `initialize` result.
 */
export function answerProblems(c: MaterializedCase, to: StackRoute, res: WireResponse, newLines: readonly string[]): string[] {
  const problems: string[] = [];
  if (res.status >= 500) problems.push(`answered ${res.status}: no 5xx is allowed (the issuer and both upstreams are up)`);
  const refusals = refusalLines(newLines);
  if (c.owed.t === 'too_large' || (c.mayBeTooLarge && res.status === 431)) {
    if (res.status !== 431) problems.push(`answered ${res.status}, not 431, to a header block past --max-header-bytes`);
    if (jsonRpcError(res.body) === undefined) problems.push('the 431 body is not a JSON-RPC error');
    if (refusals.length > 0) problems.push(`a handler ran for a request the server refused (${JSON.stringify(refusals)})`);
    return problems;
  }
  const owed: Owed = c.owed;
  if (owed.t === 'accepted') {
    if (res.status !== 200 || !initializeResult(res.body)) problems.push(`a token minted for ${owed.token.route} answered ${res.status} on ${to.path}, not 200 with the upstream's initialize result`);
    if (refusals.length > 0) problems.push(`a valid token was logged as refused (${JSON.stringify(refusals)})`);
    return problems;
  }
  const challenge = res.headers['www-authenticate'] ?? '';
  const metadata = `resource_metadata="${to.metadataUrl}"`;
  const refusal = { repeated: { status: 400, code: 'invalid_request' }, no_credentials: { status: 401, code: 'invalid_token' }, refused: { status: 401, code: 'invalid_token' } }[owed.t];
  if (res.status !== refusal.status) problems.push(`answered ${res.status}, not ${refusal.status} (owed: ${owed.t}${owed.t === 'refused' && owed.reason !== undefined ? ` for ${owed.reason}` : ''})`);
  const shape =
    owed.t === 'repeated'
      ? new RegExp(`^Bearer error="invalid_request", error_description=${QUOTED}$`)
      : owed.t === 'no_credentials'
        ? new RegExp(`^Bearer ${escape(metadata)}$`)
        : new RegExp(`^Bearer error="invalid_token", error_description=${QUOTED}, ${escape(metadata)}$`);
  if (!shape.test(challenge)) problems.push(`WWW-Authenticate is ${JSON.stringify(challenge)}, not ${shape.source} (${to.path}'s challenge)`);
  if (jsonRpcError(res.body) === undefined) problems.push('the body is not a JSON-RPC error');
  if (refusals.length !== 1) problems.push(`${refusals.length} "request refused" log lines, not 1`);
  const [line] = refusals;
  if (line !== undefined && (line.level !== 20 || line.code !== refusal.code || typeof line.reason !== 'string')) problems.push(`the refusal's log line is ${JSON.stringify(line)}`);
  if (owed.t === 'no_credentials' && line?.reason !== 'missing') problems.push(`no credentials were refused for ${String(line?.reason)}, not missing`);
  if (owed.t === 'refused' && owed.reason !== undefined && line?.reason !== owed.reason) problems.push(`refused for ${String(line?.reason)}, not ${owed.reason}`);
  return problems;
}

/** Every value of header `name` (any case) in a request the upstream received. */
export function received(r: UpstreamRequest, name: string): string[] {
  const values: string[] = [];
  for (let i = 0; i < r.rawHeaders.length; i += 2) if (r.rawHeaders[i]!.toLowerCase() === name) values.push(r.rawHeaders[i + 1]!);
  return values;
}

/** Headers a client may send hoping an upstream takes them for its identity: none may reach one, save the gateway's own. */
const CLIENT_IDENTITY = ['x-forwarded-user', 'x-auth-request-user', 'x-tether-principal'];

/**
 * What one request reaching route `to`'s upstream carries of the caller
 * who presented `token`: on a `strip` route no `Authorization` line at
 * all, and exactly one `Tether-Principal` (the token's principal, never a
 * value the client sent) and one `Tether-Identity` (its `iss` and `sub`);
 * on a `forward` route exactly one `Authorization`, `sent` as the server
 * read it (`Bearer <token>`), and no `Tether-*`. Never a client's own
 * identity header.
 */
export function upstreamCredentialProblems(to: StackRoute, r: UpstreamRequest, token: BankToken, sent: string | undefined, issuer: string): string[] {
  const problems: string[] = [];
  const where = `${to.path}'s upstream (${to.upstreamAuth}) got ${r.method}`;
  const authorization = received(r, 'authorization');
  const principal = received(r, 'tether-principal');
  const identity = received(r, 'tether-identity');
  for (const name of CLIENT_IDENTITY) if (received(r, name).length > 0) problems.push(`${where} with the client's ${name}`);
  if (token.route !== to.name) problems.push(`${where} for a token minted for /${token.route}`);
  if (to.upstreamAuth === 'strip') {
    if (authorization.length > 0) problems.push(`${where} with ${authorization.length} Authorization line(s): strip sends none`);
    if (principal.length !== 1 || principal[0] !== identityPrincipal(issuer, token.clientId)) problems.push(`${where} with Tether-Principal ${JSON.stringify(principal)}, not exactly the principal of ${token.clientId}`);
    const claims = identity.length === 1 ? decodeIdentity(identity[0]!) : undefined;
    if (claims?.iss !== issuer || claims.sub !== token.clientId) problems.push(`${where} with Tether-Identity ${JSON.stringify(identity)}, not exactly ${token.clientId}'s`);
    return problems;
  }
  const credential = /^bearer +([^ ]+)$/i.exec(authorization[0] ?? '')?.[1];
  if (authorization.length !== 1 || credential !== token.token) problems.push(`${where} with ${authorization.length} Authorization line(s), not exactly the token minted for ${to.path}`);
  else if (sent !== undefined && authorization[0] !== trimOws(sent)) problems.push(`${where} with Authorization ${JSON.stringify(authorization[0]!.slice(0, 80))}…, not the value the client sent`);
  if (principal.length + identity.length > 0) problems.push(`${where} with Tether-Principal/Tether-Identity: forward sends neither`);
  return problems;
}

function decodeIdentity(value: string): { iss?: unknown; sub?: unknown } | undefined {
  try {
    return JSON.parse(Buffer.from(value, 'base64url').toString('utf8')) as { iss?: unknown; sub?: unknown };
  } catch {
    return undefined;
  }
}

/**
 * What reached the upstreams while the request was answered: nothing
 * unless it was accepted (a refused token, a second `Authorization`, a
 * header block too large never reach an upstream); an accepted one reaches
 * its own route's upstream only, each request there carrying exactly what
 * `upstreamCredentialProblems` allows.
 */
export function upstreamProblems(owed: Owed, to: StackRoute, routes: Readonly<Record<RouteName, StackRoute>>, since: Readonly<Record<RouteName, readonly UpstreamRequest[]>>, sent: string | undefined, issuer: string): string[] {
  const problems: string[] = [];
  const accepted = owed.t === 'accepted' ? owed.token : undefined;
  for (const route of Object.values(routes)) {
    const got = since[route.name];
    if (accepted === undefined || route.name !== to.name) {
      if (got.length > 0) problems.push(`${route.path}'s upstream got ${got.map((r) => r.method).join(', ')} for a request to ${to.path} owed ${owed.t}`);
      continue;
    }
    if (got.length === 0) problems.push(`${route.path}'s upstream got nothing for an accepted request`);
    for (const r of got) problems.push(...upstreamCredentialProblems(route, r, accepted, sent, issuer));
  }
  return problems;
}

/** The body (JSON, or SSE `data:` lines) holds the JSON-RPC result of our `initialize`. */
export function initializeResult(body: string): boolean {
  const texts = body.trimStart().startsWith('{') ? [body] : body.split(/\r\n|\r|\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5));
  return texts.some((text) => {
    try {
      const m = JSON.parse(text) as { id?: unknown; result?: { protocolVersion?: unknown } };
      return m.id === INITIALIZE_ID && typeof m.result?.protocolVersion === 'string';
    } catch {
      return false;
    }
  });
}
