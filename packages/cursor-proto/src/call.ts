import { Metadata } from '@grpc/grpc-js';
import type { CallOptions, ClientUnaryCall, ServiceError } from '@grpc/grpc-js';

/** The four-argument form every generated unary method has. */
export type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: Partial<CallOptions>,
  callback: (error: ServiceError | null, response: Res) => void,
) => ClientUnaryCall;

export interface UnaryCallOptions {
  /** Deadline from now; the server sees it and the call fails DEADLINE_EXCEEDED past it. Default none. */
  readonly deadlineMs?: number;
  /** Extra metadata (e.g. `traceparent`). */
  readonly metadata?: Metadata;
  /** Aborting cancels the call (CANCELLED). */
  readonly signal?: AbortSignal;
}

/**
 * A generated unary method as a promise: `callUnary(client.append.bind(client), request, { deadlineMs: 5000 })`.
 * Rejects with the grpc-js `ServiceError`; read it with `readCallFailure`.
 */
export function callUnary<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, options: UnaryCallOptions = {}): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    const callOptions: Partial<CallOptions> = options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs };
    const call = method(request, options.metadata ?? new Metadata(), callOptions, (err, response) => {
      options.signal?.removeEventListener('abort', cancel);
      if (err !== null) reject(err);
      else resolve(response);
    });
    const cancel = (): void => call.cancel();
    if (options.signal?.aborted === true) cancel();
    else options.signal?.addEventListener('abort', cancel, { once: true });
  });
}
