import { SseParser } from '@tether/protocol';
import { MediaType, mediaTypeOf } from './wire.js';

/** A JSON-RPC id, as sent. */
export type JsonRpcId = string | number;

/** What the guard needs to know about a request body. */
export interface RpcRequestInfo {
  /** Ids of the requests in the body (not notifications or responses). */
  readonly requestIds: readonly JsonRpcId[];
  /** True when the body is an `initialize` request. */
  readonly initialize: boolean;
}

const NONE: RpcRequestInfo = { requestIds: [], initialize: false };

/** Reads a JSON-RPC body (one message or a batch). Total: anything unreadable is `NONE`. */
export function inspectRpcBody(body: string | undefined): RpcRequestInfo {
  if (body === undefined) return NONE;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return NONE;
  }
  const messages = Array.isArray(parsed) ? parsed : [parsed];
  const requestIds: JsonRpcId[] = [];
  let initialize = false;
  for (const m of messages) {
    if (typeof m !== 'object' || m === null) continue;
    const { id, method } = m as { id?: unknown; method?: unknown };
    if (typeof method !== 'string') continue;
    if (typeof id === 'string' || typeof id === 'number') requestIds.push(id);
    if (method === 'initialize') initialize = true;
  }
  return { requestIds, initialize };
}

/** The `initialize` body with another request id, so a re-initialization never reuses the client's ids. */
export function withRequestId(body: string, id: JsonRpcId): string {
  const parsed = JSON.parse(body) as Record<string, unknown>;
  return JSON.stringify({ ...parsed, id });
}

/** `result.protocolVersion` from an initialize answer (JSON or SSE), if present. */
export function protocolVersionOf(text: string, contentType: string | null): string | undefined {
  const candidates: string[] = [];
  if (mediaTypeOf(contentType) === MediaType.sse) {
    const parser = new SseParser();
    for (const m of parser.push(text + '\n\n')) candidates.push(m.data);
  } else {
    candidates.push(text);
  }
  for (const c of candidates) {
    try {
      const v = (JSON.parse(c) as { result?: { protocolVersion?: unknown } }).result?.protocolVersion;
      if (typeof v === 'string') return v;
    } catch {
      // not JSON: keep looking
    }
  }
  return undefined;
}

/** The JSON-RPC `notifications/initialized` body. */
export const INITIALIZED_NOTIFICATION = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' });
