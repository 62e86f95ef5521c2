import type { ServiceDefinition } from '@grpc/grpc-js';
import { CursorServiceError } from './errors.js';

/**
 * What a request that does not decode becomes. grpc-js answers a throwing
 * deserializer with a bare INTERNAL ("Error deserializing request") before
 * any handler runs; wrapping the deserializer lets the handlers refuse it as
 * INVALID_ARGUMENT with an ErrorDetail naming the problem, like any other
 * bad input (a value past 2^53 - 1 included: ts-proto refuses it on decode).
 */
export class UndecodableRequest {
  constructor(readonly reason: string) {}
}

export function withSafeDecoding<T extends ServiceDefinition>(service: T): T {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(service)) {
    out[name] = {
      ...method,
      requestDeserialize: (bytes: Buffer): unknown => {
        try {
          return method.requestDeserialize(bytes);
        } catch (err) {
          return new UndecodableRequest(err instanceof Error ? err.message : String(err));
        }
      },
    };
  }
  return out as T;
}

/** Throws the INVALID_ARGUMENT a request that did not decode deserves. */
export function assertDecoded(request: unknown, rpc: string): void {
  if (request instanceof UndecodableRequest) {
    throw new CursorServiceError('invalid_argument', `${rpc} request does not decode as its protobuf message: ${request.reason.slice(0, 200)}`);
  }
}
