/** The few JSON-RPC facts the store needs, without the SDK's schemas (no runtime dependency on either SDK). */

/** What both SDKs hand an `EventStore`: a JSON-RPC message object (the priming event is `{}`). */
export type JsonRpcMessage = { readonly [key: string]: unknown };

export type JsonRpcId = string | number;

export function isJsonRpcId(value: unknown): value is JsonRpcId {
  return typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value));
}

/** The SDKs store `{}` as the priming event of a stream (`writePrimingEvent`): an id, no message. */
export function isPrimingMessage(message: JsonRpcMessage): boolean {
  return Object.keys(message).length === 0;
}

/** The id a response answers, when `message` is a JSON-RPC result or error response. */
export function responseIdOf(message: unknown): JsonRpcId | undefined {
  if (typeof message !== 'object' || message === null || Array.isArray(message)) return undefined;
  const m = message as Record<string, unknown>;
  if (m['method'] !== undefined || !('result' in m || 'error' in m)) return undefined;
  return isJsonRpcId(m['id']) ? m['id'] : undefined;
}

/** `responseIdOf` on stored bytes; unreadable bytes answer nothing. */
export function responseIdOfBytes(payload: Uint8Array): JsonRpcId | undefined {
  try {
    return responseIdOf(JSON.parse(Buffer.from(payload).toString('utf8')));
  } catch {
    return undefined;
  }
}

/** Ids are compared as JSON does: `1` and `"1"` are different requests. */
export function idKey(id: JsonRpcId): string {
  return typeof id === 'number' ? `n:${id}` : `s:${id}`;
}

export function errorResponse(id: JsonRpcId | null, code: number, message: string, data?: Readonly<Record<string, unknown>>): JsonRpcMessage {
  return { jsonrpc: '2.0', id, error: { code, message, ...(data === undefined ? {} : { data }) } };
}
