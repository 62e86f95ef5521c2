// Just the parts of oidc-provider 9.x that `authorization-server.ts` uses:
// the package ships no types, and `@types/oidc-provider` lags the 9.x line.
// Nothing here is exported from `@tether/testing`, so the package's emitted
// declarations never mention these names.

declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  /** The memory adapter's factory: one storage for every model. */
  export type AdapterFactory = (model: string) => unknown;

  export interface Grant {
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
  }

  export interface Interaction {
    readonly uid: string;
    readonly params: Readonly<Record<string, unknown>>;
    readonly prompt: {
      readonly name: string;
      readonly details: {
        readonly missingOIDCScope?: readonly string[];
        readonly missingResourceScopes?: Readonly<Record<string, readonly string[]>>;
      };
    };
    readonly session?: { readonly accountId: string };
  }

  /** What a grant handler registered with `registerGrantType` sees of the token request. */
  export interface TokenContext {
    readonly oidc: {
      readonly params: Readonly<Record<string, string | string[] | undefined>>;
      readonly client: { readonly clientId: string };
      entity(name: string, value: unknown): void;
    };
    body: unknown;
  }

  export interface AccessToken {
    readonly tokenType: string;
    /** Seconds until it expires. */
    readonly expiration: number;
    save(): Promise<string>;
  }

  /** Loosely typed: the configuration is checked by the provider at construction. */
  export type Configuration = Record<string, unknown>;

  export class Provider {
    constructor(issuer: string, configuration: Configuration);
    readonly issuer: string;
    readonly Grant: new (init: { accountId: string; clientId: string }) => Grant;
    readonly AccessToken: new (init: {
      accountId: string;
      client: TokenContext['oidc']['client'];
      gty: string;
      scope: string | undefined;
      resourceServer: unknown;
    }) => AccessToken;
    readonly ResourceServer: new (identifier: string, info: Record<string, unknown>) => unknown;
    registerGrantType(name: string, handler: (ctx: TokenContext) => Promise<void>, params: Iterable<string>, dupes?: Iterable<string>): void;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<Interaction>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: 'server_error', listener: (ctx: unknown, err: Error) => void): this;
    /** Koa middleware, run around the provider's own routes. */
    use(middleware: (ctx: ProviderContext, next: () => Promise<void>) => Promise<void>): this;
  }

  /** The Koa context as middleware sees it: the route, the answer, and the entities (tokens, grant) the route loaded. */
  export interface ProviderContext {
    readonly path: string;
    body: unknown;
    readonly oidc?: { readonly entities: Readonly<Record<string, unknown>> };
  }

  export interface ProviderErrors {
    readonly InvalidTarget: new (description?: string) => Error;
    readonly InvalidGrant: new (description?: string) => Error;
    readonly InvalidRequest: new (description?: string) => Error;
    readonly InvalidScope: new (description: string, scope: string) => Error;
  }

  export const errors: ProviderErrors;

  export default Provider;
}

declare module 'oidc-provider/lib/adapters/memory_adapter.js' {
  import type { AdapterFactory } from 'oidc-provider';
  /** A fresh LRU storage (1000 entries, two generations) shared by every model of the adapter. */
  export function createMemoryAdapter(clockTolerance?: number): AdapterFactory;
}
