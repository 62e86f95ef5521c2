import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * The digest that binds a session to the principal that created it. Callers
 * pass a credential (an `Authorization` value, a configured identity header,
 * a gRPC caller id); only its SHA-256 is stored, base64url.
 * The empty string is a valid credential: anonymous callers share one principal.
 */
export function principalDigest(credential: string): string {
  return createHash('sha256').update('tether-principal\0').update(credential, 'utf8').digest('base64url');
}

/** Constant-time comparison of two digests (length leaks nothing: digests are fixed-size). */
export function samePrincipal(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * The principal of a verified identity: an OAuth token's issuer and subject
 * (or another configured claim). A refreshed or re-issued token for the same
 * subject yields the same digest, so its sessions and tasks continue; the
 * token itself is never part of it. NUL separates the parts: no HTTP header
 * value (what `principalDigest` digests in the other modes) can contain one,
 * so an identity never collides with a raw credential.
 */
export function identityPrincipal(issuer: string, subject: string): string {
  return principalDigest(`identity\0${issuer}\0${subject}`);
}

/** A short, stable, non-reversible label of a principal digest for logs, audit events and the inspector. */
export function principalTag(principal: string): string {
  return principal.slice(0, 12);
}
