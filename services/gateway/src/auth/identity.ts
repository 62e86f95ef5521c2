import { createHash } from 'node:crypto';
import { identityPrincipal } from '@tether/session-log';
import { AuthError, AuthErrorCode, invalidToken } from './auth-error.js';

/** A verified token's holder: who it is (issuer + subject), what it may do, and until when. */
export interface Identity {
  readonly issuer: string;
  /** The principal claim's value (`sub`, or `--auth-principal-claim`). */
  readonly subject: string;
  readonly scopes: readonly string[];
  /** The token's `exp` in ms since the epoch; undefined when it has none (introspection may omit it). */
  readonly expiresAtMs: number | undefined;
  /** `identityPrincipal(issuer, subject)`: what sessions and tasks are bound to. */
  readonly principal: string;
  /** The token's `aud` values: which routes (resource URIs) it may be used on. */
  readonly audiences: readonly string[];
}

/**
 * The identity from a token's claims (a verified JWT payload or an active
 * introspection answer). The principal claim must be a non-empty string:
 * without it there is nobody to bind a session to.
 */
export function identityFrom(claims: Readonly<Record<string, unknown>>, issuer: string, principalClaim: string): Identity {
  const subject = claims[principalClaim];
  if (typeof subject !== 'string' || subject === '') {
    throw invalidToken('principal_claim', `the access token has no ${principalClaim} claim to identify its holder`);
  }
  const exp = claims.exp;
  return { issuer, subject, scopes: scopesOf(claims), expiresAtMs: typeof exp === 'number' ? exp * 1000 : undefined, principal: identityPrincipal(issuer, subject), audiences: audiencesOf(claims) };
}

/** `aud`: one string or an array of them (RFC 7519 section 4.1.3). */
export function audiencesOf(claims: Readonly<Record<string, unknown>>): string[] {
  if (typeof claims.aud === 'string') return [claims.aud];
  return Array.isArray(claims.aud) ? claims.aud.filter((a): a is string => typeof a === 'string') : [];
}

/** `scope` (RFC 9068, RFC 7662: space separated) or `scp` (an array, as some issuers write it). */
function scopesOf(claims: Readonly<Record<string, unknown>>): string[] {
  if (typeof claims.scope === 'string') return claims.scope.split(' ').filter((s) => s !== '');
  if (Array.isArray(claims.scp)) return claims.scp.filter((s): s is string => typeof s === 'string');
  if (typeof claims.scp === 'string') return claims.scp.split(' ').filter((s) => s !== '');
  return [];
}

/** Refuses an identity that lacks a required scope (403 `insufficient_scope`, naming every scope the request needs). */
export function requireScopes(identity: Identity, required: readonly string[]): void {
  const missing = required.filter((s) => !identity.scopes.includes(s));
  if (missing.length > 0) {
    throw new AuthError(AuthErrorCode.insufficientScope, 'scope', `the access token lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(', ')}`, required);
  }
}

/** Refuses an identity whose token expired (with the tolerated skew), such as an introspection answer still `active` past its `exp`. */
export function requireUnexpired(identity: Identity, clockSkewMs: number, now = Date.now()): void {
  if (identity.expiresAtMs !== undefined && now >= identity.expiresAtMs + clockSkewMs) throw invalidToken('expired', 'the access token expired');
}

/**
 * Refuses claims issued (`iat`) later than now plus the tolerated skew. A
 * token from the future was minted by a clock we cannot trust (or minted
 * ahead to outlive a key's withdrawal); RFC 7519 leaves the check to the
 * recipient, and jose makes it only with `maxTokenAge`.
 */
export function requireIssuedInPast(claims: Readonly<Record<string, unknown>>, clockSkewMs: number, now = Date.now()): void {
  const iat = claims.iat;
  if (typeof iat === 'number' && iat * 1000 > now + clockSkewMs) throw invalidToken('issued_in_future', 'the access token was issued in the future (iat)');
}

/** Cache key of a token: its SHA-256, so no cache holds a usable token. */
export function tokenKey(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('base64url');
}

/**
 * Answers per token, reused until they expire. Bounded: past `maxEntries`
 * the oldest entry goes (insertion order), so a flood of distinct tokens
 * costs memory once, not without end.
 */
export class TokenCache<T> {
  private readonly entries = new Map<string, { value: T; untilMs: number }>();
  constructor(private readonly maxEntries = 10_000) {}

  get(key: string, now = Date.now()): T | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    if (now < entry.untilMs) return entry.value;
    this.entries.delete(key);
    return undefined;
  }

  set(key: string, value: T, untilMs: number): void {
    if (untilMs <= Date.now()) return;
    this.entries.delete(key);
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, untilMs });
  }
}
