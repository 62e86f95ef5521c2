import { createLocalJWKSet, jwtVerify, type JWK, type JWTPayload } from 'jose';
import type { Provider, ProviderErrors, TokenContext } from 'oidc-provider';

// RFC 8693 token exchange for the test authorization server. oidc-provider 9
// has no built-in token exchange; this registers one as the provider's own
// grants are written (lib/actions/grants/): the provider authenticates the
// client and checks that the grant is among its grant_types, and the handler
// validates its parameters and mints an AccessToken model, so format (JWT or
// opaque), TTL and signing come from the resource server's configuration.

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** RFC 8693 section 2.1's parameters; `resource` (RFC 8707) and `audience` may repeat, and are then refused by the handler. */
const PARAMETERS = ['subject_token', 'subject_token_type', 'requested_token_type', 'resource', 'audience', 'scope', 'actor_token', 'actor_token_type'];

export interface TokenExchangeSetup {
  readonly issuer: string;
  readonly algorithm: string;
  /** The provider's signing keys, newest first, old ones kept (private JWKs: only their public members are used). */
  readonly keys: () => readonly JWK[];
  /** The provider's `getResourceServerInfo` for `resource`: throws `InvalidTarget` for one it does not know. */
  readonly resourceServerInfo: (resource: string) => Record<string, unknown> & { readonly scope: string };
  /** Every exchange request that reached the handler, granted or refused. */
  readonly onRequest: () => void;
}

export interface TokenExchangeGrant {
  /** Registers the grant on a provider (each one `rotateSigningKey` builds). */
  register(provider: Provider, errors: ProviderErrors): void;
  /** `extraTokenClaims` of the provider: an exchanged token's `act`, undefined for every other token. */
  claimsOf(token: object): Record<string, unknown> | undefined;
}

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k'];

export function createTokenExchangeGrant(setup: TokenExchangeSetup): TokenExchangeGrant {
  // The token models being minted, and the `act` each gets: extraTokenClaims
  // is called with the model, not with what the handler knows.
  const acts = new WeakMap<object, Record<string, unknown>>();
  return {
    claimsOf: (token) => {
      const act = acts.get(token);
      return act === undefined ? undefined : { act };
    },
    register(provider, errors) {
      const handler = async (ctx: TokenContext): Promise<void> => {
        setup.onRequest();
        const { params, client } = ctx.oidc;
        const subjectToken = params.subject_token;
        if (typeof subjectToken !== 'string' || subjectToken === '') throw new errors.InvalidRequest('missing required parameter subject_token');
        if (params.subject_token_type !== ACCESS_TOKEN_TYPE) throw new errors.InvalidRequest(`unsupported subject_token_type; supported: ${ACCESS_TOKEN_TYPE}`);
        if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
          throw new errors.InvalidRequest(`unsupported requested_token_type; supported: ${ACCESS_TOKEN_TYPE}`);
        }
        if (params.actor_token !== undefined) throw new errors.InvalidRequest('actor_token is not supported (the authenticated client is the actor)');
        // RFC 8693 section 2.1: the target by `resource` (an absolute URI) or `audience` (a name); here both name a resource server.
        const targets = [params.resource, params.audience].flat().filter((t): t is string => typeof t === 'string');
        if (targets.length !== 1) throw new errors.InvalidTarget('exactly one resource or audience is required');
        const target = targets[0]!;
        const info = setup.resourceServerInfo(target);

        // The subject token must be a JWT access token this server issued and
        // still valid: its keys (every generation), its issuer, no clock skew.
        let subject: JWTPayload;
        try {
          const keys = setup.keys().map((key) => Object.fromEntries(Object.entries(key).filter(([name]) => !PRIVATE_MEMBERS.includes(name))));
          ({ payload: subject } = await jwtVerify(subjectToken, createLocalJWKSet({ keys }), {
            issuer: setup.issuer,
            typ: 'at+jwt',
            algorithms: [setup.algorithm],
            requiredClaims: ['exp', 'sub'],
            clockTolerance: 0,
          }));
        } catch {
          throw new errors.InvalidGrant('subject_token is invalid, expired or not issued by this server');
        }

        // The new token carries no scope the subject token lacked: down-scoping only.
        const held = new Set(typeof subject.scope === 'string' ? subject.scope.split(' ') : []);
        const asked = typeof params.scope === 'string' ? params.scope.split(' ') : [...held];
        const refused = asked.filter((s) => !held.has(s));
        if (refused.length > 0) throw new errors.InvalidScope('requested scope exceeds the subject token\'s', refused.join(' '));
        const known = new Set(info.scope.split(' '));
        const scope = asked.filter((s) => known.has(s)).join(' ') || undefined;

        const token = new provider.AccessToken({
          accountId: subject.sub!,
          client,
          gty: TOKEN_EXCHANGE_GRANT,
          scope,
          resourceServer: new provider.ResourceServer(target, info),
        });
        // RFC 8693 section 4.1: `sub` stays the subject's; `act` names the
        // client acting for it, nesting any actor the subject token named.
        acts.set(token, { sub: client.clientId, ...(subject.act === undefined ? {} : { act: subject.act }) });
        ctx.oidc.entity('AccessToken', token);
        const accessToken = await token.save();
        ctx.body = {
          access_token: accessToken,
          issued_token_type: ACCESS_TOKEN_TYPE,
          token_type: token.tokenType,
          expires_in: token.expiration,
          ...(scope === undefined ? {} : { scope }),
        };
      };
      provider.registerGrantType(TOKEN_EXCHANGE_GRANT, handler, PARAMETERS, ['resource', 'audience']);
    },
  };
}
