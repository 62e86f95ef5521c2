/**
 * Access to the inspector. One secret, two ways to present it:
 * - the JSON API takes `Authorization: Bearer <token>`;
 * - the page takes the token once (`/?token=…` or the login form), answers
 *   with an HttpOnly, SameSite=Strict cookie holding a random login id (never
 *   the token), and redirects to a URL without the token, so it stays out of
 *   the address bar, the history and any Referer.
 * Tokens are compared by their SHA-256 with `timingSafeEqual`, so the time a
 * comparison takes says nothing about how much of a guess was right (the
 * digests have one length whatever the guess).
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The cookie's name; `__Host-` would need Secure, which a loopback http listener cannot set. */
export const LOGIN_COOKIE = 'tether_inspect';

export interface InspectAuthOptions {
  /** Accepted tokens (at least one). */
  readonly tokens: readonly string[];
  /** How long a login cookie is honoured. Default 12 h. */
  readonly loginTtlMs?: number;
  /** Most logins kept at once; the oldest is forgotten past it. Default 1000. */
  readonly maxLogins?: number;
  /** Clock, for tests. Default `Date.now`. */
  readonly now?: () => number;
}

export interface InspectAuth {
  /** True when `token` is one of the accepted tokens (constant time per token). */
  tokenMatches(token: string): boolean;
  /** True when the request carries a valid bearer token or login cookie. */
  allows(req: IncomingMessage): boolean;
  /** A new login: the `Set-Cookie` header value to send. */
  login(): string;
  /** Forgets the request's login, if any: the `Set-Cookie` header value that clears it. */
  logout(req: IncomingMessage): string;
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

export function createInspectAuth(options: InspectAuthOptions): InspectAuth {
  if (options.tokens.length === 0) throw new Error('createInspectAuth needs at least one token');
  const digests = options.tokens.map(sha256);
  const ttlMs = options.loginTtlMs ?? 12 * 60 * 60 * 1000;
  const maxLogins = options.maxLogins ?? 1000;
  const now = options.now ?? Date.now;
  /** Login id digest (hex) → expiry. A Map keeps insertion order: the first key is the oldest. */
  const logins = new Map<string, number>();

  const tokenMatches = (token: string): boolean => {
    const digest = sha256(token);
    let ok = false;
    // Every token is compared, even after a match, so the count of configured tokens is all that timing shows.
    for (const d of digests) ok = timingSafeEqual(d, digest) || ok;
    return ok;
  };
  const loginOf = (req: IncomingMessage): string | undefined => {
    for (const part of (req.headers.cookie ?? '').split(';')) {
      const eq = part.indexOf('=');
      if (eq !== -1 && part.slice(0, eq).trim() === LOGIN_COOKIE) return part.slice(eq + 1).trim();
    }
    return undefined;
  };
  const cookie = (value: string, maxAgeS: number): string => `${LOGIN_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeS}`;

  return {
    tokenMatches,
    allows(req) {
      const header = req.headers.authorization;
      if (header !== undefined) {
        // A presented header decides: a wrong bearer token is refused even with a valid cookie.
        const m = /^Bearer +(\S+) *$/i.exec(header);
        return m !== null && tokenMatches(m[1]!);
      }
      const id = loginOf(req);
      if (id === undefined || !/^[A-Za-z0-9_-]{43}$/.test(id)) return false;
      // Login ids are kept by digest and looked up by it: a Map lookup on the digest of a random 256-bit value leaks nothing usable.
      const key = sha256(id).toString('hex');
      const expiry = logins.get(key);
      if (expiry === undefined) return false;
      if (expiry <= now()) {
        logins.delete(key);
        return false;
      }
      return true;
    },
    login() {
      const id = randomBytes(32).toString('base64url');
      logins.set(sha256(id).toString('hex'), now() + ttlMs);
      while (logins.size > maxLogins) logins.delete(logins.keys().next().value as string);
      return cookie(id, Math.floor(ttlMs / 1000));
    },
    logout(req) {
      const id = loginOf(req);
      if (id !== undefined) logins.delete(sha256(id).toString('hex'));
      return cookie('', 0);
    },
  };
}
