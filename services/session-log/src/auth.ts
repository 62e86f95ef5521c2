import { createHash, timingSafeEqual } from 'node:crypto';
import { ServerInterceptingCall, status } from '@grpc/grpc-js';
import type { Metadata, ServerInterceptor, ServerUnaryCall } from '@grpc/grpc-js';
import { CursorServiceError, ServiceErrorCode, toGrpcStatus } from './errors.js';
import { recordRefusedCall } from './tracing.js';

/** grpc-js does not export the type by name. */
type AuthContext = ReturnType<ServerUnaryCall<unknown, unknown>['getAuthContext']>;

/** A configured bearer token: the caller's name and the SHA-256 of its secret. */
export interface TokenEntry {
  readonly name: string;
  readonly digest: Buffer;
}

/** Calls that need no credentials: load balancers and orchestrators probe health without a token. */
const PUBLIC_PREFIXES = ['/grpc.health.v1.Health/'];
const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const MIN_SECRET_LENGTH = 16;

const sha256 = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

/**
 * Parses `name:secret` or bare `secret` specs (a bare secret is named
 * `token-<first 8 hex of its SHA-256>`). The name is the caller's identity:
 * sessions opened with a token belong to its name, so rotating a secret under
 * the same name keeps them. Secrets shorter than 16 characters are refused.
 */
export function parseTokens(specs: readonly string[]): TokenEntry[] {
  const entries: TokenEntry[] = [];
  for (const raw of specs) {
    const spec = raw.trim();
    if (spec === '') continue;
    const colon = spec.indexOf(':');
    const name = colon > 0 && NAME.test(spec.slice(0, colon)) ? spec.slice(0, colon) : undefined;
    const secret = name === undefined ? spec : spec.slice(colon + 1);
    if (secret.length < MIN_SECRET_LENGTH) {
      throw new Error(`a token secret must be at least ${MIN_SECRET_LENGTH} characters${name === undefined ? '' : ` (token '${name}')`}`);
    }
    const digest = sha256(secret);
    entries.push({ name: name ?? `token-${digest.toString('hex').slice(0, 8)}`, digest });
  }
  return entries;
}

/**
 * Who is calling. With tokens configured, a valid `authorization: Bearer`
 * names the caller; with mTLS, a verified client certificate does
 * (`cert:<subject CN>`). With neither configured every caller is
 * `anonymous`. A presented but wrong token is refused even when a certificate
 * would do: wrong credentials are never silently ignored.
 */
export class Authenticator {
  readonly #tokens: readonly TokenEntry[];
  readonly #mtls: boolean;

  constructor(tokens: readonly TokenEntry[], mtls: boolean) {
    this.#tokens = tokens;
    this.#mtls = mtls;
  }

  /** The caller's id, or undefined when the call must be refused. */
  callerOf(metadata: Metadata, auth: AuthContext): string | undefined {
    const header = metadata.get('authorization')[0];
    if (typeof header === 'string' && header !== '') {
      const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
      return match?.[1] === undefined ? undefined : this.#match(match[1]);
    }
    if (this.#mtls) {
      const cn = auth.sslPeerCertificate?.subject?.CN;
      if (typeof cn === 'string' && cn !== '') return `cert:${cn}`;
      const fingerprint = auth.sslPeerCertificate?.fingerprint256;
      return typeof fingerprint === 'string' && fingerprint !== '' ? `cert:${fingerprint}` : undefined;
    }
    return this.#tokens.length === 0 ? 'anonymous' : undefined;
  }

  /** Like `callerOf`, for handlers: throws `unauthenticated` (the interceptor normally refused such calls first). */
  requireCaller(metadata: Metadata, auth: AuthContext): string {
    const caller = this.callerOf(metadata, auth);
    if (caller === undefined) throw unauthenticated();
    return caller;
  }

  /**
   * Compares against every configured token, whatever matched before:
   * SHA-256 first makes both sides 32 bytes (timingSafeEqual needs equal
   * lengths, and the length of a secret must not leak either).
   */
  #match(token: string): string | undefined {
    const presented = sha256(token);
    let found: string | undefined;
    for (const entry of this.#tokens) {
      if (timingSafeEqual(presented, entry.digest) && found === undefined) found = entry.name;
    }
    return found;
  }
}

/** The operator API's methods: authenticated by operator tokens only (operator.proto). */
export const OPERATOR_PREFIX = '/tether.operator.v1.OperatorService/';

/**
 * Refuses every call but the health service's before its handler runs.
 * Cursor API calls are checked against the cursor tokens (or mTLS, or
 * anonymous when neither is configured); operator API calls against the
 * operator tokens only, never anonymous, and with none configured they
 * are PERMISSION_DENIED `operator_api_off`. The two sets never stand in
 * for each other: an operator token is no cursor caller, and a cursor
 * token (or a client certificate) is no operator.
 */
export function authInterceptor(cursor: Authenticator, operator: Authenticator | undefined): ServerInterceptor {
  return (method, call) =>
    new ServerInterceptingCall(call, {
      start: (next) => {
        next({
          onReceiveMetadata: (metadata, nextMetadata) => {
            const isOperator = method.path.startsWith(OPERATOR_PREFIX);
            const auth = isOperator ? operator : cursor;
            if (PUBLIC_PREFIXES.some((p) => method.path.startsWith(p)) || (auth !== undefined && auth.callerOf(metadata, call.getAuthContext()) !== undefined)) {
              nextMetadata(metadata);
              return;
            }
            const refusal =
              auth === undefined
                ? new CursorServiceError(ServiceErrorCode.operatorApiOff, 'the operator API is off: start tether-session-log with --operator-token (or --operator-token-file)')
                : unauthenticated(isOperator);
            const failure = toGrpcStatus(refusal);
            call.sendStatus({ code: failure.code, details: failure.details, metadata: failure.metadata });
            recordRefusedCall(method.path, metadata, failure.code);
          },
        });
      },
    });
}

function unauthenticated(operator = false): CursorServiceError {
  return new CursorServiceError(
    ServiceErrorCode.unauthenticated,
    operator ? 'missing or invalid operator credentials: send authorization: Bearer <operator token> (a --operator-token of the service; cursor tokens are not accepted here)' : 'missing or invalid credentials: send authorization: Bearer <token>, or a client certificate',
  );
}
