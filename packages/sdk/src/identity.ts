import { identityPrincipal, principalDigest } from '@tether/session-log';
import { TetherSdkError, TetherSdkErrorCode } from './errors.js';

/**
 * A verified access token as both SDKs describe it (`AuthInfo` of
 * `@modelcontextprotocol/sdk/server/auth/types.js` and of
 * `@modelcontextprotocol/server`): what a bearer-auth middleware sets on
 * `req.auth`, and what tool handlers read as `extra.authInfo` (v1) or
 * `ctx.http.authInfo` (v2). Declared here so this package needs neither SDK.
 */
export interface SdkAuthInfo {
  /** The access token. Passed on to the SDK transport; never stored or logged by Tether. */
  readonly token: string;
  readonly clientId: string;
  readonly scopes: readonly string[];
  /** Seconds since the epoch. */
  readonly expiresAt?: number;
  readonly resource?: URL;
  /** Whatever the verifier adds; the router reads `iss` and `sub` here (strings). */
  readonly extra?: Readonly<Record<string, unknown>>;
}

/** Who the caller is, as the authorization server says: its issuer and the subject it issued the token for. */
export interface SdkIdentity {
  readonly issuer: string;
  readonly subject: string;
}

/**
 * What a `principalOf` answers: a credential (a string, bound by its digest:
 * another string is another principal, so a refreshed token is a stranger),
 * or a verified identity (bound by `identityPrincipal(issuer, subject)`: any
 * token for the same issuer and subject is the same principal).
 */
export type SdkPrincipalSource = string | SdkIdentity;

/**
 * The identity a verified token stands for (the router's default when a
 * request carries `authInfo`; export it to compose your own `principalOf`).
 *
 * - issuer: `authInfo.extra.iss` when it is a non-empty string, else `''`
 *   (fine for a server that trusts one issuer; with several, put `iss` in
 *   `extra`, or two issuers' equal subjects are one principal);
 * - subject: `authInfo.extra.sub` when it is a non-empty string, else
 *   `authInfo.clientId`. That is what RFC 9068 §2.2 puts in `sub` when no
 *   resource owner is involved (client credentials), and what a verifier
 *   that exposes no subject (the SDK's demo and introspection examples)
 *   gives. Caution: every user of one client id is then one principal,
 *   sharing sessions and durable tasks. With a client id shared by many
 *   users (a Client ID Metadata Document URL, a pre-registered public
 *   client), the verifier must put the user's `sub` in `extra`.
 *
 * @throws TetherSdkError `no_identity` when the token names neither a
 *   subject nor a client: no principal can be told apart, so nothing is
 *   bound (the router answers 500, a fault of the server's verifier).
 */
export function identityOfAuthInfo(authInfo: SdkAuthInfo): SdkIdentity {
  const issuer = nonEmpty(authInfo.extra?.['iss']) ?? '';
  const subject = nonEmpty(authInfo.extra?.['sub']) ?? nonEmpty(authInfo.clientId);
  if (subject === undefined) {
    throw new TetherSdkError(TetherSdkErrorCode.noIdentity, 'the verified token names no subject (authInfo.extra.sub) and no client (authInfo.clientId): the caller cannot be told apart from others');
  }
  return { issuer, subject };
}

/** The principal digest a session is bound to: a credential's digest, or an identity's. The token itself never reaches it. */
export function principalOfSource(source: SdkPrincipalSource): string {
  return typeof source === 'string' ? principalDigest(source) : identityPrincipal(source.issuer, source.subject);
}

/** The router's default `principalOf`: the verified identity when there is one, else the `Authorization` value (or '': anonymous). */
export function defaultPrincipalOf(request: Request, authInfo: SdkAuthInfo | undefined): SdkPrincipalSource {
  return authInfo === undefined ? (request.headers.get('authorization') ?? '') : identityOfAuthInfo(authInfo);
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
