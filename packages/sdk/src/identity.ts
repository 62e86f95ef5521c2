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
  /** Not a principal by default (`identityOfAuthInfo`); it is one with `clientPrincipalOf`. */
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
 * - subject: `authInfo.extra.sub`, a non-empty string, or no identity at
 *   all. Never the client id: a public client or a Client ID Metadata
 *   Document URL is shared by every user of an app, and all of them would be
 *   one principal, sharing sessions and durable tasks. A client-credentials
 *   token needs no exception: RFC 9068 §2.2 puts the client id in its `sub`.
 *   To bind sessions to clients on purpose, pass `clientPrincipalOf`.
 *
 * @throws TetherSdkError `no_identity` when there is no `extra.sub` (the
 *   SDK's demo and introspection verifiers give none): nothing is bound, and
 *   the router answers 500, a fault of the server's verifier.
 */
export function identityOfAuthInfo(authInfo: SdkAuthInfo): SdkIdentity {
  const subject = nonEmpty(authInfo.extra?.['sub']);
  if (subject === undefined) {
    throw new TetherSdkError(
      TetherSdkErrorCode.noIdentity,
      "the verified token names no subject (authInfo.extra.sub): the server's token verifier must put the token's sub in authInfo.extra (or the server must choose client principals, principalOf: clientPrincipalOf)",
    );
  }
  return { issuer: issuerOf(authInfo), subject };
}

/**
 * A `principalOf` that binds sessions and durable tasks to the **client**,
 * not to the user: with `authInfo`, the identity `{ issuer: extra.iss or '',
 * subject: authInfo.clientId }`, whatever `extra.sub` says; without, the
 * router's default (the `Authorization` value as a credential, or '').
 * Opt in with `createSessionRouter({ ..., principalOf: clientPrincipalOf })`.
 *
 * Caution: every token of one client id is then one principal. Use it only
 * when each client id belongs to one party (confidential clients acting for
 * themselves). A public client, a pre-registered client shared by an app's
 * users, or a Client ID Metadata Document URL would let every user of that
 * app read and continue the others' sessions and tasks.
 *
 * A client's principal is the identity a client-credentials token of that
 * client has by default (RFC 9068 §2.2: `sub` is the client id), so both
 * modes agree on a client acting for itself.
 *
 * @throws TetherSdkError `no_identity` when `authInfo.clientId` is empty
 *   (answered 500 by the router).
 */
export function clientPrincipalOf(request: Request, authInfo: SdkAuthInfo | undefined): SdkPrincipalSource {
  if (authInfo === undefined) return credentialOf(request);
  const subject = nonEmpty(authInfo.clientId);
  if (subject === undefined) {
    throw new TetherSdkError(TetherSdkErrorCode.noIdentity, "the verified token names no client (authInfo.clientId), and the server binds sessions to clients (principalOf: clientPrincipalOf): the server's token verifier must set clientId");
  }
  return { issuer: issuerOf(authInfo), subject };
}

/** The principal digest a session is bound to: a credential's digest, or an identity's. The token itself never reaches it. */
export function principalOfSource(source: SdkPrincipalSource): string {
  return typeof source === 'string' ? principalDigest(source) : identityPrincipal(source.issuer, source.subject);
}

/** The router's default `principalOf`: the verified identity (its `sub`) when there is a token, else the `Authorization` value (or '': anonymous). */
export function defaultPrincipalOf(request: Request, authInfo: SdkAuthInfo | undefined): SdkPrincipalSource {
  return authInfo === undefined ? credentialOf(request) : identityOfAuthInfo(authInfo);
}

function credentialOf(request: Request): string {
  return request.headers.get('authorization') ?? '';
}

function issuerOf(authInfo: SdkAuthInfo): string {
  return nonEmpty(authInfo.extra?.['iss']) ?? '';
}

function nonEmpty(value: unknown): string | undefined {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
