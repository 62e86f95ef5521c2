import { Expect } from './auth-arbitraries.js';
import type { MaterializedAuth } from './auth-arbitraries.js';
import { jsonRpcError } from './gateway-checks.js';
import type { WireResponse } from './gateway-stack.js';

/** The id of the `initialize` request every accepted case sends. */
export const INITIALIZE_ID = 1;

/** Pieces of a credential no log line may hold: the whole and each `.` segment, 8 characters or more (shorter ones occur in any text). */
export function secretPieces(credential: string): string[] {
  const pieces = new Set<string>();
  for (const piece of [credential.trim(), ...credential.split('.')]) {
    if (piece.length < 8) continue;
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

/**
 * What the answer owes the request: never a 5xx (the issuer is up, so not
 * even a 503); a refusal is a 401 with `WWW-Authenticate: Bearer
 * error="invalid_token"` pointing at the resource metadata, a JSON-RPC error
 * body, and exactly one `request refused` line at debug naming the reason
 * (`signature` when real claims were edited under the real signature); an
 * accepted token reaches the upstream, whose `initialize` result comes back
 * with a 200.
 */
export function authAnswerProblems(auth: MaterializedAuth, res: WireResponse, newLines: readonly string[], origin: string): string[] {
  const problems: string[] = [];
  if (res.status >= 500) problems.push(`answered ${res.status}, but the issuer is up: no 5xx is allowed`);
  const refusals = refusalLines(newLines);
  const accepted = res.status === 200 && initializeResult(res.body);
  if (auth.expect === Expect.accepted) {
    if (!accepted) problems.push(`a valid token answered ${res.status}, not 200 with the upstream's initialize result`);
    if (refusals.length > 0) problems.push(`a valid token was logged as refused (${JSON.stringify(refusals)})`);
    return problems;
  }
  if (res.status !== 401) problems.push(`answered ${res.status}, not 401`);
  const challenge = res.headers['www-authenticate'] ?? '';
  if (!/^Bearer (?:.*, )?error="invalid_token"(?:,|$)/.test(challenge)) problems.push(`WWW-Authenticate is ${JSON.stringify(challenge)}, not Bearer error="invalid_token"`);
  if (!challenge.includes(`resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`)) problems.push('WWW-Authenticate does not point at the resource metadata');
  const error = jsonRpcError(res.body);
  if (error === undefined) problems.push('the body is not a JSON-RPC error');
  if (refusals.length !== 1) problems.push(`${refusals.length} "request refused" log lines, not 1`);
  const [line] = refusals;
  if (line !== undefined && (line.level !== 20 || line.code !== 'invalid_token' || typeof line.reason !== 'string')) problems.push(`the refusal's log line is ${JSON.stringify(line)}`);
  if (auth.expect === Expect.refusedSignature && line?.reason !== 'signature') problems.push(`edited claims under the real signature were refused for ${String(line?.reason)}, not signature`);
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
