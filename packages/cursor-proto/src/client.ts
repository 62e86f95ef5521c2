import { credentials, InterceptingCall } from '@grpc/grpc-js';
import type { ChannelCredentials, ChannelOptions, ClientOptions, Interceptor } from '@grpc/grpc-js';
import { CursorServiceClient } from './gen/tether/cursor/v1/cursor.js';

/** TLS settings of a client; PEM text or bytes. */
export interface CursorClientTls {
  /** CA that signed the server's certificate. Default: the system roots. */
  readonly ca?: string | Uint8Array;
  /** Client certificate and key, for mTLS. */
  readonly cert?: string | Uint8Array;
  readonly key?: string | Uint8Array;
  /** Expected name in the server's certificate when it differs from the target host. */
  readonly serverName?: string;
}

export interface CursorClientOptions {
  /** `host:port` of a session-log service (or a balancer in front of several). */
  readonly target: string;
  /** Sent as `authorization: Bearer <token>` on every call. Default: none. */
  readonly token?: string;
  /** Use TLS (or mTLS with `cert` and `key`). Default: plaintext. */
  readonly tls?: CursorClientTls;
  /** Extra grpc-js channel options; they override the defaults below. `interceptors` run before the token's. */
  readonly channelOptions?: ChannelOptions;
}

/**
 * Defaults: keepalive pings every 30 s so a dead connection under a long
 * `Resume` is noticed, and a 64 MiB receive limit (a `Read` page or an
 * `AppendBatch` answer can be large; single events are limited server-side).
 */
const DEFAULT_CHANNEL_OPTIONS: ChannelOptions = {
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
};

/**
 * The generated client, connected and authenticating. The token travels as
 * call metadata added by an interceptor rather than as call credentials:
 * grpc-js refuses call credentials on plaintext channels, and loopback or
 * in-cluster plaintext with a token is a supported setup.
 */
export function createCursorClient(options: CursorClientOptions): CursorServiceClient {
  return new CursorServiceClient(...clientArguments(options));
}

/** The target, credentials and channel options of a generated client: shared by the cursor and operator clients. */
export function clientArguments(options: CursorClientOptions): [string, ChannelCredentials, Partial<ClientOptions>] {
  const interceptors: Interceptor[] = [...((options.channelOptions?.['interceptors'] as Interceptor[] | undefined) ?? [])];
  if (options.token !== undefined) interceptors.push(bearerInterceptor(options.token));
  const channelOptions: Partial<ClientOptions> = { ...DEFAULT_CHANNEL_OPTIONS, ...options.channelOptions, interceptors };
  if (options.tls?.serverName !== undefined) channelOptions['grpc.ssl_target_name_override'] = options.tls.serverName;
  return [options.target, channelCredentials(options.tls), channelOptions];
}

function channelCredentials(tls: CursorClientTls | undefined): ChannelCredentials {
  if (tls === undefined) return credentials.createInsecure();
  const buf = (v: string | Uint8Array | undefined): Buffer | null => (v === undefined ? null : Buffer.from(v));
  return credentials.createSsl(buf(tls.ca), buf(tls.key), buf(tls.cert));
}

/** Adds `authorization: Bearer <token>` to every call's metadata. */
export function bearerInterceptor(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (options, nextCall) =>
    new InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set('authorization', value);
        next(metadata, listener);
      },
    });
}
