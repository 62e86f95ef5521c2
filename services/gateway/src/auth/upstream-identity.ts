import type { Identity } from './identity.js';

/** With `--upstream-auth strip`: the principal digest (what Tether binds sessions to; stable across token refreshes). */
export const TETHER_PRINCIPAL = 'tether-principal';
/**
 * With `--upstream-auth strip`: who the verified caller is, as base64url
 * JSON `{"iss","sub","scope"}`, for an upstream that acts per user. Base64url
 * because a subject may hold characters a header value cannot.
 * Clients never set these: the gateway forwards only an allowlist of
 * request headers (upstream.ts), and these are not on it.
 */
export const TETHER_IDENTITY = 'tether-identity';

export function upstreamIdentity(identity: Identity): string {
  return Buffer.from(JSON.stringify({ iss: identity.issuer, sub: identity.subject, scope: identity.scopes.join(' ') }), 'utf8').toString('base64url');
}
